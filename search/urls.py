"""The URLs a crawl may fetch (the design documents' URL), and what identifies a server.

:func:`check_url` is the one check of a seed, a sites-file or admin URL, a link and a
redirect: absolute, of a scheme the crawler has a download handler for
(:data:`URL_SCHEMES`), with a valid host and port, no control characters or spaces, at most
:data:`MAX_URL_LENGTH` characters.  :func:`origin` is ``scheme://host:port/``, the key of a
server (the design documents' CServer) everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

#: The port of a URL of each scheme that names none.
DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21, "news": 119, "nntp": 119}


def origin(url: str) -> str:
    """``scheme://host:port/`` of a URL: what identifies a server."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    default = DEFAULT_PORTS.get(scheme)
    port = parts.port or default
    netloc = f"[{host}]" if ":" in host else host
    if port and port != default:
        netloc = f"{netloc}:{port}"
    return f"{scheme}://{netloc}/"


#: The schemes a crawl may fetch (news and nntp: spidersite.nntp): a seed, a server or a
#: sites-file URL of any other scheme (``file:``, ``data:``, ``s3:``, ``javascript:`` …)
#: is refused, so no sites file and no admin form can point the crawler at the machine it
#: runs on.
URL_SCHEMES = ("http", "https", "ftp", "news", "nntp")
#: The schemes of a proxy (Scrapy's HttpProxyMiddleware speaks HTTP to it).
PROXY_SCHEMES = ("http", "https")


def has_scheme(url: Any, schemes: Iterable[str] = URL_SCHEMES) -> bool:
    """Whether *url* is absolute with one of *schemes* (case-insensitive), with nothing
    before its scheme that a browser would skip (spaces, control characters)."""
    if not isinstance(url, str) or not url[:1].isalpha():
        return False
    try:
        return urlsplit(url).scheme.lower() in schemes
    except ValueError:
        return False


#: Longest URL accepted (Scrapy's ``URLLENGTH_LIMIT`` default, the limit of old browsers).
MAX_URL_LENGTH = 2083


def check_url(url: Any, max_length: int | None = MAX_URL_LENGTH) -> str:
    """The URL if it is an absolute http, https, ftp, news or nntp URL with a valid host,
    at most *max_length* characters and no control characters, else ValueError."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("empty URL")
    url = url.strip()
    if max_length and len(url) > max_length:
        raise ValueError(f"{url[:60]!r}… is longer than {max_length} characters")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        # urlsplit drops tabs, newlines and leading control characters before it reads
        # the scheme: check the text as given, not what urlsplit makes of it.
        raise ValueError(f"{url!r} contains control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ValueError(f"{url!r} cannot be parsed: {exc}") from None
    if parts.scheme.lower() not in URL_SCHEMES:
        raise ValueError(f"{url!r} is not an http, https, ftp, news or nntp URL")
    if not parts.hostname:
        raise ValueError(f"{url!r} has no host")
    if ":" not in parts.hostname:  # an IPv6 literal is checked by urlsplit
        try:
            parts.hostname.encode("idna")
        except UnicodeError:
            raise ValueError(f"{url!r} has an invalid host") from None
    if any(c.isspace() for c in url):
        raise ValueError(f"{url!r} contains spaces")
    return url
