"""A page's main content, apart from its boilerplate (navigation, header, breadcrumbs,
sidebars, footer).

The extractor is trafilatura (its own rules and link-density tests, without its fallback
extractors: ``fast``), run where the page is analyzed, in an analysis process or the
crawl's worker (:mod:`search.analysispool`), never on the crawler's reactor thread.  Its
text becomes the page's body (what is stored, what snippets and phrase checks read); the
rest of the page's text, as words (:func:`search.analysis.remainder_words`), becomes the
``boilerplate`` section, which is indexed at the server's ``boilerplateweight`` rather
than dropped: a page still matches on the words of its menus, only far below the pages
that are about them.
"""

from __future__ import annotations

import logging
import re
import sys
import unicodedata
from dataclasses import dataclass
from functools import cache
from typing import Any

from lxml import etree

from search.analysis import get_analyzer, remainder_words

logger = logging.getLogger(__name__)

#: A bigger page is not split (its whole text is its body): the extractor's time grows
#: faster than the page (1.7 MB of HTML: 3.6 s of CPU), and such pages are indexes and
#: tables of contents, all links, whose "main content" is the whole of them anyway.
MAX_HTML_BYTES = 1_000_000

_WS_RE = re.compile(r"\s+")
#: The extractor's marks of plain text: a list item's "- ", a table row's outer "|".
_MARKS_RE = re.compile(r"(?m)^(?:- |\| )|(?: \|)$")
#: The extractor's caches of strings (``functools.lru_cache`` of its ``utils`` module),
#: capped in entries, not bytes: ``trim`` keeps the text of up to 1,024 elements (a whole
#: article's, a whole page's), ``line_processing`` up to 1,024 lines; on pages of 100 KB
#: of text that is hundreds of megabytes.  :func:`release_caches` empties them.
_EXTRACTOR_CACHES = ("trim", "line_processing")


@dataclass(frozen=True, slots=True)
class Content:
    """A page's text split in two: *main* (the body, as text) and the other words (the
    boilerplate), with the words of each as the analyzer reads them (the page's analysis
    counts them without reading the texts again)."""

    main: str
    main_words: list[str]
    boilerplate_words: list[str]

    @property
    def boilerplate(self) -> str:
        """The boilerplate as text: its words, in their order on the page."""
        return " ".join(self.boilerplate_words)


def main_text(html: bytes, encoding: str | None = None) -> str | None:
    """The main content of an HTML page as one line of text; None when the extractor finds
    none (an empty page, a page of links only) or fails."""
    if not html.strip() or len(html) > MAX_HTML_BYTES:
        return None
    # Imported here, by the worker's first page: the crawler, which imports the worker's
    # module for its handle on it, does not load the extractor (~0.3 s).
    import trafilatura

    markup = html.decode(encoding or "utf-8", "replace")
    try:
        tree = trafilatura.load_html(markup)
        if tree is None:
            return None
        flatten_code(tree)
        text = trafilatura.extract(tree, options=_options())
    except Exception:  # hostile markup: the whole text stays the body
        logger.debug("No main content extracted", exc_info=True)
        return None
    if not text:
        return None
    return _WS_RE.sub(" ", _MARKS_RE.sub("", text)).strip() or None


def flatten_code(tree: Any) -> None:
    """Remove the ``<span>`` elements within the ``<pre>`` and ``<code>`` elements of the
    lxml *tree*, their text and tails kept in place: a highlighter's markup (Pygments,
    highlight.js; Sphinx wraps each inline literal in one too), a fifth to a half of a
    documentation page's elements.  The extractor tests every element against its
    discard rules, which are about the page's chrome, never within code; without these
    elements it keeps the same words in 18 % less time on the corpus (benchmarks/README.md,
    "Main-content extraction")."""
    for element in list(tree.iter("pre", "code")):
        etree.strip_tags(element, "span")


@cache
def _options() -> Any:
    """The extractor's options, made once: ``fast`` (its own rules, no fallback
    extractors), tables kept, comments and its deduplication off.  Made per call from
    keywords, they cost ~5 % of its time (its configuration read again each time); it
    copies them where it changes them, so one object serves every page."""
    from trafilatura.settings import Extractor

    return Extractor(fast=True, comments=False, tables=True, dedup=False)


def split_content(
    html: bytes, text: str, encoding: str | None = None, language: str | None = None
) -> Content | None:
    """*text* (the page's whole text, as :func:`spidersite.extract.extract_html` reads it)
    split into main content and boilerplate; None when there is no main content to split
    off (then the whole text is the body)."""
    main = main_text(html, encoding)
    if main is None:
        return None
    analyzer = get_analyzer(language)
    main_words = analyzer.words(main)
    whole = analyzer.words(as_extracted(text))
    return Content(main, main_words, remainder_words(whole, main_words))


@cache
def _unprintable() -> re.Pattern[str]:
    """The characters the extractor drops from its text that can join two words when
    dropped: format characters (the soft hyphen, the zero-width space and joiners, the
    byte-order mark …) and controls, not spaces (it drops private-use, unassigned and
    surrogate code points too, which a page's text holds too rarely to be worth a slower
    pattern: a class of the 10,000 such characters of the Basic Multilingual Plane made
    the check 3.5 ms a 100 kB text, against 0.3)."""
    bmp = [
        cp
        for cp in range(0x10000)
        if unicodedata.category(chr(cp)) in ("Cc", "Cf") and not chr(cp).isspace()
    ]
    astral = [0x110BD, 0x110CD, *range(0x13430, 0x13440), *range(0x1BCA0, 0x1BCA4)]
    astral += [*range(0x1D173, 0x1D17B), 0xE0001, *range(0xE0020, 0xE0080)]
    ranges: list[tuple[int, int]] = []
    for cp in [*bmp, *astral]:
        if ranges and cp == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    parts = (re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in ranges)
    return re.compile("[" + "".join(parts) + "]")


def as_extracted(text: str) -> str:
    """*text* with the characters the extractor drops removed, in Unicode's composed form
    (NFC), as the extractor returns its text: the page's words and the main content's
    are then read alike, and the remainder holds no words made by the difference ("in"
    and "formation" of a soft-hyphenated "in\u00adformation"; a decomposed "café")."""
    if text.isascii():  # no format character, composed (its controls are spaces already)
        return text
    pattern = _unprintable()
    if pattern.search(text):
        text = pattern.sub("", text)
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text


def release_caches() -> None:
    """Empty the extractor's caches of strings (:data:`_EXTRACTOR_CACHES`), once a batch is
    analyzed: what they hold is then a batch's at most (their hits are within a page, an
    element's text trimmed again; a page's lines repeat on another page rarely enough
    that ``line_processing`` had no hit on 500 pages of the synthetic site).  A no-op
    before the extractor is loaded."""
    utils = sys.modules.get("trafilatura.utils")
    for name in _EXTRACTOR_CACHES:
        clear = getattr(getattr(utils, name, None), "cache_clear", None)
        if clear is not None:
            clear()
