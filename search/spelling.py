"""Spelling suggestions ("did you mean"): the query with its unknown words (in no
document) replaced by the closest indexed ones, and for a query with few or no hits
(:data:`MAX_HITS`) its rare words too.

The index holds stems, so the candidates for a word are stems of the index:

- the stems within one edit of the word's stem (two for words of :data:`LONG_WORD` letters
  or more, when one finds none), sharing its first letter, found by Whoosh's spelling
  automaton (:func:`search.termspace.terms_within`: it skips through the segments' sorted
  terms in their array files, it does not scan the vocabulary);
- the stems of the words one edit away from the word as typed (Norvig's candidates:
  about 54 · length strings, each stemmed and looked up), which finds what stemming
  hides ("replicaton" stems to itself, "replication" to "replic").

A candidate must be in :data:`MIN_RATIO` times as many documents as the word itself (any
document, for a word in none); the nearest wins, then the most frequent.  The stem is
shown as the surface form of the stored postings closest to what was typed ("vacuming" →
stem "vacum" → stem "vacuum" → "vacuuming"), so a suggestion reads as words, not stems.
A surface is stored as its page's language stems it: only one that the query's language
stems to the candidate is shown (a suggestion finds what it suggests, and is never the
word typed), else the stem itself if it stems to itself, else nothing.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from whoosh.support.levenshtein import damerau_levenshtein

from search.analysis import get_analyzer
from search.query import ParsedQuery, QueryTerm, replace_words


class SearchSession(Protocol):
    """What a suggestion reads of a search (:class:`search.searchsession.SearchSession`):
    the document frequency of a stem, and the stems near one."""

    def df(self, stem: str) -> int: ...

    def frequencies(self, stems: Sequence[str]) -> list[int]: ...

    def terms_within(self, stem: str, maxdist: int) -> set[str]: ...


#: Queries with at most this many hits get a suggestion (the hits of the query as typed:
#: those its expansion adds do not count).
MAX_HITS = 3
#: A suggested stem's surface forms are counted in this many of the documents that hold it.
SURFACE_SAMPLE = 100
#: A correction must be in this many times as many documents as the word typed.
MIN_RATIO = 10
#: Words shorter than this are not corrected (too many stems are one edit away) ...
MIN_LENGTH = 4
#: ... and words of at least this many letters are looked for two edits away.
LONG_WORD = 6
#: Scripts without a useful edit distance (CJK words are segmented, not spelled).
_SKIP = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\d]")


def edits1(word: str) -> set[str]:
    """The strings one deletion, transposition, replacement or insertion away from *word*
    (letters of the Latin alphabet and of the word itself)."""
    letters = set(string.ascii_lowercase) | set(word)
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out = {a + b[1:] for a, b in splits if b}
    out |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    out |= {a + c + b[1:] for a, b in splits if b for c in letters}
    out |= {a + c + b for a, b in splits for c in letters}
    out.discard(word)
    return out


def correct(session: SearchSession, term: QueryTerm, language: str | None) -> str | None:
    """The stem the index should have had for the query word *term*, or None."""
    stem, typed = term.stem, term.surface
    if len(typed) < MIN_LENGTH or _SKIP.search(typed):
        return None
    least = max(1, MIN_RATIO * session.df(stem))
    stemmer = get_analyzer(language).stem
    edited = (c for c in map(stemmer, edits1(typed)) if c != stem)
    ranked = sorted((1, -df, c) for c, df in _frequent(session, edited, least))
    for maxdist in (1, 2) if len(stem) >= LONG_WORD else (1,):
        found = _frequent(session, session.terms_within(stem, maxdist), least)
        ranked += sorted((damerau_levenshtein(stem, c), -df, c) for c, df in found)
        if ranked:
            return min(ranked)[2]
    return min(ranked)[2] if ranked else None


def _frequent(session: SearchSession, stems: Iterable[str], least: int) -> list[tuple[str, int]]:
    """Those of *stems* in at least *least* documents, with their document frequency."""
    distinct = list(dict.fromkeys(stems))
    return [
        (c, df)
        for c, df in zip(distinct, session.frequencies(distinct), strict=True)
        if df >= least
    ]


def closest_surface(typed: str, surfaces: list[tuple[str, int]], fallback: str) -> str:
    """Of the stored surface forms (with their counts), the one nearest to *typed*, then
    the most frequent; *fallback* when there are none."""
    if not surfaces:
        return fallback
    return min(surfaces, key=lambda s: (damerau_levenshtein(typed, s[0]), -s[1], s[0]))[0]


def shown(
    typed: str, stem: str, surfaces: list[tuple[str, int]], language: str | None
) -> str | None:
    """The word to show for the suggested *stem*: of its stored *surfaces* (with their
    counts), those that *language* stems to *stem* (a page of another language stored
    them as its own stemmer reads them), the nearest to *typed* (:func:`closest_surface`);
    without one, *stem* if it stems to itself; else None.  Never a word that stems as
    *typed* does (*stem* is not its stem), so never *typed* in other letter cases."""
    analyzer = get_analyzer(language)

    def finds(word: str) -> bool:
        return [t.stem for t in analyzer.tokens(word)] == [stem]

    forms = [(s, n) for s, n in surfaces if finds(s)]
    if forms:
        return closest_surface(typed, forms, stem)
    return stem if finds(stem) else None


def suggest(
    session: SearchSession,
    q: ParsedQuery,
    surfaces: Callable[[str], list[tuple[str, int]]],
    few_hits: bool,
    language: str | None = None,
) -> str | None:
    """The corrected query text for *q*, or None when no word needs correcting: its words
    in no document, and with *few_hits* its rare words too.

    *surfaces* gives a stem's stored surface forms with their counts
    (:meth:`search.crawldb.CrawlDB.surfaces`); words are read in *language*, by default
    the query's."""
    language = language if language is not None else q.language
    replacements: dict[str, str] = {}
    for term in q.terms:
        if not few_hits and session.df(term.stem):
            continue
        better = correct(session, term, language)
        if better is not None:
            word = shown(term.surface, better, surfaces(better), language)
            if word is not None:
                replacements[term.surface] = word
    if not replacements:
        return None
    text = replace_words(q.text, replacements, language)
    return text if text != q.text else None
