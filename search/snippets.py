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

from search.analysis import get_analyzer
from search.results import Segment

Words = list[tuple[int, int, str]]

#: Words in a snippet (split between the fragments when there are two).
SNIPPET_WORDS = 30
#: Most fragments in a snippet.
MAX_FRAGMENTS = 2
#: Characters of a page's text read for snippets and phrase checks.
SCAN_LIMIT = 40_000


def word_stems(
    text: str, language: str | None, limit: int = SCAN_LIMIT
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
    """
    if not text and not description:
        return []
    words = words if words is not None else word_stems(text, language) if text else []
    chosen, found = _passage(words, stems, size)
    if description:
        desc_words = word_stems(description, language)
        desc_chosen, desc_found = _passage(desc_words, stems, size)
        if desc_found > found or not words:
            return _render(description, desc_words, desc_chosen, stems)
    if not words:
        return [Segment(text[:200], False)] if text else []
    return _render(text, words, chosen, stems)


def _passage(words: Words, stems: set[str], size: int) -> tuple[list[tuple[int, int]], int]:
    """The fragments ``(start, end)`` (word positions) of the best passage of *words*, and
    how many distinct query words they hold."""
    n = len(words)
    if not n:
        return [], 0
    matches = [(i, w[2]) for i, w in enumerate(words) if w[2] in stems]
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
    text: str, words: Words, fragments: list[tuple[int, int]], stems: set[str]
) -> list[Segment]:
    """*fragments* of *text* as segments, query words marked, joined and ended by "…"
    where text is left out."""
    segments: list[Segment] = []
    previous_end = 0
    for lo, hi in fragments:
        window = words[lo:hi]
        if not window:
            continue
        if lo > previous_end or (lo > 0 and not segments):
            segments.append(Segment(" … " if segments else "… ", False))
        pos, end = window[0][0], window[-1][1]
        for s, e, stem in window:
            if stem in stems:
                if s > pos:
                    segments.append(Segment(text[pos:s], False))
                segments.append(Segment(text[s:e], True))
                pos = e
        if end > pos:
            segments.append(Segment(text[pos:end], False))
        previous_end = hi
    if fragments and fragments[-1][1] < len(words):
        segments.append(Segment(" …", False))
    return segments
