"""Parsing a user's query into words, phrases, exclusions and site restrictions (the
design documents' CUserQuery).

Syntax: ``word word "a phrase" -excluded -"excluded phrase" site:host``.  Words go through
the same analyzer as page words (tokenize, lowercase, stop words, stem); their order is
kept, because earlier words weigh more (:mod:`search.ranking`).  Nothing of the syntax of
Whoosh's own query parser means anything here (``title:x``, ``AND``, ``*``, ``~2`` are
words and punctuation), and an unbalanced quote runs to the end of the query.

What a query may ask for is bounded, so that no query costs more than a few array
operations per word: :data:`MAX_QUERY_BYTES`, :data:`MAX_QUERY_WORDS`,
:data:`MAX_PHRASE_WORDS`, :data:`MAX_SITES`, and the deepest result served,
:data:`MAX_RESULTS` (:func:`check_window`).  Beyond them, and for text that is not valid
Unicode (invalid UTF-8 on the command line), :class:`QueryError` says what the limit is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from search.analysis import get_analyzer

_PART_RE = re.compile(r'(-?)"([^"]*)"?|(\S+)')

#: Longest query, in bytes of UTF-8 (a long question or a pasted paragraph fits).
MAX_QUERY_BYTES = 8192
#: Most words in a query, stop words and excluded words included (CISI's longest
#: description has 335).
MAX_QUERY_WORDS = 500
#: Most words in one quoted phrase, stop words included.
MAX_PHRASE_WORDS = 32
#: Most ``site:`` restrictions in a query (each is a few wildcard terms of the index's
#: host field: 240 of them took seconds on an index of two documents).
MAX_SITES = 16
#: Deepest result served: page × results per page (Elasticsearch's default
#: ``max_result_window``).
MAX_RESULTS = 10_000


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
    #: The language its words were stemmed in (None: English, the default).
    language: str | None = None
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


def parse_query(
    text: str, require_all: bool = False, language: str | None = None, syntax: bool = True
) -> ParsedQuery:
    """Parse *text*; raise :class:`QueryError` when nothing searchable is left.  Without
    *syntax*, every word of *text* is a word to search for: quotes, a leading ``-`` and
    ``site:`` mean nothing (a judged query of an evaluation is a description to rank by, not
    a user's syntax: a quoted word of it would become a phrase every hit must hold)."""
    if not text or not text.strip():
        raise QueryError("empty query: give one or more words to search for")
    check_size(text)
    analyzer = get_analyzer(language)
    words = sum(1 for _ in analyzer.words(text))
    if words > MAX_QUERY_WORDS:
        raise QueryError(f"the query has {words} words: at most {MAX_QUERY_WORDS} are searched")
    q = ParsedQuery(text=text, require_all=require_all, language=language)
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

    for m in _PART_RE.finditer(text) if syntax else ():
        negative, phrase, word = m.group(1), m.group(2), m.group(3)
        if phrase is not None:
            length = sum(1 for _ in analyzer.words(phrase))
            if length > MAX_PHRASE_WORDS:
                raise QueryError(
                    f"a quoted phrase has {length} words: at most {MAX_PHRASE_WORDS} "
                    f"(quote a shorter part of it, or leave the quotes out)"
                )
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
    if not syntax:
        add_terms(text)
    if len(q.sites) > MAX_SITES:
        raise QueryError(
            f"the query has {len(q.sites)} site: restrictions: at most {MAX_SITES} "
            f"(search fewer sites at a time)"
        )
    if not q.terms:
        if q.sites or q.excluded or q.excluded_phrases:
            raise QueryError(
                f"the query {text.strip()!r} has no word to search for: site: and "
                f"-exclusions only narrow a search; add a word to find "
                f"(vacuum site:example.org)"
            )
        if any(analyzer.words(text)):
            raise QueryError(
                f"the query {text.strip()!r} has only stop words: nothing to search for"
            )
        raise QueryError(f"the query {text.strip()!r} has no words to search for")
    return q


def replace_words(text: str, replacements: dict[str, str], language: str | None = None) -> str:
    """*text* with each searched word (not an exclusion nor a ``site:``) whose lowercased
    form is a key of *replacements* replaced by its value; the rest kept as typed."""
    analyzer = get_analyzer(language)
    out: list[str] = []
    pos = 0
    for m in _PART_RE.finditer(text):
        negative, phrase, word = m.group(1), m.group(2), m.group(3)
        if negative or (word is not None and word.lower().startswith("site:") and len(word) > 5):
            continue
        if word is not None and word.startswith("-") and len(word) > 1:
            continue
        group = 2 if phrase is not None else 3
        base = m.start(group)
        for start, end, lowered in analyzer.spans(m.group(group)):
            if lowered in replacements:
                out.append(text[pos : base + start])
                out.append(replacements[lowered])
                pos = base + end
    out.append(text[pos:])
    return "".join(out)


def check_size(text: str) -> None:
    """Raise :class:`QueryError` when *text* is not valid Unicode (lone surrogates: what
    Python makes of invalid UTF-8 on the command line) or longer than
    :data:`MAX_QUERY_BYTES`."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise QueryError("the query is not valid UTF-8 text") from None
    if size > MAX_QUERY_BYTES:
        raise QueryError(f"the query is {size} bytes long: at most {MAX_QUERY_BYTES}")


def check_window(page: int, per_page: int) -> None:
    """Raise :class:`QueryError` unless results *page* of *per_page* can be served
    (both ≥ 1, no result deeper than :data:`MAX_RESULTS`)."""
    if page < 1 or per_page < 1:
        raise QueryError("the page and the number of results per page must be at least 1")
    if page * per_page > MAX_RESULTS:
        raise QueryError(
            f"results beyond the first {MAX_RESULTS:,} are not served "
            f"(asked: page {page} of {per_page} results)"
        )
