"""What a search answers: ranked documents, hits with snippets, result pages, explanations.

:class:`Ranked` is a document as the index ranks it (score, document id, URL, Whoosh
document number), before the database is read; :class:`Hit` is what is shown of it (title,
description, :class:`Segment` snippet with the query words marked, optionally its
:class:`Explanation`); a :class:`ResultPage` holds one page of hits, the number of hits and
the time taken.  Every type renders itself for the command line, HTML and JSON.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(slots=True)
class Segment:
    """A piece of a snippet; *match*: a query word, shown marked."""

    text: str
    match: bool


@dataclass(slots=True)
class Ranked:
    """One ranked document, before the database is read: its score, database id and
    Whoosh document number, and its URL, given, or read from the index's stored fields
    (*stored*: document number to stored fields) when first asked (a search's own hits
    read it with their rows, from the database; the evaluation asks the index)."""

    score: float
    docid: int
    _url: str | None = field(compare=False)
    docnum: int
    _stored: Callable[[int], Mapping[str, Any]] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def url(self) -> str:
        if self._url is None:
            assert self._stored is not None, "a Ranked without its URL nor its stored fields"
            self._url = str(self._stored(self.docnum)["url"])
        return self._url


@dataclass(slots=True)
class TermExplanation:
    stem: str
    query_weight: float
    idf: float
    tf: float
    counts: dict[str, int]
    contribution: float


@dataclass(slots=True)
class Explanation:
    """Why a document scored what it did: the terms of the formula of :mod:`search.ranking`."""

    score: float
    length: float
    avg_length: float
    k1: float
    b: float
    terms: list[TermExplanation]
    expanded: bool
    #: The link-graph prior added to the score (0: off).
    prior: float = 0.0
    #: The BM25F form (:attr:`search.ranking.Params.bm25f`): in the per-field one, each
    #: term's tf is ``tf~``, its sections' counts each normalised by its section's length.
    bm25f: str = "merged"
    #: The term-proximity bonus added to the score (0: off, or none).
    proximity: float = 0.0
    #: The weighting model (:attr:`search.ranking.Params.model`): under ``dph`` or
    #: ``lgd``, each term's part is that model's (:mod:`search.dfr`), *length* the page's
    #: weighted length.
    model: str = "bm25"
    #: LGD's *c* (:attr:`search.ranking.Params.lgd_c`), shown under ``lgd``.
    lgd_c: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        if self.model == "dph":
            out = [
                f"score {self.score:.4f} = Σ qw · (1−f)²/(tf+1) · (tf·log2(tf·avglen/len·N/F) "
                f"+ ½·log2(2π·tf·(1−f))),  f = tf/len;  len {self.length:.0f}, "
                f"avglen {self.avg_length:.1f} (DPH)"
            ]
        elif self.model == "lgd":
            out = [
                f"score {self.score:.4f} = Σ qw · log2((λ + tfn) / λ),  "
                f"tfn = tf·log2(1 + c·avglen/len),  λ = n_t/N;  len {self.length:.0f}, "
                f"avglen {self.avg_length:.1f}, c {self.lgd_c:g} (LGD)"
            ]
        elif self.bm25f == "per-field":
            out = [
                f"score {self.score:.4f} = Σ qw · idf · (k1+1)·tf~ / (k1+tf~),  "
                f"tf~ = Σ_f w_f·count_f / (1 − b_f + b_f·len_f/avglen_f);  k1 {self.k1}"
            ]
        else:
            out = [
                f"score {self.score:.4f} = Σ qw · idf · (k1+1)·tf' / (k1+tf'),  "
                f"tf' = tf / (1 − b + b·len/avglen);  len {self.length:.0f}, "
                f"avglen {self.avg_length:.1f}, k1 {self.k1}, b {self.b}"
            ]
        for t in self.terms:
            where = ", ".join(f"{k} {v}" for k, v in t.counts.items() if v) or "-"
            out.append(
                f"  {t.contribution:8.4f}  {t.stem:<16} qw {t.query_weight:.3f}  "
                f"idf {t.idf:.3f}  tf {t.tf:g} ({where})"
            )
        if self.prior:
            out.append(f"  {self.prior:8.4f}  link-graph prior")
        if self.proximity:
            out.append(f"  {self.proximity:8.4f}  term proximity")
        return out


@dataclass(slots=True)
class Hit:
    rank: int
    score: float
    docid: int
    url: str
    title: str | None
    description: str | None
    content_type: str | None
    snippet: list[Segment] = field(default_factory=list)
    explanation: Explanation | None = None

    def snippet_text(
        self, mark: tuple[str, str] = ("[", "]"), clean: Callable[[str], str] = str
    ) -> str:
        """The snippet as text, its query words between *mark*; each piece of the page's
        text through *clean* (not the marks)."""
        return "".join(
            f"{mark[0]}{clean(s.text)}{mark[1]}" if s.match else clean(s.text) for s in self.snippet
        )

    def snippet_html(self) -> str:
        return "".join(
            f"<b>{html.escape(s.text)}</b>" if s.match else html.escape(s.text)
            for s in self.snippet
        )

    def as_dict(self) -> dict[str, Any]:
        # Built by hand: dataclasses.asdict deep-copies every segment of the snippet, ~0.2
        # ms a hit, a tenth of a whole query's time at 100,000 documents.
        data: dict[str, Any] = {
            "rank": self.rank,
            "score": self.score,
            "docid": self.docid,
            "url": self.url,
            "title": self.title,
            "description": self.description,
            "content_type": self.content_type,
        }
        if self.explanation is not None:
            data["explanation"] = self.explanation.as_dict()
        data["snippet"] = self.snippet_text(("", ""))
        data["snippet_html"] = self.snippet_html()
        data["matches"] = [s.text for s in self.snippet if s.match]
        return data


@dataclass(slots=True)
class ResultPage:
    query: str
    total: int
    page: int
    per_page: int
    seconds: float
    hits: list[Hit]
    #: False when ``total`` is an estimate (the array postings count exactly: always True
    #: today; the field stays in the JSON answer).
    total_exact: bool = True
    #: "Did you mean": the query with its unknown or rare words corrected, when it has few
    #: or no hits (:mod:`search.spelling`); None otherwise.
    suggestion: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "suggestion": self.suggestion,
            "total": self.total,
            "total_exact": self.total_exact,
            "page": self.page,
            "per_page": self.per_page,
            "seconds": round(self.seconds, 4),
            "hits": [h.as_dict() for h in self.hits],
        }
