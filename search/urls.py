"""The URLs a crawl may fetch (the design documents' URL), and what identifies a server.

:func:`check_url` is the one check of a seed, a sites-file or admin URL, a link and a
redirect: absolute, of a scheme the crawler has a download handler for
(:data:`URL_SCHEMES`), with a valid host and port, no control characters or spaces, at most
:data:`MAX_URL_LENGTH` characters.  :func:`origin` is ``scheme://host:port/``, the key of a
server (the design documents' CServer) everywhere; :func:`without_default_port` drops a
port a URL needs not name, as :func:`origin` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
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


def without_default_port(url: str) -> str:
    """*url* without the port its scheme has by default (``http://h:80/p`` is
    ``http://h/p``), as :func:`origin` reads it; any other URL as it is."""
    scheme, sep, rest = url.partition("://")
    if not sep or ":" not in rest:
        return url
    end = len(rest)
    for mark in "/?#":
        at = rest.find(mark, 0, end)
        if at >= 0:
            end = at
    host, colon, port = rest[:end].rpartition(":")
    if not colon or not port.isdigit() or int(port) != DEFAULT_PORTS.get(scheme.lower()):
        return url
    return f"{scheme}://{host}{rest[end:]}"


def netloc(url: str) -> str:
    """A stored URL's network location as written (``host`` or ``host:port``): what the
    index keeps as a page's ``host``, for ``site:``; empty for a URL without one."""
    return url.split("/")[2] if "://" in url else ""


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


#: A control character (C0 or DEL) anywhere in a URL.
_CONTROL = re.compile("[\x00-\x1f\x7f]")
#: A space of any kind (what ``str.isspace`` calls one) anywhere in a URL.
_SPACE = re.compile(r"\s")


@lru_cache(maxsize=1024)
def _valid_host(host: str) -> bool:
    """Whether *host* (not an IPv6 literal) can be written in IDNA: a few hosts per crawl,
    each checked once."""
    try:
        host.encode("idna")
    except UnicodeError:
        return False
    return True


def check_url(url: Any, max_length: int | None = MAX_URL_LENGTH) -> str:
    """The URL if it is an absolute http, https, ftp, news or nntp URL with a valid host,
    at most *max_length* characters and no control characters, else ValueError."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("empty URL")
    url = url.strip()
    if max_length and len(url) > max_length:
        raise ValueError(f"{url[:60]!r}… is longer than {max_length} characters")
    if _CONTROL.search(url):
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
    host = parts.hostname
    if not host:
        raise ValueError(f"{url!r} has no host")
    if ":" not in host and not _valid_host(host):  # an IPv6 literal is checked by urlsplit
        raise ValueError(f"{url!r} has an invalid host")
    if _SPACE.search(url):
        raise ValueError(f"{url!r} contains spaces")
    return url
