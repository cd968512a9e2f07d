"""Snippets and phrase checks, on a page's stored text.

:func:`word_stems` reduces a text to ``(start, end, stem)`` spans with the analyzer of
:mod:`search.analysis` (the one the index and the query use, so a word matches the same
way everywhere); :func:`contains_phrase` checks a quoted phrase against them, and
:func:`make_snippet` picks the window of words with the most distinct query words and marks
them (:class:`search.results.Segment`).
"""

from __future__ import annotations

from collections.abc import Sequence

from search.analysis import get_analyzer
from search.results import Segment

#: Words in a snippet.
SNIPPET_WORDS = 30
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
    words: list[tuple[int, int, str]] | None = None,
    size: int = SNIPPET_WORDS,
) -> list[Segment]:
    """The window of *size* words with the most distinct query words, words marked."""
    if not text:
        return []
    words = words if words is not None else word_stems(text, language)
    if not words:
        return [Segment(text[:200], False)]
    best_start, best_score = 0, -1
    counts: dict[str, int] = {}
    for i, (_, _, stem) in enumerate(words):
        if stem in stems:
            counts[stem] = counts.get(stem, 0) + 1
        if i >= size:
            old = words[i - size][2]
            if old in counts:
                counts[old] -= 1
                if not counts[old]:
                    del counts[old]
        score = len(counts)
        if score > best_score:
            best_score, best_start = score, max(0, i - size + 1)
    window = words[best_start : best_start + size]
    start, end = window[0][0], window[-1][1]
    segments: list[Segment] = []
    if best_start > 0:
        segments.append(Segment("… ", False))
    pos = start
    for s, e, stem in window:
        if stem in stems:
            if s > pos:
                segments.append(Segment(text[pos:s], False))
            segments.append(Segment(text[s:e], True))
            pos = e
    if end > pos:
        segments.append(Segment(text[pos:end], False))
    if best_start + size < len(words):
        segments.append(Segment(" …", False))
    return segments
