"""Snippets and phrase checks, on a page's stored text.

:func:`word_stems` reduces a text to ``(start, end, stem)`` spans with the analyzer of
:mod:`search.analysis` (the one the index and the query use, so a word matches the same
way everywhere); :func:`contains_phrase` checks a quoted phrase against them, and
:func:`make_snippet` picks the best-matching passage and marks its query words
(:class:`search.results.Segment`): the window of words with the most distinct query words,
closest together; two shorter fragments when one window cannot hold the query words that
two can; the page's meta description instead when it holds more of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, count

from search.analysis import (
    MAX_TOKEN_LENGTH,
    Analyzer,
    cjk_subwords,
    fold,
    get_analyzer,
    has_cjk,
    is_word_char,
    offsets_around,
)
from search.results import Segment

Words = list[tuple[int, int, str]]

#: Words in a snippet (split between the fragments when there are two).
SNIPPET_WORDS = 30
#: Most fragments in a snippet.
MAX_FRAGMENTS = 2
#: Characters of a page's text a snippet and the term-proximity bonus read (as Solr's
#: ``hl.maxAnalyzedChars``): a snippet's passage is chosen among the words of the text's
#: first SCAN_LIMIT characters.  Reading a page costs ~1 µs a word, so that a long page
#: does not cost a query tens of milliseconds (577,000 characters: 38 ms; 40,000: 2.4 ms).
SCAN_LIMIT = 40_000
#: Words of a page's text a phrase check reads (a phrase is looked for in the first
#: PHRASE_WORDS words: a page is left out of a phrase's results when it holds it only later).
PHRASE_WORDS = 40_000


def scanned(text: str, limit: int = SCAN_LIMIT) -> str:
    """The first *limit* characters of *text*, without the word the limit cuts in two (a
    part of a word must not match a query word); *text* itself when it is no longer."""
    if len(text) <= limit:
        return text
    end = limit
    # Back over one word at most; a longer one is no token of the analyzer's anyway.
    stop = max(0, limit - MAX_TOKEN_LENGTH)
    while end > stop and is_word_char(text[end]) and is_word_char(text[end - 1]):
        end -= 1
    return text[: end if end > stop else limit]


def word_stems(
    text: str, language: str | None, limit: int = PHRASE_WORDS
) -> list[tuple[int, int, str]]:
    """(start, end, stem) of every word of *text*; stop words get an empty stem."""
    analyzer = get_analyzer(language)
    return [
        (start, end, "" if analyzer.is_stop_word(word) else analyzer.stem(word))
        for start, end, word in analyzer.spans(text, limit)
    ]


def contains_phrase(words: Sequence[tuple[int, int, str]], phrase: Sequence[str]) -> bool:
    """Whether the stems of *phrase* follow each other in *words* (stop words skipped)."""
    stems = [w[2] for w in words if w[2]]
    n = len(phrase)
    return any(stems[i : i + n] == list(phrase) for i in range(len(stems) - n + 1))


def make_snippet(
    text: str,
    stems: set[str],
    language: str | None = None,
    words: Words | None = None,
    size: int = SNIPPET_WORDS,
    description: str | None = None,
) -> list[Segment]:
    """The best-matching passage of *text* for the query *stems*, its query words marked.

    One window of *size* words: the one with the most distinct query words, then with
    them closest together, then the earliest, placed so that the words around them share
    what is left of the window.  When two fragments of half the size each hold more
    distinct query words between them than the one window does, those two, in text order,
    joined by "…".  When the page's *description* holds more distinct query words than the
    passage, the description instead (cut to *size* words).

    *words*, when given, are *text*'s :func:`word_stems`; otherwise only the words are read
    and each distinct word stemmed once (:class:`TextWords`), not every word of the text.
    """
    if not text and not description:
        return []
    body = (
        TextWords.of_stems(words, stems)
        if words is not None
        else TextWords(text, stems, language)
        if text
        else TextWords.of_stems([], stems)
    )
    chosen, found = _passage(body, size)
    if description:
        desc = TextWords(description, stems, language)
        desc_chosen, desc_found = _passage(desc, size)
        if desc_found > found or not body.n:
            return _render(description, desc, desc_chosen, stems)
    if not body.n:
        return [Segment(text[:200], False)] if text else []
    return _render(text, body, chosen, stems)


class TextWords:
    """The words of a text as a snippet needs them: how many, which of them are query words
    (with their stems), and the character offsets of any of them.

    Read from the text, the words are lowercased at C speed (:meth:`Analyzer.words`), each
    distinct word is looked up once (stop word, stem), and the offsets are read only as far
    as the snippet's last word: the same words, stems and offsets as :func:`word_stems`,
    without a tuple and a stem lookup for every word of the page.
    """

    __slots__ = ("_cjk", "_language", "_spans", "_text", "_words", "cut", "matches", "n")

    def __init__(
        self, text: str, stems: set[str], language: str | None, limit: int = SCAN_LIMIT
    ) -> None:
        analyzer = get_analyzer(language)
        read = scanned(text, limit)
        #: Whether the text goes on past the words read (:data:`SCAN_LIMIT`).
        self.cut = len(read) < len(text)
        text = read
        self._cjk = has_cjk(text)
        lowered = analyzer.words(text, cjk=self._cjk)
        distinct = set(lowered)
        found = _query_words(analyzer, distinct, stems)
        self._text, self._language = text, language
        self._spans: list[tuple[int, int]] | None = None
        # The words as read, to find a window's offsets from one of its query words.
        self._words: list[str] | None = lowered
        self.n = len(lowered)
        #: ``(position, stem)`` of every word whose stem is a query stem, in text order
        #: (the positions picked at C speed: most words are no query word).
        self.matches = (
            [(i, found[lowered[i]]) for i in compress(count(), map(found.__contains__, lowered))]
            if found
            else []
        )

    @classmethod
    def of_stems(cls, words: Words, stems: set[str]) -> TextWords:
        """The same, from a text's :func:`word_stems` already read."""
        self = cls.__new__(cls)
        self._text, self._language, self.cut, self._cjk = "", None, False, False
        self._words = None
        self._spans = [(s, e) for s, e, _ in words]
        self.n = len(words)
        parts = _compound_parts({w[2] for w in words}.difference(stems), stems)
        self.matches = [
            (i, w[2] if w[2] in stems else parts[w[2]])
            for i, w in enumerate(words)
            if w[2] in stems or w[2] in parts
        ]
        return self

    def span_range(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """``(start, end)`` offsets of the words at positions ``lo … hi - 1`` (fewer when
        the text has fewer words): those before *lo* are skipped by the regular
        expression, without a tuple each."""
        if self._spans is not None:  # read with the words (of_stems)
            return self._spans[lo:hi]
        if lo and not self._cjk and self._words is not None:
            # A window past the text's start: from its first query word, when that is sure.
            anchor = next((i for i, _ in self.matches if lo <= i < hi), None)
            if anchor is not None:
                spans = offsets_around(self._text, self._words, lo, hi, anchor)
                if spans is not None:
                    return spans
        return get_analyzer(self._language).offsets(self._text, hi, lo, self._cjk)


def _query_words(analyzer: Analyzer, distinct: set[str], stems: set[str]) -> dict[str, str]:
    """Which of the *distinct* words of a text have one of the query's *stems*: word ->
    stem.  A stop word's stem is "" (a query keeps none).

    The words not in the analyzer's cache of stems are stemmed (once: they join it); the
    others are found from the query's side, among the cached words of each query stem
    (:attr:`Analyzer.surfaces`): no look-up of each word of the text in Python."""
    stop = analyzer.stop_words
    found = dict.fromkeys(distinct.intersection(stop), "") if "" in stems else {}
    surfaces = analyzer.surfaces if analyzer.surfaces is not None else analyzer.track_surfaces()
    generation = analyzer.generation
    unknown = distinct.difference(analyzer.known_stems)
    unknown.difference_update(stop)  # (a stop word is never stemmed here)
    if unknown:
        analyzer.cache_stems(unknown)
    for stem in stems:
        for word in surfaces.get(stem, ()):
            if word in distinct and word not in stop:
                found[word] = stem
    if analyzer.generation != generation:
        # The cache was emptied meanwhile (full): this text's words one by one.
        found = {w: v for w, v in found.items() if not v}
        for word in distinct.difference(stop):
            stem = analyzer.stem(word)
            if stem in stems:
                found[word] = stem
    if has_cjk("".join(stems)):
        found.update(_compound_parts(distinct.difference(found), stems))
    return found


def _compound_parts(words: set[str], stems: set[str]) -> dict[str, str]:
    """The Chinese compounds among *words* that hold a query stem as one of the words the
    index counted them with (:func:`search.analysis.cjk_subwords`: a page saying 搜索引擎
    is found by 搜索): compound -> the first such stem.  Only the compounds that hold one
    of the stems as a string are segmented again."""
    wanted = [stem for stem in stems if has_cjk(stem)]
    parts: dict[str, str] = {}
    if not wanted:
        return parts
    for word in words:
        if len(word) > 2 and any(stem in word for stem in wanted):
            held = sorted(stems.intersection(cjk_subwords(word)))
            if held:
                parts[word] = held[0]
    return parts


def _marked_parts(word: str, stem: str, stems: set[str]) -> list[tuple[int, int]]:
    """``(start, end)`` in *word* (a word of a page, as written) of what to mark for the
    query *stems* (*stem*: the one it matched): the query's words within a Chinese compound
    found by a part of it (each occurrence, overlapping ones joined), else the whole word.
    A compound that folding changes in length is marked whole."""
    if not has_cjk(word):
        return [(0, len(word))]
    folded = fold(word)
    if folded == stem or len(folded) != len(word):
        return [(0, len(word))]
    spans: list[tuple[int, int]] = []
    for part in stems.intersection(cjk_subwords(folded)):
        at = folded.find(part)
        while at >= 0:
            spans.append((at, at + len(part)))
            at = folded.find(part, at + 1)
    joined: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if joined and start < joined[-1][1]:
            joined[-1] = (joined[-1][0], max(end, joined[-1][1]))
        else:
            joined.append((start, end))
    return joined or [(0, len(word))]


def _passage(words: TextWords, size: int) -> tuple[list[tuple[int, int]], int]:
    """The fragments ``(start, end)`` (word positions) of the best passage of *words*, and
    how many distinct query words they hold."""
    n = words.n
    if not n:
        return [], 0
    matches = words.matches
    present = {stem for _, stem in matches}
    one = _window(matches, 0, n, size, present)
    if one is None:
        return [(0, min(size, n))], 0
    best, found = [one[:2]], one[2]
    half = size // MAX_FRAGMENTS
    if found < len(present) and half >= 1:
        first = _window(matches, 0, n, half, present)
        assert first is not None  # a window of one word holds a match
        lo, hi, first_found = first
        missing = present - {stem for i, stem in matches if lo <= i < hi}
        candidates = [
            _window(matches, 0, lo, half, missing),
            _window(matches, hi, n, half, missing),
        ]
        second = max((c for c in candidates if c is not None), key=lambda c: c[2], default=None)
        if second is not None and first_found + second[2] > found:
            best = sorted([(lo, hi), second[:2]])
            found = first_found + second[2]
    return best, found


def _window(
    matches: list[tuple[int, str]], lo: int, hi: int, size: int, wanted: set[str]
) -> tuple[int, int, int] | None:
    """The window of *size* words within positions [*lo*, *hi*) with the most distinct
    *wanted* stems, then the tightest, then the earliest: ``(start, end, distinct)``;
    None when none holds one."""
    usable = [(i, stem) for i, stem in matches if lo <= i < hi and stem in wanted]
    best: tuple[int, int, int] | None = None  # (distinct, -spread, -start)
    for a, (start, _) in enumerate(usable):
        seen: set[str] = set()
        count, spread = 0, 0
        for pos, stem in usable[a:]:
            if pos - start >= size:
                break
            if stem not in seen:
                seen.add(stem)
                count, spread = len(seen), pos - start
        key = (count, -spread, -start)
        if best is None or key > best:
            best = key
    if best is None:
        return None
    count, spread, start = best[0], -best[1], -best[2]
    # The words around the matches share what the window has left: half before them.
    first = max(lo, min(start - (size - spread - 1) // 2, hi - size))
    return first, min(hi, first + size), count


def _render(
    text: str, words: TextWords, fragments: list[tuple[int, int]], stems: set[str]
) -> list[Segment]:
    """*fragments* of *text* as segments, query words marked (the part a query asked for,
    in a Chinese compound: :func:`_marked_parts`), joined and ended by "…" where text is
    left out."""
    segments: list[Segment] = []
    previous_end = 0
    marked = dict(words.matches)
    for lo, hi in fragments:
        spans = words.span_range(lo, hi)  # spans[k]: word lo + k
        window = range(lo, lo + len(spans))
        if not window:
            continue
        if lo > previous_end or (lo > 0 and not segments):
            segments.append(Segment(" … " if segments else "… ", False))
        pos, end = spans[0][0], spans[-1][1]
        for i in window:
            if i in marked:
                s, e = spans[i - lo]
                for a, b in _marked_parts(text[s:e], marked[i], stems):
                    if s + a > pos:
                        segments.append(Segment(text[pos : s + a], False))
                    segments.append(Segment(text[s + a : s + b], True))
                    pos = s + b
        if end > pos:
            segments.append(Segment(text[pos:end], False))
        previous_end = hi
    if fragments and (fragments[-1][1] < words.n or words.cut):
        segments.append(Segment(" …", False))
    return segments
