"""What a page says about itself: title, meta keywords and description, robots directives
(its ``<meta name="robots">``, and its ``X-Robots-Tag`` header: :func:`robots_header`),
language, body text and links.  Pure functions over bytes, parsed once with lxml (a news
article with the standard library's email parser)."""

from __future__ import annotations

import email.policy
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import BytesParser
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import Any
from urllib.parse import urljoin, urlsplit

import lxml.etree
import lxml.html

from spidersite.items import LinkRecord

#: Elements whose text is not part of what a reader sees.
_SKIP_TAGS = ("script", "style", "noscript", "template", "svg", "head")
#: Runs of white space and of control characters (C0, DEL, C1): a control character has no
#: place in a title or in indexed text, and a terminal acts on it (ESC, C1's CSI).
_WS_RE = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")
#: Control characters but the white space of plain text (tab, newline, CR, FF, VT).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]+")
_IGNORED_SCHEMES = (
    "javascript:",
    "mailto:",
    "data:",
    "tel:",
    "about:",
    "file:",
    "irc:",
    "ftp+",
    "callto:",
    "sms:",
    "geo:",
    "magnet:",
    "blob:",
)

#: URL suffixes of files that are recorded (type, size) but not word-indexed.
FILE_SUFFIXES = frozenset(
    """
    7z aac apk avi bin bmp bz2 csv dmg doc docx deb dvi eot eps epub exe flac flv gif gz
    ico iso jar jpeg jpg js json m4a m4v mkv mov mp3 mp4 mpeg mpg msi odp ods odt ogg
    ogv otf pdf png ppt pptx ps psd rar rpm rtf svg svgz swf tar tgz tif tiff ttf txz
    wasm wav webm webp wma wmv woff woff2 xls xlsx xz zip zst css
    """.split()
)


def normalize_space(text: str) -> str:
    """*text* on one line: each run of white space or control characters one space."""
    return _WS_RE.sub(" ", text).strip()


def plain_text(text: str) -> str:
    """A ``text/plain`` body as stored: its lines kept, each run of control characters one
    space."""
    return _CONTROL_RE.sub(" ", text)


def url_suffix(url: str) -> str:
    path = url.split("?", 1)[0].split("#", 1)[0]
    last = path.rsplit("/", 1)[-1]
    return last.rsplit(".", 1)[-1].lower() if "." in last else ""


def is_file_url(url: str) -> bool:
    return url_suffix(url) in FILE_SUFFIXES


@dataclass(slots=True)
class Extracted:
    title: str | None = None
    keywords: str | None = None
    description: str | None = None
    language: str | None = None
    text: str = ""
    links: list[LinkRecord] = field(default_factory=list)
    noindex: bool = False
    nofollow: bool = False
    #: Link elements on the page, kept or not (see *max_links*).
    link_total: int = 0
    #: Links whose URL cannot be parsed (dropped).
    links_invalid: int = 0
    #: When the document says it was written (a news article's Date).
    date: datetime | None = None


#: What urljoin rewrites in a path: an empty segment (or a host, ``//``), a dot segment,
#: parameters (``;``), and the tabs and line breaks urlsplit removes.
_JOIN_REWRITES = re.compile(r"//|/\.|[;\t\r\n]")


def _plain_rooted(href: str) -> bool:
    """Whether *href* is a path from the root that urljoin would leave as it is
    (:data:`_JOIN_REWRITES`, and no empty query, which it drops).
    ``tests/test_unit_extract.py`` checks the join against urljoin's on random paths."""
    return (
        href[:1] == "/"
        and not _JOIN_REWRITES.search(href)
        and not href.split("#", 1)[0].endswith("?")
    )


@lru_cache(maxsize=64)
def _root(base: str) -> str | None:
    """``scheme://host`` of an http, https or ftp *base* (a page's links share it), else
    None (urljoin decides)."""
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https", "ftp") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}"


def absolute_link(base: str, href: str) -> str | None:
    """The absolute URL of *href* on a page at *base*, fragment dropped; None if it is no
    link to follow (a fragment, ``javascript:``, ``mailto:`` …); ValueError if it cannot be
    parsed (a broken IPv6 literal)."""
    href = href.strip()
    if not href or href.startswith("#"):
        return None
    lowered = href[:12].lower()
    if lowered.startswith(_IGNORED_SCHEMES):
        return None
    if lowered.startswith(("news:", "nntp:")):  # a news URL is only followed with a host
        return href if lowered.startswith(("news://", "nntp://")) else None
    root = _root(base) if _plain_rooted(href) else None
    # urljoin parses the base again for each link (~15 µs): a plain path from the root
    # only needs the base's scheme and host before it.
    url = (root + href if root else urljoin(base, href)).split("#", 1)[0]
    if not url.startswith(("http://", "https://", "ftp://")):
        return None
    return url


def extract_html(
    url: str, body: bytes, encoding: str | None, max_links: int | None = None
) -> Extracted:
    """Parse an HTML page once and pull out everything the crawler keeps.

    *max_links* keeps only the first that many distinct links (``link_total`` still counts
    every link element): a page of 100,000 links must not stall the crawl.
    """
    out = Extracted()
    if not body.strip():
        return out
    if encoding and encoding.lower().replace("_", "-").startswith(("utf-16", "utf-32")):
        # libxml2 knows these under other names (UTF-16LE …): give it UTF-8.
        body = body.decode(encoding, "replace").lstrip("\ufeff").encode("utf-8")
        encoding = "utf-8"
    parser = lxml.html.HTMLParser(
        encoding=encoding or "utf-8", remove_comments=True, remove_pis=True
    )
    try:
        root = lxml.html.document_fromstring(body, parser=parser)
    except (lxml.etree.ParserError, ValueError):
        return out

    lang = root.get("lang") or root.get("{http://www.w3.org/XML/1998/namespace}lang")
    out.language = lang.strip() if lang else None

    head_title = root.find(".//title")
    if head_title is not None:
        out.title = normalize_space(head_title.text_content()) or None

    for meta in root.iter("meta"):
        name = (meta.get("name") or meta.get("http-equiv") or "").strip().lower()
        content = meta.get("content")
        if content is None:
            continue
        if name == "keywords":
            out.keywords = normalize_space(content) or None
        elif name == "description":
            out.description = normalize_space(content) or None
        elif name in ("robots", AGENT):
            noindex, nofollow = robots_directives(d.strip().lower() for d in content.split(","))
            out.noindex = out.noindex or noindex
            out.nofollow = out.nofollow or nofollow
        elif name == "content-language" and not out.language:
            out.language = content.split(",")[0].strip() or None

    base = url
    base_el = root.find(".//base[@href]")
    if base_el is not None:
        try:
            base = absolute_link(url, base_el.get("href", "")) or url
        except ValueError:
            base = url

    seen: dict[str, int] = {}
    links = out.links
    for el in root.iter("a", "area", "frame", "iframe"):
        href = el.get("href") if el.tag in ("a", "area") else el.get("src")
        if not href:
            continue
        out.link_total += 1
        if max_links is not None and len(links) >= max_links:
            continue
        try:
            target = absolute_link(base, href)
        except ValueError:
            out.links_invalid += 1
            continue
        if target is None:
            continue
        rel = (el.get("rel") or "").lower()
        nofollow = "nofollow" in rel
        anchor = normalize_space(el.text_content() if el.tag == "a" else (el.get("alt") or ""))
        position = seen.get(target)
        if position is None:
            seen[target] = len(links)
            links.append(LinkRecord(target, anchor[:500], nofollow))
        else:  # keep the first anchor; a followed duplicate makes the link followed
            if not nofollow and links[position].nofollow:
                links[position].nofollow = False

    body_el = root.find("body")
    container = body_el if body_el is not None else root
    for bad in list(container.iter(*_SKIP_TAGS)):
        if bad.tail:  # keep the words around a dropped element apart
            bad.tail = " " + bad.tail
        bad.drop_tree()
    out.text = normalize_space(" ".join(container.itertext()))
    return out


_MESSAGE_ID_RE = re.compile(r"<([^<>\s]+)>")


#: Our agent's name in robots directives (``<meta name="spidersite">``, X-Robots-Tag).
AGENT = "spidersite"
#: X-Robots-Tag directives written ``name: value`` (any other ``name:`` names an agent).
_VALUED_DIRECTIVES = frozenset(
    ("unavailable_after", "max-snippet", "max-image-preview", "max-video-preview")
)


def robots_header(values: list[bytes] | list[str]) -> tuple[bool, bool]:
    """(noindex, nofollow) of the ``X-Robots-Tag`` header lines *values*.

    Each line is a comma-separated list of directives, as in ``<meta name="robots">``
    (``noindex``, ``nofollow``, ``none``); ``agent: directives`` makes the directives that
    follow it (to the end of the line) apply to that agent only, and only ours
    (:data:`AGENT`) and those naming no agent count.
    """
    ours: set[str] = set()
    for value in values:
        line = value.decode("latin-1") if isinstance(value, bytes) else value
        agent: str | None = None
        for token in line.split(","):
            name, colon, rest = token.partition(":")
            name = name.strip().lower()
            if colon and name not in _VALUED_DIRECTIVES and " " not in name:
                agent, token = name, rest
            if agent is None or agent == AGENT:
                ours.add(token.strip().lower())
    return robots_directives(ours)


def robots_directives(directives: Iterable[str]) -> tuple[bool, bool]:
    """(noindex, nofollow) of lower-case robots directives: ``none`` is both."""
    found = set(directives)
    return bool(found & {"noindex", "none"}), bool(found & {"nofollow", "none"})


def extract_article(
    url: str, raw: bytes, article_url: Callable[[str, str], str], max_links: int | None = None
) -> Extracted:
    """A news article (RFC 5536, as ``ARTICLE`` returns it): its Subject as title, its
    body as text, its From and Date as description (``From: …; Date: …``), its
    Newsgroups as keywords, its Date as date, and the articles its ``References`` (and
    ``In-Reply-To``) name as links (``article_url(url, message_id)`` makes their URLs), not
    followed: they are older articles of the thread."""
    out = Extracted()
    msg = BytesParser(policy=email.policy.default).parsebytes(raw)
    subject, author, date = (_header(msg, name) for name in ("subject", "from", "date"))
    out.title = subject or None
    details = [f"From: {author}" if author else "", f"Date: {date}" if date else ""]
    out.description = "; ".join(d for d in details if d) or None
    out.keywords = _header(msg, "newsgroups").replace(",", ", ") or None
    out.date = parse_http_date(date)
    try:
        part = msg.get_body(preferencelist=("plain", "html"))
        body = part.get_content() if part is not None else ""
        if part is not None and part.get_content_type() == "text/html":
            body = extract_html(url, body.encode(), "utf-8", 0).text
    except (KeyError, LookupError, ValueError, AssertionError):  # a broken MIME part
        payload = msg.get_payload(decode=True)
        body = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    out.text = normalize_space(str(body))
    refs = " ".join([_header(msg, "references"), _header(msg, "in-reply-to")])
    for mid in dict.fromkeys(_MESSAGE_ID_RE.findall(refs)):
        out.link_total += 1
        if max_links is None or len(out.links) < max_links:
            out.links.append(LinkRecord(article_url(url, mid), "", nofollow=True))
    return out


def _header(msg: Any, name: str) -> str:
    try:
        value = msg.get(name)
    except (ValueError, IndexError, TypeError):  # an undecodable header
        return ""
    return normalize_space(str(value)) if value is not None else ""


def parse_http_date(value: bytes | str | None) -> datetime | None:
    """A Last-Modified header as an aware datetime; None when absent or not a date."""
    if not value:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed
