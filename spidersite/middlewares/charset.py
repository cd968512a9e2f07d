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

charset-normalizer's best guess for a short text in a Latin-script language is often a
neighbour of the right encoding (cp1250 or cp1257 for Italian or French in windows-1252:
its letters differ only in the few accented ones).  So when its guess is a single-byte
Latin-script encoding, windows-1252 (the HTML standard's default for undeclared pages in
the Latin-script world) is preferred, provided it decodes the body and is one of the
detector's candidates not clearly worse than its best (a mess ratio at most
:data:`CLEARLY_BETTER` higher).  A page whose ``<html lang>`` names a language with another
legacy encoding (Czech, Polish, Hungarian: windows-1250; Lithuanian, Latvian, Estonian:
windows-1257; Turkish: windows-1254; …, after the HTML standard's table of suggested
defaults) prefers that encoding on the same terms.

UTF-16 and UTF-32: a ``<meta>`` that declares them means UTF-8 (the HTML standard: a page
that can declare anything in ASCII bytes is not UTF-16), and a body without NUL bytes is
not UTF-16 or UTF-32 text whatever the header says (it is then read as undeclared).  A
header ``charset=utf-16`` (or ``utf-32``) without a BOM is read little-endian unless the
body starts with a NUL byte.

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
low, so it sees bodies after the decompression middleware (590) has decompressed them, and
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
import re
from typing import TYPE_CHECKING, Any

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

#: Codecs of UTF-16 and UTF-32, as :func:`codecs.lookup` names them.
WIDE = frozenset("utf-16 utf-16-le utf-16-be utf-32 utf-32-le utf-32-be".split())

#: Codecs of multi-byte encodings, as :func:`codecs.lookup` names them.
MULTIBYTE = frozenset(
    """
    utf-8 utf-16 utf-16-le utf-16-be utf-32 gb18030 gbk gb2312 hz big5 big5hkscs cp950
    euc_jp euc_jis_2004 euc_jisx0213 shift_jis shift_jis_2004 shift_jisx0213 cp932
    iso2022_jp euc_kr cp949 johab iso2022_kr
    """.split()
)


#: Single-byte encodings of Latin-script languages (charset-normalizer's candidates).
LATIN_SINGLE_BYTE = frozenset(
    codecs.lookup(name).name
    for name in """
    cp1250 cp1252 cp1254 cp1257 cp1258 latin_1 iso8859_2 iso8859_3 iso8859_4 iso8859_9
    iso8859_10 iso8859_13 iso8859_14 iso8859_15 iso8859_16 mac_latin2 mac_roman mac_iceland
    mac_turkish mac_croatian mac_romanian cp437 cp775 cp850 cp852 cp857 cp858 cp860 cp861
    cp863 cp865 hp_roman8
    """.split()
)

#: The default of an undeclared Latin-script page: windows-1252.
LATIN_DEFAULT = ("cp1252",)

#: Languages (of ``<html lang>``) whose legacy encoding is another Latin one, after the
#: HTML standard's "suggested default encoding" table, with the sibling encoding in use.
LANGUAGE_ENCODINGS = {
    **dict.fromkeys(("cs", "hr", "sk"), ("cp1250", "iso8859-2")),
    **dict.fromkeys(("hu", "pl", "sl"), ("cp1250", "iso8859-2")),
    "ro": ("iso8859-16", "cp1250"),
    **dict.fromkeys(("et", "lt", "lv"), ("cp1257", "iso8859-13", "iso8859-4")),
    **dict.fromkeys(("tr", "ku"), ("cp1254", "iso8859-9")),
    "vi": ("cp1258",),
}

#: How much lower charset-normalizer's mess ratio ("chaos", 0 to 1) of its best candidate
#: must be than that of the preferred Latin encoding for the best to win.  The accented
#: letters of a short page read in a neighbouring encoding weigh 0.01 to 0.04.
CLEARLY_BETTER = 0.05

_HTML_LANG = re.compile(rb"<html\b[^>]*?\blang\s*=\s*[\"']?\s*([a-z]{2,3})\b", re.IGNORECASE)


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
    except (UnicodeError, LookupError):  # utf-16 without a BOM: a plain UnicodeError
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

    matches = from_bytes(sample)
    best = matches.best()
    name = codec_name(best.encoding) if best is not None else None
    if name is None or not decodes(sample, name, final=not cut):
        return "utf-8" if mostly_decodes(sample, "utf-8") else None
    if name in LATIN_SINGLE_BYTE:
        assert best is not None
        return preferred_latin(sample, matches, best.chaos, final=not cut) or name
    return name


def page_language(body: bytes) -> str | None:
    """The primary language subtag of the ``<html lang>`` near the top of *body*."""
    found = _HTML_LANG.search(body, 0, 4096)
    return found.group(1).decode("ascii").lower() if found else None


def preferred_latin(sample: bytes, matches: Any, best_chaos: float, final: bool) -> str | None:
    """The page's preferred Latin encoding (that of its ``<html lang>``, else
    windows-1252), if it decodes *sample* and is one of the detector's *matches* not
    :data:`CLEARLY_BETTER` worse than the best; else None."""
    preferred = LANGUAGE_ENCODINGS.get(page_language(sample) or "", LATIN_DEFAULT)
    usable = [codec for codec in preferred if decodes(sample, codec, final=final)]
    for match in matches:  # best first
        if match.chaos > best_chaos + CLEARLY_BETTER:
            break
        # The encodings that would read the sample as this match does.
        same = {codec_name(name) for name in (match.encoding, *match.could_be_from_charset)}
        for codec in usable:
            if codec in same:
                return codec
    return None


def declared_encoding(content_type: str | None, body: bytes) -> tuple[str | None, str | None]:
    """(codec, source) of what the page declares: BOM, HTTP header, then the body."""
    bom, _ = read_bom(body)
    if bom:
        return codec_name(bom), "bom"
    header = codec_name(http_content_type_encoding(content_type))
    if header:
        return header, "header"
    meta = codec_name(html_body_declared_encoding(body))
    if meta in WIDE:
        # A page that declares itself in ASCII bytes is not UTF-16 (the HTML standard).
        return "utf-8", "meta"
    if meta:
        return meta, "meta"
    return None, None


def wide_codec(declared: str, body: bytes) -> str | None:
    """The UTF-16 or UTF-32 codec of a *body* declared *declared* in the HTTP header
    (without a BOM), or None if the body is no such text (it has no NUL byte)."""
    sample = body[:4096]
    if b"\x00" not in sample:
        return None
    if declared in ("utf-16", "utf-32"):  # no BOM: little-endian unless it starts with NUL
        declared += "-be" if sample[:1] == b"\x00" else "-le"
    return declared if mostly_decodes(body, declared) else None


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
    if declared in WIDE:
        wide = wide_codec(declared, body)
        if wide is not None:
            return wide, "declared"
        guess = "utf-8" if body.isascii() else detect(body, max_bytes)
        return (guess, "corrected") if guess else (None, "undetected")
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
            if encoding is None:
                return response
            self.stats.inc_value("charset/declared")
            if codec_name(response.encoding) == encoding:
                return response
            # Read as declared where Scrapy would not: a <meta> UTF-16 is UTF-8, a header
            # UTF-16 without a BOM has its byte order.
            return response.replace(encoding=encoding)
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
