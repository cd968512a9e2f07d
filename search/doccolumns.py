"""Documents for the index in columns (:class:`DocColumns`): what a crawl's worker sends
its indexer (:class:`search.indexer.Batch`) and what the incremental writer gathers the
documents it is given into (:meth:`search.indexwriter.IncrementalSegmentWriter.add_columns`).

A document as :class:`IndexDoc` holds two dicts (a weight and a tuple of six
weighted counts per stem): for a page of ~385 stems, making one from the analyzer's
records and pickling it cost the worker ~0.63 ms and the message ~32 kB, and the
indexer ~0.29 ms to unpickle it and read it into arrays.  In columns (the stems, then
every stem's weight, counts per section and each document's section weights as arrays)
the worker makes them in ~0.18 ms, a message is ~12.6 kB, and the indexer reads the
arrays as they come (~0.03 ms).  The values are the same, float for float.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from search.analysis import DEFAULT_WEIGHTS, SECTIONS, PackedWords, WordRecord

N_SECTIONS = len(SECTIONS)


def capped(records: Iterable[WordRecord], max_terms: int | None) -> list[WordRecord]:
    """*records*, at most *max_terms* of them, highest weights first when they are cut
    (the design documents' cap on the words indexed per page)."""
    recs = list(records)
    if max_terms is not None and len(recs) > max_terms:
        recs.sort(key=lambda r: r.weight, reverse=True)
        recs = recs[:max_terms]
    return recs


def section_vector(section_weights: Mapping[str, float] | None) -> list[float]:
    """The weight of each section, in :data:`search.analysis.SECTIONS` order: the server's
    (*section_weights*), the defaults where not given."""
    w = {**DEFAULT_WEIGHTS, **(section_weights or {})}
    return [float(w[s]) for s in SECTIONS]


@dataclass(slots=True)
class IndexDoc:
    """One document as the index sees it: its stems with their weighted counts
    ``Σ_f w_f · count_f`` (:attr:`search.analysis.WordRecord.weight`), and per stem its
    weighted count per section ``w_f · count_f`` in :data:`search.analysis.SECTIONS`
    order (what per-field BM25F ranks on; a stem without them counts as body)."""

    docid: int
    url: str
    host: str
    weights: dict[str, float] = field(default_factory=dict)
    sections: dict[str, tuple[float, ...]] = field(default_factory=dict)

    @classmethod
    def from_records(
        cls,
        docid: int,
        url: str,
        host: str,
        records: Iterable[WordRecord],
        max_terms: int | None = None,
        section_weights: Mapping[str, float] | None = None,
    ) -> IndexDoc:
        """The document of analyzer records, whose weights are already merged, weighed
        per section with *section_weights* (the server's; the defaults where not given).

        *max_terms* keeps only that many distinct stems (highest weights first), the design
        documents' cap on the words indexed per page.
        """
        recs = capped(records, max_terms)
        by_section = section_vector(section_weights)
        return cls(
            docid,
            url,
            host,
            {r.stem: r.weight for r in recs},
            {
                r.stem: tuple(c * ws for c, ws in zip(r.counts, by_section, strict=True))
                for r in recs
            },
        )


@dataclass(slots=True)
class DocColumns:
    """Consecutive documents: each one's id, URL, host and number of stems, then every
    stem, document after document, and its weighted count ``Σ_f w_f · count_f``
    (*weights*); and each stem's weighted counts per section ``w_f · count_f``
    (:meth:`weighted_sections`, one row a stem, :data:`search.analysis.SECTIONS` order),
    as :class:`IndexDoc` holds them.  These are kept either as they are
    (*sections*), or as each stem's counts per section (*counts*, whole numbers) and each
    document's section weights (*section_weights*, one row a document): made from the
    analyzer's records, the counts pickle in 2 bytes each (4 past 65,535) instead of 8."""

    docids: list[int]
    urls: list[str]
    hosts: list[str]
    sizes: np.ndarray
    stems: list[str]
    weights: np.ndarray
    sections: np.ndarray | None = None
    counts: np.ndarray | None = None
    section_weights: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.docids)

    def weighted_sections(self) -> np.ndarray:
        """Each stem's weighted counts per section, as doubles (one row a stem)."""
        if self.sections is not None:
            return self.sections
        assert self.counts is not None and self.section_weights is not None
        per_stem = np.repeat(self.section_weights, self.sizes, axis=0)
        # A whole number times a float, as Python multiplies them: the same double.
        return self.counts.astype(np.float64) * per_stem

    @classmethod
    def of_records(
        cls,
        docs: Iterable[
            tuple[
                int,
                str,
                str,
                Mapping[str, WordRecord] | Iterable[WordRecord],
                Mapping[str, float] | None,
            ]
        ],
        max_terms: int | None = None,
    ) -> DocColumns:
        """The documents *docs*, each given as its id, URL, host, analyzer records (whose
        weights are already merged; by stem, or as they are) and its server's section
        weights (None: the defaults), at most *max_terms* stems a document
        (:func:`capped`).  Records in columns (:class:`search.analysis.PackedWords`) are
        copied as columns, without a record object each."""
        docids: list[int] = []
        urls: list[str] = []
        hosts: list[str] = []
        sizes = array("q")
        stems: list[str] = []
        weights = array("d")
        counts = array("q")
        by_section: list[list[float]] = []
        for docid, url, host, records, section_weights in docs:
            docids.append(docid)
            urls.append(url)
            hosts.append(host)
            by_section.append(section_vector(section_weights))
            if isinstance(records, PackedWords) and (
                max_terms is None or len(records) <= max_terms
            ):
                # The columns as they came from the analysis, copied whole.
                sizes.append(len(records))
                stems.extend(records.stems)
                weights.extend(records.weights)
                counts.frombytes(np.asarray(records.counts, dtype=np.int64).tobytes())
                continue
            recs = capped(records.values() if isinstance(records, Mapping) else records, max_terms)
            sizes.append(len(recs))
            stems.extend(r.stem for r in recs)
            weights.extend(r.weight for r in recs)
            counts.extend(chain.from_iterable(r.counts for r in recs))
        count_a = np.array(counts, dtype=np.int64)
        small = not len(count_a) or (count_a.min() >= 0 and count_a.max() <= 0xFFFF)
        return cls(
            docids,
            urls,
            hosts,
            np.array(sizes, dtype=np.int64),
            stems,
            np.array(weights, dtype=np.float64),
            counts=count_a.astype(np.uint16 if small else np.int64).reshape(-1, N_SECTIONS),
            section_weights=np.array(by_section, dtype=np.float64).reshape(-1, N_SECTIONS),
        )

    @classmethod
    def of_docs(cls, docs: Sequence[IndexDoc]) -> DocColumns:
        """The documents *docs* (a stem without weighted counts per section counts as
        body)."""
        sizes = np.array([len(d.weights) for d in docs], dtype=np.int64)
        n = int(sizes.sum())
        return cls(
            [d.docid for d in docs],
            [d.url for d in docs],
            [d.host for d in docs],
            sizes,
            [s for d in docs for s in d.weights],
            np.fromiter(chain.from_iterable(d.weights.values() for d in docs), np.float64, n),
            np.fromiter(
                chain.from_iterable(_sections_of(d) for d in docs), np.float64, n * N_SECTIONS
            ).reshape(-1, N_SECTIONS),
        )

    def docs(self) -> Iterator[IndexDoc]:
        """The documents one by one, as :class:`IndexDoc`."""
        ends = np.cumsum(self.sizes).tolist()
        weights, sections = self.weights.tolist(), self.weighted_sections().tolist()
        start = 0
        for docid, url, host, end in zip(self.docids, self.urls, self.hosts, ends, strict=True):
            stems = self.stems[start:end]
            yield IndexDoc(
                docid,
                url,
                host,
                dict(zip(stems, weights[start:end], strict=True)),
                dict(zip(stems, map(tuple, sections[start:end]), strict=True)),
            )
            start = end

    def __reduce__(self) -> tuple[Any, ...]:
        # Arrays as (type, bytes): numpy's own pickling of an array costs more to read.
        arrays = (self.sizes, self.weights, self.sections, self.counts, self.section_weights)
        return (
            _unpickle,
            (
                self.docids,
                self.urls,
                self.hosts,
                self.stems,
                *((None if a is None else (a.dtype.str, a.tobytes())) for a in arrays),
            ),
        )


def _array(packed: tuple[str, bytes] | None, rows: bool = False) -> np.ndarray | None:
    if packed is None:
        return None
    a = np.frombuffer(packed[1], dtype=np.dtype(packed[0]))
    return a.reshape(-1, N_SECTIONS) if rows else a


def _unpickle(
    docids: list[int],
    urls: list[str],
    hosts: list[str],
    stems: list[str],
    sizes: tuple[str, bytes],
    weights: tuple[str, bytes],
    sections: tuple[str, bytes] | None,
    counts: tuple[str, bytes] | None,
    section_weights: tuple[str, bytes] | None,
) -> DocColumns:
    size_a, weight_a = _array(sizes), _array(weights)
    assert size_a is not None and weight_a is not None
    return DocColumns(
        docids,
        urls,
        hosts,
        size_a,
        stems,
        weight_a,
        _array(sections, rows=True),
        _array(counts, rows=True),
        _array(section_weights, rows=True),
    )


def _sections_of(doc: IndexDoc) -> Iterator[float]:
    """The weighted counts per section of each stem of *doc*, in its stems' order (a stem
    without them counts as body)."""
    w, given = doc.weights, doc.sections
    if len(given) == len(w) and list(given) == list(w):
        return chain.from_iterable(given.values())
    return chain.from_iterable(
        counts if (counts := given.get(stem)) is not None else _as_body(weight)
        for stem, weight in w.items()
    )


def _as_body(weight: float) -> tuple[float, ...]:
    return (weight,) + (0.0,) * (N_SECTIONS - 1)
