"""Reading the Whoosh index: the weighting model (:class:`BM25`), the Whoosh queries of a
parsed query (:func:`build_query`: the ``site:``, phrase and exclusion filters the searcher
evaluates, and the weighted words of the reference ranking), and the searcher of an
:class:`search.index.Index`.  With :mod:`search.index` (schema, format, the one writer),
everything of the project that knows Whoosh.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from whoosh import query as wq
from whoosh import scoring

from search import ranking
from search.arrayfile import value_sections
from search.index import WORDS_FIELD, Index, reading
from search.query import ParsedQuery
from search.segmentreaders import SegmentReaders


class _BM25Scorer(scoring.WeightLengthScorer):
    """BM25 of one stem in the merged ``words`` field (formula: :mod:`search.ranking`)."""

    def __init__(self, searcher: Any, fieldname: str, text: bytes, b: float, k1: float) -> None:
        parent = searcher.get_parent()
        self.idf = ranking.idf(parent.doc_count_all(), parent.doc_frequency(fieldname, text))
        self.avgfl = parent.avg_field_length(fieldname) or 1.0
        self.b, self.k1 = b, k1
        self.setup(searcher, fieldname, text)

    def _score(self, weight: float, length: float) -> float:
        return ranking.bm25(self.idf, weight, length, self.avgfl, self.b, self.k1)


class BM25(scoring.WeightingModel):
    """Whoosh weighting model of :mod:`search.ranking` (block-max skipping supported): what
    Whoosh's matchers score with in :mod:`search.reference`."""

    def __init__(self, b: float | None = None, k1: float | None = None) -> None:
        self.b = ranking.B if b is None else b
        self.k1 = ranking.K1 if k1 is None else k1

    def supports_block_quality(self) -> bool:
        return True

    def scorer(self, searcher: Any, fieldname: str, text: bytes, qf: int = 1) -> Any:
        if not searcher.schema[fieldname].scorable:
            return scoring.WeightScorer.for_(searcher, fieldname, text)
        return _BM25Scorer(searcher, fieldname, text, self.b, self.k1)


class _FieldScorer(scoring.BaseScorer):
    """Per-field BM25F of one stem (formula: :mod:`search.ranking`): the posting's
    weighted counts per section, read from its Whoosh value, each divided by its
    document's length normalisation of that section (*norms*, one row a document)."""

    def __init__(self, searcher: Any, fieldname: str, text: bytes, k1: float, norms: Any) -> None:
        parent = searcher.get_parent()
        self.idf = ranking.idf(parent.doc_count_all(), parent.doc_frequency(fieldname, text))
        self.k1 = k1
        self.norms = norms
        # Whoosh's matchers run per segment; the norms are by the searcher's numbers.
        self.base = _segment_base(parent, searcher)

    def supports_block_quality(self) -> bool:
        return False

    def max_quality(self) -> float:
        # No bound: Whoosh's matchers then skip no document, and count every match.
        return math.inf

    def score(self, matcher: Any) -> float:
        sections = value_sections(matcher.value()).astype(float)
        norms = self.norms[self.base + matcher.id()]
        tf = float(sum(c * n for c, n in zip(sections, norms, strict=True)))
        return ranking.bm25(self.idf, tf, 1.0, 1.0, 0.0, self.k1)


def _segment_base(parent: Any, searcher: Any) -> int:
    if searcher is parent:
        return 0
    for sub, base in parent.leaf_searchers():
        if sub is searcher:
            return int(base)
    raise ValueError("not a sub-searcher of its parent")


class FieldBM25(scoring.WeightingModel):
    """Whoosh weighting model of per-field BM25F (:mod:`search.ranking`), given each
    document's length normalisation per section (``1 / (1 − b_f + b_f · len_f /
    avglen_f)``, by document number): what Whoosh's matchers score with in
    :mod:`search.reference`."""

    def __init__(self, k1: float, norms: Any) -> None:
        self.k1 = k1
        self.norms = norms

    def supports_block_quality(self) -> bool:
        return False

    def scorer(self, searcher: Any, fieldname: str, text: bytes, qf: int = 1) -> Any:
        if not searcher.schema[fieldname].scorable:
            return scoring.WeightScorer.for_(searcher, fieldname, text)
        return _FieldScorer(searcher, fieldname, text, self.k1, self.norms)


def term_query(stem: str, boost: float = 1.0) -> wq.Query:
    """One analyzed word, in any section (the merged ``words`` field)."""
    return wq.Term(WORDS_FIELD, stem, boost=boost)


def weighted_query(weights: dict[str, float], require_all: bool = False) -> wq.Query:
    clauses = [term_query(stem, w) for stem, w in weights.items()]
    if len(clauses) == 1:
        return clauses[0]
    return wq.And(clauses) if require_all else wq.Or(clauses)


@dataclass(slots=True)
class WhooshQuery:
    """A parsed query for Whoosh: its query weights; the scored query, a filter (must
    match) and a mask (must not), as Whoosh's matchers run them (:mod:`search.reference`;
    they nest one level per word, so only short queries can run this way); and the
    ``site:`` queries, each a flat union of host terms (what the product asks Whoosh)."""

    parsed: ParsedQuery
    weights: dict[str, float]
    scored: wq.Query
    filter: wq.Query | None = None
    mask: wq.Query | None = None
    sites: list[wq.Query] = field(default_factory=list)


#: Whoosh's wildcard characters (fnmatch's), each as a set that holds it alone.
_GLOB_ESCAPES = str.maketrans({"*": "[*]", "?": "[?]", "[": "[[]"})


def _is_address(host: str) -> bool:
    """*host* (no port) is an IP address, or could be the end of one: an IPv6 literal,
    or a last label of digits (no top-level domain is all digits, RFC 3696 §2)."""
    return host.startswith("[") or host.rsplit(".", 1)[-1].isdigit()


def site_query(site: str) -> wq.Query:
    """``site:host``: the host and its subdomains, on any port (``site:host:port``: that
    port only).  *site* is a host, not a pattern: its wildcard characters match
    themselves, and an IP address (``site:127.0.0.1``, ``site:[::1]``) has no
    subdomains, so that ``site:1`` does not match ``127.0.0.1``."""
    if site.startswith("["):  # an IPv6 literal, [::1] or [::1]:8080
        end = site.find("]") + 1
        if not end:  # not a host: "[" would be the start of every IPv6 literal
            return wq.Term("host", site)
        host, port = site[:end], site[end:]
    else:
        host, _, port = site.partition(":")
    glob = site.translate(_GLOB_ESCAPES)
    clauses: list[wq.Query] = [wq.Term("host", site)]
    subdomains = not _is_address(host)
    if subdomains:
        clauses.append(wq.Wildcard("host", f"*.{glob}"))
    if not port:
        clauses.append(wq.Prefix("host", f"{site}:"))
        if subdomains:
            clauses.append(wq.Wildcard("host", f"*.{glob}:*"))
    return wq.Or(clauses)


def build_query(
    q: ParsedQuery, decay: float | None = None, decay_words: int | None = None
) -> WhooshQuery:
    """The Whoosh query of a parsed query (BM25F, query words weighted by qw(t), later
    words by *decay* in queries of at most *decay_words* distinct words:
    :func:`search.ranking.query_weights`).

    Phrase words and ``site:`` restrictions become a filter and exclusions a mask, so they
    select documents without changing scores.
    """
    weights = ranking.query_weights(q.all_stems, decay, decay_words)
    scored = weighted_query(weights, q.require_all)
    sites = [site_query(s) for s in q.sites]
    required: list[wq.Query] = [term_query(s) for phrase in q.phrases for s in phrase]
    if sites:
        required.append(wq.Or(sites))
    excluded = [term_query(s) for s in q.excluded]
    excluded += [wq.And([term_query(s) for s in p]) for p in q.excluded_phrases]
    return WhooshQuery(
        q,
        weights,
        scored,
        wq.And(required) if required else None,
        wq.Or(excluded) if excluded else None,
        sites,
    )


def matching_docs(searcher: Any, query: wq.Query) -> Iterator[int]:
    """The document numbers *query* matches (unscored)."""
    return iter(query.docs(searcher))


def stored(searcher: Any, docnum: int) -> tuple[int, str]:
    """The document id and URL of document *docnum*."""
    fields = searcher.stored_fields(docnum)
    return int(fields["docid"]), fields["url"]


def open_searcher(index: Index, readers: SegmentReaders | None = None) -> Any:
    """A Whoosh searcher of *index* that scores with :class:`BM25`; with *readers*, on
    the files of the segments they opened for an earlier generation where the segment is
    the same (each with its current deletions: :mod:`search.segmentreaders`).

    Its segments' files are read as files, not mapped: Whoosh maps a compound segment
    and then copies each file it opens of it (terms, postings, stored fields) into memory
    (``BytesIO``), 0.15 s and 140 MB a searcher at 100,000 documents; the searcher reads
    little of them (the hits' stored fields, ``site:`` filters, spelling's terms), the
    ranking reads the array postings (:mod:`search.arrays`, mapped)."""
    ix = index.open()
    ix.storage.supports_mmap = False
    with reading(index.path):
        if readers is not None:
            return readers.searcher(ix, weighting=BM25())
        return ix.searcher(weighting=BM25())
