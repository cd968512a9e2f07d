"""The analyzer shared by the crawler and the query side.

A text is reduced to words in one way only, so that a word typed in a query meets the same
word read on a page:

    tokenize  ->  segment CJK runs (jieba)  ->  fold  ->  drop stop words  ->  stem

A word is a run of word characters and the combining marks that continue them (Hindi
"हिन्दी" is one word, not its letters).  Folding is Unicode's NFKC_Casefold (:func:`fold`,
as ICU's ``nfkc_cf`` normalizer): a word typed in decomposed form, in full-width letters
or with a ligature is the same word as its plain form; an ASCII word is only lowercased.
Stemming uses the Snowball stemmer of the text's language (``english`` by default); Chinese,
Japanese and Korean words are never stemmed.  Every token keeps its surface form (the folded
word) beside its stem, as the design documents' WORD record does (word, normal form, count).

:func:`analyze_document` counts each stem per *section* of a page (body, title, URL words,
description, keywords, boilerplate) and weighs it with the server's section weights.  The
body is the page's main content; *boilerplate* is the rest of its text (navigation, header,
breadcrumbs, sidebars, footer: :mod:`search.content`), kept at a low weight.
"""

from __future__ import annotations

import re
import sys
import threading
import unicodedata
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate, compress, count, islice
from operator import not_
from typing import Any
from urllib.parse import unquote

import snowballstemmer

from search.wordchars import IGNORABLE, MARKS, char_class, code_points

#: Sections of a page, in the order used by :attr:`WordRecord.counts`.
SECTIONS: tuple[str, ...] = ("body", "title", "url", "desc", "keywords", "boilerplate")

#: Default section weights (the design documents' bodyweight, titleweight, urlweight,
#: descweight and keywordweight, and boilerplateweight: the words of a page outside its main
#: content count a fifth of a body word).
DEFAULT_WEIGHTS: dict[str, float] = {
    "body": 1.0,
    "title": 4.0,
    "url": 2.0,
    "desc": 2.0,
    "keywords": 2.0,
    "boilerplate": 0.2,
}

#: Longest token kept; longer "words" are base64 blobs, hashes and similar noise.
MAX_TOKEN_LENGTH = 64

#: Bytes of the caches of stems (:meth:`Analyzer.stem`) of a process's shared analyzers
#: (:func:`get_analyzer`: one a Snowball language, all of them within this one budget);
#: past it the caches start again empty.  An entry is counted as
#: its word's and its stem's strings (``sys.getsizeof``) and :data:`STEM_ENTRY_BYTES` of
#: the dictionary's: ~170 bytes for a word of 12 letters, so 8 MB hold ~50,000 words
#: (a third fewer in a process that makes snippets: :meth:`Analyzer.track_surfaces`).
#: (Before: up to 500,000 words, ~85 MB measured; 16 MB until the analysis became a
#: process of its own, 2026-12-04.)
STEM_CACHE_BYTES = 8 * 1024 * 1024


def set_stem_cache_bytes(limit: int) -> None:
    """Cap the caches of stems of this process at *limit* bytes (from the next
    word stemmed on): a process that answers queries for long holds more of the index's
    vocabulary than a crawl's processes, whose memory is bounded by
    :data:`STEM_CACHE_BYTES` (``python -m search serve``: ``SPIDERSITE_STEM_CACHE_MB``)."""
    global STEM_CACHE_BYTES
    if limit < 1:
        raise ValueError("the stem cache needs at least one byte")
    STEM_CACHE_BYTES = limit


#: A dictionary entry's own bytes (its hash, key and value, and the table's free slots),
#: as measured with ``tracemalloc``: 53 bytes an entry at 180,000 entries.
STEM_ENTRY_BYTES = 56
#: A word's place in its stem's tuple of :attr:`Analyzer.surfaces`, and a tuple's own
#: bytes (``sys.getsizeof``).  Tuples, not lists: the collector stops tracking a tuple of
#: strings, so a large cache adds nothing to the full collections' work.
SURFACE_BYTES = 8
SURFACES_BYTES = 40
_TRACKING_LOCK = threading.Lock()

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
# What continues a word besides word characters (\w): combining marks (Mn, Mc, Me: an
# accent typed as a character of its own, the vowel signs and viramas of Indic scripts,
# which \w leaves out), and the soft hyphen and the zero-width joiner and non-joiner, as
# Unicode's word boundaries (UAX #29) keep them inside words.  A word starts with a word
# character.
_IN_WORD_RANGES = [*code_points(MARKS), (0x00AD, 0x00AD), (0x200C, 0x200D)]
_IN_WORD = char_class(_IN_WORD_RANGES)
# The same characters as two classes, those of the Basic Multilingual Plane and the others:
# a class of BMP characters alone is tested in one step (a bitmap), one with others range
# by range, 300 of them at every word's end (words found 2.5 times slower); the others are
# tested only before a character beyond the BMP.
_IN_WORD_BMP = char_class([r for r in _IN_WORD_RANGES if r[1] <= 0xFFFF])
_IN_WORD_ASTRAL = char_class([r for r in _IN_WORD_RANGES if r[0] > 0xFFFF])
_MARKS_AFTER = rf"(?:[{_IN_WORD_BMP}]+|(?=[\U00010000-\U0010ffff])[{_IN_WORD_ASTRAL}]+)"
# A CJK run, or a word of characters that are not CJK.
_TOKEN_RE = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+(?:{_MARKS_AFTER}[^\W{_CJK}]*)*")
_CJK_RE = re.compile(rf"[{_CJK}]")
# The CJK characters that fold() changes (CJK compatibility ideographs, kana's spacing
# voiced marks and digraphs), or that combine with the one before them (kana's combining
# voiced marks): a CJK run without them is its own fold, and so is each of its words.
_CJK_FOLDED_RE = re.compile("[\u3099-\u309c\u309f\u30ff\uf900-\ufaff]")
# The same runs as _TOKEN_RE in a text without CJK characters (a third faster).
_WORD_RE = re.compile(rf"\w+(?:{_MARKS_AFTER}\w*)*")
_WORD_CHAR_RE = re.compile(rf"[\w{_IN_WORD}]")
_W_RE = re.compile(r"\w")
# Where a URL's words split: what cannot stand in a word, and underscores.
_URL_SEPARATORS = re.compile(rf"(?:[^\w{_IN_WORD}]|_)+")
# The ignorable characters a word may hold, which fold() removes.
_IGNORED = dict.fromkeys(c for a, b in code_points(IGNORABLE) for c in range(a, b + 1))
_IGNORED_RE = re.compile(f"[{char_class(code_points(IGNORABLE))}]")
# UTF-8 bytes with every ASCII byte that is no word character made a space (the bytes of
# other characters, from 0x80 on, kept): see _word_runs.
_ASCII_SEPARATORS = bytes(
    0x20 if b < 0x80 and not _WORD_RE.match(chr(b)) else b for b in range(256)
)
#: A text is tokenized by the regular expression alone when more than this share of the
#: runs between its separators hold a character that is not ASCII (Greek, Cyrillic …):
#: each such run is tokenized again (_word_runs).
_NON_ASCII_RUNS = 1 / 8

# ISO 639-1 codes (as found in <html lang> and the sites file) -> Snowball algorithm names.
_SNOWBALL: dict[str, str] = {
    "ar": "arabic",
    "hy": "armenian",
    "eu": "basque",
    "ca": "catalan",
    "da": "danish",
    "nl": "dutch",
    "en": "english",
    "eo": "esperanto",
    "et": "estonian",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "el": "greek",
    "hi": "hindi",
    "hu": "hungarian",
    "id": "indonesian",
    "ga": "irish",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "no": "norwegian",
    "nb": "norwegian",
    "nn": "norwegian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "es": "spanish",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
_CJK_LANGS = {"zh", "ja", "ko"}

#: English stop words: function words that carry no meaning for retrieval.
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if
    in into is it its itself just me more most my myself no nor not of off on once only
    or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would
    you your yours yourself yourselves
    """.split()
)

#: Chinese stop words: particles and pronouns that jieba returns as separate words.
CHINESE_STOP_WORDS: frozenset[str] = frozenset(
    "的 了 和 是 在 也 与 及 或 就 都 而 着 之 被 把 对 等 这 那 个 "
    "为 以 于 上 中 下 其 我 你 他 她 它 们 吗 呢 吧 啊".split()
)

_STOP_WORDS: dict[str, frozenset[str]] = {"english": ENGLISH_STOP_WORDS}


def snowball_language(lang: str | None) -> str:
    """Map a language tag (``en``, ``en-US``, ``german``, ``zh-CN``) to a Snowball name.

    Unknown or empty tags give ``english``; CJK tags give ``english`` as well, because
    CJK words are recognised by their script and never stemmed.
    """
    if not lang:
        return "english"
    tag = lang.strip().lower().replace("_", "-")
    if tag in _SNOWBALL.values():
        return tag
    return _SNOWBALL.get(tag.split("-", 1)[0], "english")


def is_known_language(lang: str) -> bool:
    tag = lang.strip().lower().replace("_", "-")
    primary = tag.split("-", 1)[0]
    return tag in _SNOWBALL.values() or primary in _SNOWBALL or primary in _CJK_LANGS


@lru_cache(maxsize=16_384)  # words of at most MAX_TOKEN_LENGTH characters: < 20 MB
def cjk_subwords(word: str) -> tuple[str, ...]:
    """The dictionary words within the Chinese word *word* (jieba's search mode: its 2-
    and 3-character words, and those of its HMM-found parts), without *word* itself."""
    return tuple(w for w in _jieba().cut_for_search(word, HMM=False) if w != word and w.strip())


@lru_cache(maxsize=1)
def _jieba() -> Any:
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def warm_segmenter() -> None:
    """Load the Chinese segmenter's dictionary now (jieba's: 1-3.5 s, ~70 MB), not at the
    first text that needs it (``serve`` calls this on a thread as it starts)."""
    _jieba()


@dataclass(frozen=True, slots=True)
class Token:
    stem: str
    surface: str


def _spaced(text: str) -> str | None:
    """*text* with its ASCII characters that are no word characters made spaces, on its
    UTF-8 bytes (every other character kept as it is); None for a text that has no UTF-8
    (a lone surrogate)."""
    try:
        return text.encode("utf-8").translate(_ASCII_SEPARATORS).decode("utf-8")
    except UnicodeError:
        return None


def _not_ascii(spaced: str, runs: list[str]) -> list[int] | None:
    """The positions of the *runs* of *spaced* that hold a character that is not ASCII
    (each to be tokenized by the regular expression); None when they are more than
    :data:`_NON_ASCII_RUNS` of them (the whole text is, then)."""
    if spaced.isascii():
        return []
    odd = list(compress(count(), map(not_, map(str.isascii, runs))))
    return None if len(odd) > _NON_ASCII_RUNS * len(runs) else odd


def _word_runs(text: str, folded: bool = False) -> list[str]:
    """``_WORD_RE.findall(text)``, read two to three times as fast (a text without CJK
    characters); with *folded*, each word that is not ASCII folded (:func:`fold`; the
    words of ASCII are kept as they are).

    Python's regular expressions test every character's class (~25 ns a character); here
    the ASCII characters that are no word characters are made spaces at C speed (on the
    UTF-8 bytes, which keeps every other character as it is) and the text is split on
    whitespace (no word character is whitespace).  A run that is all ASCII is then one
    word; a run with another character may hold separators that are not ASCII ("»",
    "—", "’"): it is tokenized by the regular expression, and only its words are folded.
    tests/test_unit_analysis.py compares both on every code point."""
    spaced = _spaced(text)
    runs = [] if spaced is None else spaced.split()
    odd = None if spaced is None else _not_ascii(spaced, runs)
    if odd is None:
        words = _WORD_RE.findall(text)
        if folded:
            for i in compress(count(), map(not_, map(str.isascii, words))):
                words[i] = fold(words[i])
        return words
    if not odd:
        return runs
    words = []
    after = 0  # the runs before it are in *words*
    for i in odd:
        words += runs[after:i]
        words += map(fold, _WORD_RE.findall(runs[i])) if folded else _WORD_RE.findall(runs[i])
        after = i + 1
    words += runs[after:]
    return words


def _word_offsets(text: str, start: int, stop: int | None) -> list[tuple[int, int]]:
    """``(start, end)`` of the words at positions *start* … *stop* − 1 of *text* (a text
    without CJK characters), as ``_WORD_RE.finditer`` gives them, without reading every
    character by the regular expression (see :func:`_word_runs`).

    An ASCII text's words are read from its bytes (:func:`_ascii_offsets`).  Another
    text, its ASCII separators made spaces, is split at each space: each piece is empty
    (spaces in a row), one word (ASCII), or read by the regular expression (another
    character); the pieces' words are counted and the piece of word *start* found at C
    speed, and the offsets are read from there on (:func:`_offsets_in`).  A window near
    the start of a long text reads only a prefix of it."""
    if stop is not None and stop <= start:
        return []
    read = _ascii_offsets if text.isascii() else _offsets_in
    if stop is not None:
        # Only the text up to word *stop* is read: a prefix of ~16 characters a word,
        # twice as long while it holds fewer than stop + 1 words (the last word of a
        # prefix may be cut; those before it are whole).
        end = 16 * (stop + 1)
        while end < len(text):
            spans = read(text[:end], start, stop + 1)
            if len(spans) == stop + 1 - start:
                return spans[:-1]
            end *= 2
    return read(text, start, stop)


def offsets_around(
    text: str, words: Sequence[str], lo: int, hi: int, anchor: int
) -> list[tuple[int, int]] | None:
    """``(start, end)`` of the words at positions *lo* … *hi* − 1 of *text* (a text
    without CJK characters whose :meth:`Analyzer.words` are *words*), found from the word
    at position *anchor* (``lo <= anchor < hi``) instead of reading the text from its
    start: that word's occurrences are looked for in the text as a string, and the words
    around the one of the same rank are read (those before it twice as far back as ~16
    characters a word until they hold the words wanted; those from it on as
    :func:`_word_offsets` reads a prefix).  A window deep in a long text costs what one near
    its start does, where :func:`_word_offsets` reads every word before it.

    None where this cannot be sure of the same offsets as :func:`_word_offsets` (then it
    is to be read so): the anchor's word is not ASCII, the text's lowering changes its
    length, an occurrence of it follows a mark or joiner (:func:`_is_token`), the
    occurrences that are words are not as many as the anchor's word in *words*, or the
    words read around it are not *words*' own."""
    hi = min(hi, len(words))
    if not lo <= anchor < hi:
        return None
    word = words[anchor]
    lowered = text.lower()
    if not word.isascii() or len(lowered) != len(text):
        return None
    found = []
    at = lowered.find(word)
    size = len(word)
    while at >= 0:
        whole = _is_token(lowered, at, at + size)
        if whole is None:
            return None
        if whole:
            found.append(at)
        at = lowered.find(word, at + 1)
    # Each token of the word's spelling is found; one the text spells otherwise (folded
    # to it: "ﬁle") would make the counts differ.
    if len(found) != words.count(word):
        return None
    at = found[words[:anchor].count(word)]
    before = anchor - lo
    spans: list[tuple[int, int]] = []
    if before:
        reach = 16 * (before + 1)
        while True:
            start = max(0, at - reach)
            piece = _word_offsets(text[start:at], 0, None)
            if start == 0 or len(piece) > before:  # the first may be a cut word
                break
            reach *= 2
        if len(piece) < before:
            return None
        spans = [(s + start, e + start) for s, e in piece[len(piece) - before :]]
    after = hi - anchor
    piece = _word_offsets(text[at:], 0, after)  # (itself reads only as far as it needs)
    if len(piece) < after:
        return None
    spans += [(s + at, e + at) for s, e in piece[:after]]
    for (s, e), expected in zip(spans, words[lo:hi], strict=True):
        got = lowered[s:e]
        if (got if got.isascii() else fold(got)) != expected:
            return None
    return spans


def _is_token(text: str, start: int, end: int) -> bool | None:
    r"""Whether the word characters ``text[start:end]`` are one of the tokenizer's words
    (``_WORD_RE.finditer(text)``), from the characters on either side: a word is a run
    of word characters (\w) that takes the marks and joiners after it, so a neighbour
    that is no word character bounds it, one that is a word character (or a mark after
    it) continues it.  None when that cannot be told from them: a mark or joiner before
    it is part of the word before only if a word character stands before the mark."""
    if end < len(text) and is_word_char(text[end]):
        return False
    if start == 0:
        return True
    before = text[start - 1]
    if not is_word_char(before):
        return True
    return False if _W_RE.match(before) else None


def _ascii_offsets(text: str, start: int, stop: int | None) -> list[tuple[int, int]]:
    """:func:`_offsets_in` of an ASCII text: its words are the runs between its
    separators, a byte a character, so where each starts and ends is read by numpy from
    the bytes, the separators made spaces (a few operations on the whole text, where a
    list of its pieces costs a Python object each)."""
    import numpy as np  # only the search's processes ask for offsets: numpy is theirs

    spaced = b" " + text.encode("ascii").translate(_ASCII_SEPARATORS) + b" "
    inside = np.frombuffer(spaced, dtype=np.uint8) != 0x20
    # Where a word starts and where it ends, in turn (the padding spaces make each word
    # start after one and end before one).
    edges = np.flatnonzero(inside[1:] != inside[:-1])
    at = edges[2 * start : None if stop is None else 2 * stop].tolist()
    return list(zip(at[0::2], at[1::2], strict=True))


def _offsets_in(text: str, start: int, stop: int | None) -> list[tuple[int, int]]:
    """:func:`_word_offsets` of the whole of *text*."""
    spaced = _spaced(text)
    pieces = [] if spaced is None else spaced.split(" ")
    odd = None if spaced is None else _not_ascii(spaced, pieces)
    if odd is None:
        return [m.span() for m in islice(_WORD_RE.finditer(text), start, stop)]
    counts: list[int] = list(map(bool, pieces))  # words in each piece (True: 1)
    for i in odd:
        counts[i] = len(_WORD_RE.findall(pieces[i]))
    words_to = list(accumulate(counts))  # words in the pieces up to each one
    at = bisect_right(words_to, start)  # the piece of word *start*
    if at == len(pieces):
        return []
    word = words_to[at] - counts[at]  # the position of the piece's first word
    offset = at + sum(map(len, islice(pieces, at)))  # the piece's first character
    out: list[tuple[int, int]] = []
    wanted = None if stop is None else stop - start
    for piece in islice(pieces, at, None):
        if piece:
            if piece.isascii():
                spans: Iterable[tuple[int, int]] = ((offset, offset + len(piece)),)
            else:
                spans = [(offset + m.start(), offset + m.end()) for m in _WORD_RE.finditer(piece)]
            for span in spans:
                if word >= start:
                    out.append(span)
                word += 1
            if wanted is not None and len(out) >= wanted:
                return out[:wanted]
        offset += len(piece) + 1
    return out


def is_word_char(c: str) -> bool:
    """Whether the character *c* can stand inside a word (of the tokenizer's runs): a word
    character, or a mark or joiner that continues one."""
    return _WORD_CHAR_RE.match(c) is not None


def fold(word: str) -> str:
    """The normal form of a word as a search engine compares words: Unicode's NFKC_Casefold
    (ICU's ``nfkc_cf`` normalizer, Lucene's and Elasticsearch's ``icu_normalizer``):
    compatibility forms made plain (full-width ``ＰＤＦ`` and ``２０２６`` are ``pdf`` and
    ``2026``, the ligature ``ﬁ`` is ``fi``), composed (``cafe`` + a combining acute is
    ``café``), case folded (``ß`` is ``ss``, ``ς`` is ``σ``) and the ignorable characters
    a word may hold dropped (soft hyphen, zero-width joiners, variation selectors).

    Built from :mod:`unicodedata`'s NFKC and :meth:`str.casefold` (NFKC, case folding,
    NFKC again: a folded word folds to itself, tests/test_unit_analysis.py checks every
    code point).  An ASCII word is only lowercased, as it always was."""
    if word.isascii():
        return word.lower()
    folded = _FOLDED.get(word)
    if folded is None:
        folded = word.translate(_IGNORED) if _IGNORED_RE.search(word) else word
        folded = _normalize("NFKC", _normalize("NFKC", folded).casefold())
        global _folded_bytes
        size = STEM_ENTRY_BYTES + sys.getsizeof(word) + sys.getsizeof(folded)
        if _folded_bytes + size > FOLD_CACHE_BYTES:
            _FOLDED.clear()
            _folded_bytes = 0
        _FOLDED[word] = folded
        _folded_bytes += size
    return folded


_normalize = unicodedata.normalize
#: Bytes of the cache of folded words (:func:`fold`, words that are not ASCII), counted as
#: :data:`STEM_CACHE_BYTES` counts its entries; past it the cache starts again empty.
#: Folding a word costs ~0.3 µs, a look-up ~0.05: words repeat, on a page and on a site.
#: ~1 MB holds ~7,000 words of 8 letters of Latin script.
FOLD_CACHE_BYTES = 1024 * 1024
_FOLDED: dict[str, str] = {}
_folded_bytes = 0


def has_cjk(text: str) -> bool:
    """Whether *text* holds a Chinese, Japanese or Korean character (a run of them is
    segmented into words by jieba)."""
    return not text.isascii() and _CJK_RE.search(text) is not None


def _folded_cjk(tokens: Iterable[tuple[str, int, int]]) -> Iterator[tuple[str, int, int]]:
    """jieba's *tokens* ``(word, start, end)`` of a CJK run, each word folded, a token
    that starts with a combining mark (kana's voiced marks, which jieba cuts off the kana
    they follow) joined to the one before it: "か" + U+3099 is one word, "が"."""
    word, start, end = "", 0, 0
    for w, s, e in tokens:
        if word and unicodedata.combining(w[0]):
            word, end = word + w, e
            continue
        if word:
            yield fold(word), start, end
        word, start, end = w, s, e
    if word:
        yield fold(word), start, end


class StemBudget:
    """Analyzers whose caches of stems share one :data:`STEM_CACHE_BYTES`: the bytes they
    hold together; when a new stem would take them past it, every one of them starts again
    empty.  The analyzers of :func:`get_analyzer` share one, so that a crawl of pages in
    many languages holds no more than a crawl in one; an analyzer made on its own has its
    own."""

    __slots__ = ("members", "used")

    def __init__(self) -> None:
        self.used = 0
        self.members: list[Analyzer] = []


class Analyzer:
    """Tokenize, segment, fold, drop stop words and stem, for one language.

    Instances are shared per Snowball language by :func:`get_analyzer`; each keeps a
    cache of the stems it has computed, since a language's vocabulary repeats heavily.
    """

    def __init__(self, language: str = "english", budget: StemBudget | None = None) -> None:
        self.language = snowball_language(language)
        #: The budget of bytes its cache of stems shares (its own unless given).
        self.budget = budget if budget is not None else StemBudget()
        self.budget.members.append(self)
        self._stemmer = snowballstemmer.stemmer(self.language)
        if hasattr(self._stemmer, "maxCacheSize"):
            # PyStemmer's own cache (10,000 words, purged by sorting them all) stands
            # behind this one's and costs a new word 1.3 µs instead of 0.3.
            self._stemmer.maxCacheSize = 0
        #: Stop words of this language, Chinese ones included.
        self.stop_words: frozenset[str] = (
            _STOP_WORDS.get(self.language, frozenset()) | CHINESE_STOP_WORDS
        )
        #: The stems computed so far, by folded word (:meth:`stem`'s cache, of at
        #: most :data:`STEM_CACHE_BYTES`; read it directly where a loop over many words
        #: cannot afford a call a word).
        self.known_stems: dict[str, str] = {}
        #: The words of :attr:`known_stems` by stem, emptied with it, once
        #: :meth:`track_surfaces` is called (None before: a crawl's processes never need
        #: it, and it costs ~45 % more bytes a word).
        self.surfaces: dict[str, tuple[str, ...]] | None = None
        #: How many times the cache has been emptied (a reader of both dictionaries
        #: checks that they were not emptied while it read them).
        self.generation = 0
        #: The bytes of both, as :data:`STEM_CACHE_BYTES` counts them.
        self.known_bytes = 0

    def track_surfaces(self) -> dict[str, tuple[str, ...]]:
        """Keep :attr:`surfaces` from now on (the cache starts again empty, so that it
        holds every cached word): which words of a text have one of a query's stems,
        found from the stems' side (search.snippets).  Returns it."""
        with _TRACKING_LOCK:
            if self.surfaces is None:
                # Surfaces first: a stem() between the two stores writes its word into
                # the old cache (dropped), never into the new one without its surface.
                self.surfaces = {}
                self.known_stems = {}
                self.budget.used -= self.known_bytes
                self.known_bytes = 0
                self.generation += 1
            return self.surfaces

    def stem(self, word: str) -> str:
        """The normal form of one folded word (:func:`fold`; CJK words are returned
        unchanged)."""
        known = self.known_stems
        stem = known.get(word)
        if stem is None:
            surfaces = self.surfaces  # read after known: see track_surfaces
            stem = word if _CJK_RE.match(word) else self._stemmer.stemWord(word)
            size = STEM_ENTRY_BYTES + sys.getsizeof(word) + sys.getsizeof(stem)
            if surfaces is not None:
                size += SURFACE_BYTES
                if stem not in surfaces:
                    size += STEM_ENTRY_BYTES + SURFACES_BYTES
            self._make_room(size, known, surfaces)
            # The word first: emptied between the two, the surfaces may keep a word the
            # cache lost (harmless), never the reverse.
            known[word] = stem
            if surfaces is not None:
                with _TRACKING_LOCK:  # two words of one stem at once: neither lost
                    surfaces[stem] = (*surfaces.get(stem, ()), word)
            self.known_bytes += size
            self.budget.used += size
        return stem

    def _make_room(
        self, size: int, known: dict[str, str], surfaces: dict[str, tuple[str, ...]] | None
    ) -> None:
        """Empty the cache (*known* and *surfaces*, in place, and counted), and those of
        the analyzers sharing its budget, if *size* more bytes would take them past
        :data:`STEM_CACHE_BYTES`."""
        budget = self.budget
        if budget.used + size > STEM_CACHE_BYTES:
            for member in budget.members:
                if member is self:
                    member._empty(known, surfaces)
                else:
                    member._empty(member.known_stems, member.surfaces)
            budget.used = 0

    def _empty(self, known: dict[str, str], surfaces: dict[str, tuple[str, ...]] | None) -> None:
        known.clear()
        if surfaces is not None:
            surfaces.clear()
        self.generation += 1
        self.known_bytes = 0

    def cache_stems(self, words: Collection[str]) -> None:
        """Stem *words* (folded, not cached yet, no stop words) into the cache, as
        :meth:`stem` would one by one, in one call to the stemmer and one lock: 1.3 µs a
        new word where :meth:`stem` takes 1.8 (the snippets' words of a search; a text
        read after the cache was emptied holds a few hundred)."""
        batch = list(words)
        stems = self._stemmer.stemWords(batch)
        if not all(map(str.isascii, batch)):
            stems = [w if _CJK_RE.match(w) else s for w, s in zip(batch, stems, strict=True)]
        known = self.known_stems
        surfaces = self.surfaces  # read after known: see track_surfaces
        size = (
            STEM_ENTRY_BYTES * len(batch)
            + sum(map(sys.getsizeof, batch))
            + sum(map(sys.getsizeof, stems))
        )
        if surfaces is not None:
            new = {s for s in stems if s not in surfaces}
            size += SURFACE_BYTES * len(batch) + (STEM_ENTRY_BYTES + SURFACES_BYTES) * len(new)
        if size > STEM_CACHE_BYTES:  # more than the whole cache: one by one, as it fills
            for word in batch:
                self.stem(word)
            return
        self._make_room(size, known, surfaces)
        known.update(zip(batch, stems, strict=True))
        if surfaces is not None:
            with _TRACKING_LOCK:
                for word, stem in zip(batch, stems, strict=True):
                    surfaces[stem] = (*surfaces.get(stem, ()), word)
        self.known_bytes += size
        self.budget.used += size

    def spans(self, text: str, limit: int | None = None) -> Iterator[tuple[int, int, str]]:
        """The token stream: (start, end, folded word) of every word of *text*, CJK
        runs segmented, stop words included; at most *limit* words.

        Every other view of a text's words (:meth:`words`, :meth:`tokens`, the analysis of
        pages) is this stream.  Each word is found in the text as it is, then folded on its
        own (:func:`fold`): *start* and *end* are offsets into *text*, whatever folding
        does to the word's length ("ﬁ" is "fi").
        """
        return islice(self._spans(text), limit)

    def _spans(self, text: str) -> Iterator[tuple[int, int, str]]:
        for match in _TOKEN_RE.finditer(text):
            run = match.group()
            if _CJK_RE.match(run):
                base = match.start()
                tokens = _jieba().tokenize(run)
                if _CJK_FOLDED_RE.search(run) is not None:
                    tokens = _folded_cjk(tokens)
                for w, s, e in tokens:
                    if w.strip():
                        yield base + s, base + e, w
            else:
                yield match.start(), match.end(), fold(run)

    def offsets(
        self, text: str, limit: int | None = None, start: int = 0, cjk: bool | None = None
    ) -> list[tuple[int, int]]:
        """The ``(start, end)`` of the words of :meth:`spans`, without the words: of the
        words at positions *start* … *limit* − 1 (*cjk* as for :meth:`words`)."""
        if not (has_cjk(text) if cjk is None else cjk):
            # As in words(): each run is one word.
            return _word_offsets(text, start, limit)
        return [(s, e) for s, e, _ in islice(self._spans(text), start, limit)]

    def words(self, text: str, limit: int | None = None, cjk: bool | None = None) -> list[str]:
        """The words of :meth:`spans`, without their positions (*cjk*: whether *text*
        holds a CJK character, :func:`has_cjk`, when the caller knows)."""
        if not (has_cjk(text) if cjk is None else cjk):
            # No run needs segmenting: each run is one word, so the same stream is read
            # at C speed (a quarter of the time of the generator).
            lowered = text.lower()
            if len(lowered) == len(text):
                # Every character lowered on its own, to one character (an ASCII text
                # always): the runs are the same (no such lowering makes a character that
                # can start or continue a word of another, or the reverse: tests/
                # test_unit_analysis.py checks every code point), one string a word
                # instead of two, and read without the regular expression (_word_runs).
                # The words that are not ASCII are folded (the others are lowered):
                # folding a lowered word is folding the word (checked on every code point).
                words = _word_runs(lowered, folded=not text.isascii())
            else:  # a character lowered to two ("İ"): the runs of the text, folded
                words = list(map(fold, _word_runs(text)))
            return words[:limit] if limit is not None else words
        return [w for _, _, w in self.spans(text, limit)]

    def tokens(self, text: str, limit: int | None = None) -> Iterator[Token]:
        """The indexable tokens of *text*: stop words and over-long tokens dropped.

        *limit* caps the number of words read (stop words included), like the design
        documents' per-page word cap.
        """
        stop = self.stop_words
        stem = self.stem
        for word in self.words(text, limit):
            if word in stop or len(word) > MAX_TOKEN_LENGTH:
                continue
            yield Token(stem(word), word)

    def is_stop_word(self, word: str) -> bool:
        return fold(word) in self.stop_words


#: The shared analyzers, by Snowball language (at most one a language: a page's
#: ``lang="en-US"``, ``EN`` and ``en_gb`` are one analyzer), and their budget of stems.
_ANALYZERS: dict[str, Analyzer] = {}
_SHARED_BUDGET = StemBudget()
_ANALYZERS_LOCK = threading.Lock()


def get_analyzer(language: str | None = None) -> Analyzer:
    """The shared analyzer for *language* (a tag or Snowball name; default English)."""
    name = snowball_language(language)
    analyzer = _ANALYZERS.get(name)
    if analyzer is None:
        with _ANALYZERS_LOCK:
            analyzer = _ANALYZERS.get(name)
            if analyzer is None:
                analyzer = _ANALYZERS[name] = Analyzer(name, _SHARED_BUDGET)
    return analyzer


@dataclass(slots=True)
class WordRecord:
    """One stem of one document: its first surface form, counts per section, weight."""

    stem: str
    surface: str
    counts: list[int] = field(default_factory=lambda: [0] * len(SECTIONS))
    weight: float = 0.0

    def count(self, section: str) -> int:
        return self.counts[SECTIONS.index(section)]

    @property
    def total(self) -> int:
        return sum(self.counts)


#: A document's word records as they travel between processes (:func:`pack_records`).
PackedRecords = tuple[tuple[str, ...], tuple[str, ...], bytes, bytes]


def pack_records(words: Mapping[str, WordRecord] | None) -> PackedRecords | None:
    """*words* (stem -> record) in four columns: stems, surfaces, every record's counts in
    one array of ints and the weights in one of doubles.  Packed, pickled, unpickled and
    unpacked, a page of 300 stems costs ~0.55 ms; the records themselves pickled there and
    back ~1.4 ms (a dataclass of slots pickles through Python code, object by object:
    more than storing the page)."""
    if words is None:
        return None
    if isinstance(words, PackedWords):
        return words.packed()
    records = words.values()
    return (
        tuple(r.stem for r in records),
        tuple(r.surface for r in records),
        array("i", [c for r in records for c in r.counts]).tobytes(),
        array("d", [r.weight for r in records]).tobytes(),
    )


def unpack_records(packed: PackedRecords | None) -> PackedWords | None:
    """The records :func:`pack_records` packed, keyed by stem in their order, as
    :class:`PackedWords` (their columns, a record made only when one is asked for)."""
    if packed is None:
        return None
    stems, surfaces, counts_bytes, weights_bytes = packed
    counts = array("i")
    counts.frombytes(counts_bytes)
    weights = array("d")
    weights.frombytes(weights_bytes)
    return PackedWords(stems, surfaces, counts, weights)


class PackedWords(Mapping[str, WordRecord]):
    """A document's word records (stem -> :class:`WordRecord`, in their order) kept in the
    columns they travel in between processes (:func:`pack_records`): the stems, their
    surface forms, every stem's counts per section in one array of ints
    (:data:`SECTIONS` order, ``len(SECTIONS)`` a stem) and their weights in one of doubles.

    The worker reads the columns as they are (:attr:`stems`, :meth:`count_columns`: the
    store's posting rows, the index's columns); a record is made only when one is asked
    for by stem, and each time anew (a copy: changing it changes nothing here).  Made
    into ~385 record objects a page on arrival, they took 11 % of the worker's time."""

    __slots__ = ("_positions", "counts", "stems", "surfaces", "weights")

    def __init__(
        self,
        stems: Sequence[str],
        surfaces: Sequence[str],
        counts: array[int],
        weights: array[float],
    ) -> None:
        if not (len(stems) == len(surfaces) == len(weights) == len(counts) // len(SECTIONS)):
            raise ValueError("the columns of packed word records differ in length")
        self.stems = stems
        self.surfaces = surfaces
        self.counts = counts
        self.weights = weights
        self._positions: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.stems)

    def __iter__(self) -> Iterator[str]:
        return iter(self.stems)

    def __contains__(self, stem: object) -> bool:
        return stem in self._index()

    def __getitem__(self, stem: str) -> WordRecord:
        return self._record(self._index()[stem])

    def records(self) -> dict[str, WordRecord]:
        """Every record, made as objects, by stem in their order."""
        return {stem: self._record(i) for i, stem in enumerate(self.stems)}

    def _record(self, i: int) -> WordRecord:
        n = len(SECTIONS)
        return WordRecord(
            self.stems[i],
            self.surfaces[i],
            self.counts[i * n : i * n + n].tolist(),
            self.weights[i],
        )

    def _index(self) -> dict[str, int]:
        if self._positions is None:
            self._positions = {stem: i for i, stem in enumerate(self.stems)}
        return self._positions

    def count_columns(self) -> list[array[int]]:
        """The stems' counts, one array a section (:data:`SECTIONS` order)."""
        n = len(SECTIONS)
        return [self.counts[k::n] for k in range(n)]

    def packed(self) -> PackedRecords:
        """The columns as :func:`pack_records` gives them."""
        return (
            tuple(self.stems),
            tuple(self.surfaces),
            self.counts.tobytes(),
            self.weights.tobytes(),
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (unpack_records, (self.packed(),))


_URL_NOISE = frozenset(
    {"http", "https", "ftp", "www", "html", "htm", "php", "asp", "aspx", "index"}
)


def url_words(url: str) -> str:
    """The words of a URL as text (scheme, ``www``, ``index`` and file suffixes dropped):
    its percent-escapes read as the characters they stand for (UTF-8), split where a
    page's words split (a word keeps its combining marks) and at underscores."""
    text = unquote(url.lower(), errors="replace")
    return " ".join(w for w in _URL_SEPARATORS.split(text) if w and w not in _URL_NOISE)


def page_sections(
    url: str,
    title: str | None = None,
    text: str | Sequence[str] | None = None,
    description: str | None = None,
    keywords: str | None = None,
    boilerplate: str | Sequence[str] | None = None,
) -> dict[str, str | Sequence[str]]:
    """The texts of a page's :data:`SECTIONS`, as :func:`analyze_document` reads them
    (*text*: the main content, or the whole text of a page without a boilerplate split;
    *text* and *boilerplate* may be given as their words, already read by the analyzer)."""
    return {
        "body": text or "",
        "title": title or "",
        "url": url,
        "desc": description or "",
        "keywords": keywords or "",
        "boilerplate": boilerplate or "",
    }


def remainder_words(whole: Iterable[str], part: Iterable[str]) -> list[str]:
    """The words of *whole* that *part* does not account for, in their order in *whole*:
    each word of *part* cancels one occurrence of the same word in *whole* (both read by
    the analyzer, :meth:`Analyzer.words`).

    With *whole* a page's text and *part* its main content, this is the page's boilerplate,
    as words: an extractor's main text is not a contiguous piece of the page's text (it
    reflows tables and lists), so the two are compared as bags of words, not as strings.
    """
    budget = Counter(part)
    get = budget.get
    left: list[str] = []
    keep = left.append
    for word in whole:
        n = get(word)
        if n:
            budget[word] = n - 1
        else:
            keep(word)
    return left


def analyze_document(
    sections: Mapping[str, str | Sequence[str]],
    weights: Mapping[str, float] | None = None,
    language: str | None = None,
    max_words: int | None = None,
) -> dict[str, WordRecord]:
    """Count and weigh every stem of a document.

    *sections* maps section names of :data:`SECTIONS` to their text (``url`` is the URL
    itself), or to its words as :meth:`Analyzer.words` reads them (a text the caller has
    read already).  The weight of a stem is Σ (count in section × weight of section).
    *max_words* caps the words read from the body, and from the boilerplate.  (The
    records of :func:`analyze_packed`, made into objects.)
    """
    return analyze_packed(sections, weights, language, max_words).records()


def analyze_packed(
    sections: Mapping[str, str | Sequence[str]],
    weights: Mapping[str, float] | None = None,
    language: str | None = None,
    max_words: int | None = None,
) -> PackedWords:
    """:func:`analyze_document`'s records, made as the columns they travel in
    (:class:`PackedWords`) rather than as a record object a stem (stems in the order they
    are first read, section by section).  What a crawl's analysis hands to its store."""
    weights = {**DEFAULT_WEIGHTS, **(weights or {})}
    analyzer = get_analyzer(language)
    stop = analyzer.stop_words
    stem_of = analyzer.stem
    n_sections = len(SECTIONS)
    empty = [0] * n_sections
    positions: dict[str, int] = {}
    surfaces: list[str] = []
    counts: list[int] = []
    sums: list[float] = []
    for index, w, words in _section_words(sections, weights, analyzer, max_words):
        # Count words first (at C speed), then stem each distinct word once.
        counted = Counter(words)
        if has_cjk("".join(counted)):
            # A Chinese compound is counted with the words it is made of (jieba's search
            # mode, as Chinese search indexes do): "搜索引擎" also as 搜索 and 引擎, so a
            # query of one of them finds it (queries are segmented in the default mode).
            for word, n in list(counted.items()):
                if len(word) > 2 and _CJK_RE.match(word):
                    for part in cjk_subwords(word):
                        counted[part] += n
        for word, n in counted.items():
            if word in stop or len(word) > MAX_TOKEN_LENGTH:
                continue
            stem = stem_of(word)
            i = positions.get(stem)
            if i is None:
                i = positions[stem] = len(surfaces)
                surfaces.append(word)
                counts += empty
                sums.append(0.0)
            counts[i * n_sections + index] += n
            sums[i] += w * n
    return PackedWords(tuple(positions), tuple(surfaces), array("i", counts), array("d", sums))


def _section_words(
    sections: Mapping[str, str | Sequence[str]],
    weights: Mapping[str, float],
    analyzer: Analyzer,
    max_words: int | None,
) -> Iterator[tuple[int, float, Sequence[str]]]:
    """Each non-empty section of *sections*: its number, weight and words (at most
    *max_words* of the body and of the boilerplate)."""
    for index, section in enumerate(SECTIONS):
        text = sections.get(section) or ""
        if not text:
            continue
        limit = max_words if section in ("body", "boilerplate") else None
        words: Sequence[str]
        if isinstance(text, str):
            words = analyzer.words(url_words(text) if section == "url" else text, limit)
        else:
            words = text[:limit] if limit is not None else text
        yield index, float(weights[section]), words
