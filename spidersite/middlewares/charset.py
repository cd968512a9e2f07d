"""Decide the character encoding of HTML and text pages, and detect it when it is missing
or wrong.

Scrapy trusts any declaration, so a page whose declaration is wrong (a GBK page that says
``charset=utf-8``, a Big5 page that says ``iso-8859-1``) comes out as mojibake; and its guess
for an undeclared body (ASCII, UTF-8, then charset-normalizer, per response, lazily) is not
counted anywhere.  This middleware decides the encoding once, on the decompressed body:

1. a byte-order mark (it is the bytes themselves speaking: the HTML standard and Scrapy
   let it win over any declaration);
2. the ``charset`` of the HTTP ``Content-Type`` header;
3. ``<meta charset>`` or ``<meta http-equiv="Content-Type">`` (or an XML declaration) near
   the top of the body;
4. none of them, or the declared one does not decode the body cleanly: the body is
   strict UTF-8 if it decodes as such, else what charset-normalizer detects.

A declared encoding "does not decode cleanly" when decoding fails on more than a few stray
bytes, when the body is valid non-ASCII UTF-8 but declared otherwise (text in another
encoding is practically never valid UTF-8 by chance), or when a single-byte encoding
(Latin-1, cp1252, KOI8-R …) would read a body that the detector reads as a multi-byte
encoding (GBK, Big5, Shift_JIS …) as Latin letters and symbols.  A GBK page declared as
Big5 (or the reverse) that happens to decode strictly is not caught: both are valid
double-byte text, and only a language model could tell.

Encoding names go through :func:`w3lib.encoding.resolve_encoding`, which maps ``gbk`` and
``gb2312`` to their superset ``gb18030`` and ``big5`` to ``big5hkscs``, as browsers do.
The response is replaced by one with an explicit ``encoding``; the spider reads
``response.encoding`` and hands it to lxml with the raw body.

Priority 585 in ``DOWNLOADER_MIDDLEWARES``: ``process_response`` runs from high numbers to
low, so it sees bodies after HttpCompressionMiddleware (590) has decompressed them, and
before MetaRefreshMiddleware (580) reads ``response.text``.

Switch off with ``CHARSET_ENABLED = False``.  ``CHARSET_DETECT_MAX_BYTES`` (default
262144) caps the bytes the detector reads.

Stats: ``charset/declared`` (a declaration or BOM was used), ``charset/detected`` (nothing
usable was declared; the encoding was detected), ``charset/corrected`` (the declaration was
wrong; counted in ``charset/detected`` too), ``charset/undetected`` (the detector gave up;
Scrapy's own guess stands).
"""

from __future__ import annotations

import codecs
import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.http import TextResponse, XmlResponse
from w3lib.encoding import (
    html_body_declared_encoding,
    http_content_type_encoding,
    read_bom,
    resolve_encoding,
)

from spidersite.crawlsettings import crawl_settings

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: Content types whose encoding this middleware decides (an empty type is sniffed).
TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")

#: Codecs of multi-byte encodings, as :func:`codecs.lookup` names them.
MULTIBYTE = frozenset(
    """
    utf-8 utf-16 utf-16-le utf-16-be utf-32 gb18030 gbk gb2312 hz big5 big5hkscs cp950
    euc_jp euc_jis_2004 euc_jisx0213 shift_jis shift_jis_2004 shift_jisx0213 cp932
    iso2022_jp euc_kr cp949 johab iso2022_kr
    """.split()
)


def codec_name(encoding: str | None) -> str | None:
    """The canonical codec name of *encoding* (browser aliases applied), None if unknown."""
    if not encoding:
        return None
    resolved = resolve_encoding(encoding)
    if not resolved:
        return None
    try:
        return codecs.lookup(resolved).name
    except LookupError:
        return None


def decodes(body: bytes, encoding: str, final: bool = True) -> bool:
    """Whether *body* decodes strictly (no replacement character needed) as *encoding*.

    With *final* false, an incomplete character at the end (a cut sample) is allowed.
    """
    try:
        codecs.getincrementaldecoder(encoding)().decode(body, final=final)
    except (UnicodeDecodeError, LookupError):
        return False
    return True


def mostly_decodes(body: bytes, encoding: str) -> bool:
    """Whether *body* decodes as *encoding* with at most a few stray bytes: no more than
    2 replacement characters, or 1 % of the non-ASCII characters (a page with one broken
    byte keeps its declared UTF-8; a GBK page read as UTF-8 fails almost everywhere)."""
    if decodes(body, encoding):
        return True
    try:
        text = body.decode(encoding, "replace")
    except LookupError:
        return False
    bad = text.count("\ufffd")
    non_ascii = len(text) - len(text.encode("ascii", "ignore"))
    return bad <= max(2, non_ascii // 100)


def detect(body: bytes, max_bytes: int = 262_144) -> str | None:
    """The encoding of an undeclared *body*: UTF-8 if valid, else charset-normalizer's."""
    sample = body[:max_bytes]
    cut = len(sample) < len(body)
    if decodes(sample, "utf-8", final=not cut):
        return "utf-8"
    from charset_normalizer import from_bytes

    best = from_bytes(sample).best()
    name = codec_name(best.encoding) if best is not None else None
    if name is None or not decodes(sample, name, final=not cut):
        return "utf-8" if mostly_decodes(sample, "utf-8") else None
    return name


def declared_encoding(content_type: str | None, body: bytes) -> tuple[str | None, str | None]:
    """(codec, source) of what the page declares: BOM, HTTP header, then the body."""
    bom, _ = read_bom(body)
    if bom:
        return codec_name(bom), "bom"
    header = codec_name(http_content_type_encoding(content_type))
    if header:
        return header, "header"
    meta = codec_name(html_body_declared_encoding(body))
    if meta:
        return meta, "meta"
    return None, None


def choose_encoding(
    content_type: str | None, body: bytes, max_bytes: int = 262_144
) -> tuple[str | None, str]:
    """The encoding to read *body* with, and how it was found.

    The second value is ``"declared"`` (the declaration holds), ``"detected"`` (nothing was
    declared), ``"corrected"`` (the declaration was wrong) or ``"undetected"``.
    """
    declared, source = declared_encoding(content_type, body)
    if declared and source == "bom":
        return declared, "declared"
    if declared == "utf-8" and mostly_decodes(body, declared):
        return declared, "declared"
    if declared and body.isascii():
        return declared, "declared"
    if declared and decodes(body, "utf-8"):
        # Non-ASCII text in another encoding is practically never valid UTF-8 by chance.
        return "utf-8", "corrected"
    if declared in MULTIBYTE and mostly_decodes(body, declared):
        return declared, "declared"
    if declared and decodes(body, declared):
        # A single-byte charset decodes anything: is the body really multi-byte text?
        guess = detect(body, max_bytes)
        if guess in MULTIBYTE:
            return guess, "corrected"
        return declared, "declared"
    if not declared and body.isascii():
        return None, "declared"  # nothing to decide: every ASCII-compatible codec agrees
    guess = detect(body, max_bytes)
    if guess is None:
        return None, "undetected"
    return guess, "corrected" if declared else "detected"


class CharsetMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        config = crawl_settings(crawler)
        if not config.charset_enabled:
            raise NotConfigured("CHARSET_ENABLED is off")
        self.crawler = crawler
        self.stats = crawler.stats
        self.max_bytes = config.charset_detect_max_bytes

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CharsetMiddleware:
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        if not isinstance(response, TextResponse) or isinstance(response, XmlResponse):
            return response
        if not response.body or request.method == "HEAD":
            return response
        raw_type = response.headers.get(b"Content-Type")
        content_type = raw_type.decode("latin-1") if raw_type else None
        mime = (content_type or "").split(";")[0].strip().lower()
        if mime and mime not in TEXT_TYPES:
            return response
        encoding, how = choose_encoding(content_type, response.body, self.max_bytes)
        if how == "declared":
            if encoding is not None:
                self.stats.inc_value("charset/declared")
            return response
        if how == "undetected" or encoding is None:
            self.stats.inc_value("charset/undetected")
            logger.debug(
                "No encoding detected for %s; using %s",
                response.url,
                response.encoding,
                extra={"spider": self.crawler.spider},
            )
            return response
        self.stats.inc_value("charset/detected")
        if how == "corrected":
            self.stats.inc_value("charset/corrected")
        logger.debug(
            "Encoding of %s: %s (%s)",
            response.url,
            encoding,
            how,
            extra={"spider": self.crawler.spider},
        )
        return response.replace(encoding=encoding)
