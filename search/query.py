"""Parsing a user's query into words, phrases, exclusions and site restrictions.

Syntax: ``word word "a phrase" -excluded -"excluded phrase" site:host``.  Words go through
the same analyzer as page words (tokenize, lowercase, stop words, stem); their order is
kept, because earlier words weigh more (:mod:`search.ranking`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from search.analysis import get_analyzer

_PART_RE = re.compile(r'(-?)"([^"]*)"?|(\S+)')


class QueryError(ValueError):
    """The query cannot be searched (empty, or only stop words); the message says why."""


@dataclass(slots=True)
class QueryTerm:
    stem: str
    surface: str
    position: int


@dataclass(slots=True)
class ParsedQuery:
    text: str
    terms: list[QueryTerm] = field(default_factory=list)
    phrases: list[list[str]] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    excluded_phrases: list[list[str]] = field(default_factory=list)
    sites: list[str] = field(default_factory=list)
    require_all: bool = False
    #: Every searched word's stem in query order, repeats included (for query-term
    #: frequency: a word typed twice weighs twice).
    occurrences: list[str] = field(default_factory=list)

    @property
    def all_stems(self) -> list[str]:
        return self.occurrences or self.stems

    @property
    def stems(self) -> list[str]:
        return [t.stem for t in self.terms]

    @property
    def surfaces(self) -> dict[str, str]:
        return {t.stem: t.surface for t in self.terms}


def parse_query(text: str, require_all: bool = False, language: str | None = None) -> ParsedQuery:
    """Parse *text*; raise :class:`QueryError` when nothing searchable is left."""
    if not text or not text.strip():
        raise QueryError("empty query: give one or more words to search for")
    analyzer = get_analyzer(language)
    q = ParsedQuery(text=text, require_all=require_all)
    seen: set[str] = set()

    def add_terms(chunk: str) -> list[str]:
        stems = []
        for token in analyzer.tokens(chunk):
            stems.append(token.stem)
            q.occurrences.append(token.stem)
            if token.stem not in seen:
                seen.add(token.stem)
                q.terms.append(QueryTerm(token.stem, token.surface, len(q.terms)))
        return stems

    for m in _PART_RE.finditer(text):
        negative, phrase, word = m.group(1), m.group(2), m.group(3)
        if phrase is not None:
            if negative:
                stems = [t.stem for t in analyzer.tokens(phrase)]
                if stems:
                    q.excluded_phrases.append(stems)
            else:
                stems = add_terms(phrase)
                if len(stems) > 1:
                    q.phrases.append(stems)
            continue
        assert word is not None
        if word.lower().startswith("site:") and len(word) > 5:
            q.sites.append(word[5:].lower().strip("/"))
        elif word.startswith("-") and len(word) > 1:
            q.excluded.extend(t.stem for t in analyzer.tokens(word[1:]))
        else:
            add_terms(word)
    if not q.terms:
        if any(analyzer.words(text)):
            raise QueryError(
                f"the query {text.strip()!r} has only stop words or exclusions: "
                f"nothing to search for"
            )
        raise QueryError(f"the query {text.strip()!r} has no words to search for")
    return q
