"""Array postings: the ``words`` field of each Whoosh segment, as flat numpy arrays.

Whoosh keeps a term's postings in pickled, compressed blocks of 128 and its matchers
walk them one posting at a time in Python; a query of a few words over 100,000 pages
spends its time there.  The product scores with one formula over one field
(:mod:`search.ranking`), so the work vectorises: score a whole posting list with a few
numpy operations, add it into one accumulator per query, take the best with
``argpartition``.  Every matching document is scored, so the result is exhaustive (no
pruning to get wrong) and the number of hits is exact.

The arrays are kept in step with the index by Whoosh's own codec plus one more file per
segment (:mod:`search.arrayfile`: its layout and its writer, :mod:`search.arrayreader`:
its reader; written through the codec of :mod:`search.arraycodec`).  A segment without
it (an index written before it existed) makes :meth:`ArrayIndex.load` return None, and the
searcher refuses the index; ``python -m search reindex`` rewrites it with the arrays.

Besides scoring, the arrays answer which documents hold a set of stems
(:meth:`ArrayIndex.containing_all`, :meth:`ArrayIndex.containing_any`): the phrase and
exclusion filters, evaluated flat, one posting list at a time; and each document's postings
(:meth:`ArrayIndex.vector`), from which :mod:`search.expansion` expands a query.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from search import ranking
from search.arrayfile import FIELD, LENGTHS, N_SECTIONS
from search.arrayreader import SegmentArrays, segment_docids
from search.termspace import TermSpace

logger = logging.getLogger(__name__)


class _Leaf:
    """One segment in one index generation: its arrays, where its documents start, its
    deleted documents (its terms' ids in the generation: :class:`TermSpace`)."""

    __slots__ = ("arrays", "base", "bodynorm", "deleted", "lennorm", "restnorm")

    def __init__(self, arrays: SegmentArrays, base: int, deleted: np.ndarray) -> None:
        self.arrays = arrays
        self.base = base
        self.deleted = deleted
        self.lennorm = np.empty(0, dtype=np.float64)
        #: Each document's section norms (:func:`section_norm`): the body's, and the
        #: other sections' (one row a document), apart as the postings' counts are.
        self.bodynorm = np.empty(0, dtype=np.float64)
        self.restnorm = np.empty((0, N_SECTIONS - 1), dtype=np.float64)


_SEGMENTS: OrderedDict[tuple[str, str], SegmentArrays | None] = OrderedDict()
_INDEXES: OrderedDict[tuple[Any, ...], ArrayIndex] = OrderedDict()
_CACHE_LOCK = threading.Lock()
#: How many segments' and index generations' arrays a process keeps open.
SEGMENT_CACHE = 256
INDEX_CACHE = 4
#: ... and the bytes the index generations' own arrays (:meth:`ArrayIndex.nbytes`: their
#: norms, 56 bytes a document, and what is attached per document) may hold together, the
#: latest always kept: a server whose index a crawl commits to every 1,000 pages made a
#: new generation each time, and kept four of them (~740 bytes a page in all).
INDEX_CACHE_BYTES = 64 * 1024 * 1024


def _nbytes(value: Any) -> int:
    """The bytes of the numpy arrays in *value* (an array, or lists, tuples and dicts of
    them)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, list | tuple):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    size = getattr(value, "nbytes", 0)  # LinkRanks: a property
    return int(size) if isinstance(size, int) else 0


def _trim_indexes() -> None:
    """Drop the least recently used index generations past :data:`INDEX_CACHE` or
    :data:`INDEX_CACHE_BYTES` (under ``_CACHE_LOCK``); a query still ranking on one keeps
    it alive itself.  What the terms of their segments made for look-ups
    (:meth:`search.termspace.SegmentTerms.release`) goes with the last generation that
    reads them (the segment cache keeps their arrays, mapped)."""
    dropped = []
    while len(_INDEXES) > 1 and (
        len(_INDEXES) > INDEX_CACHE
        or sum(index.nbytes() for index in _INDEXES.values()) > INDEX_CACHE_BYTES
    ):
        dropped.append(_INDEXES.popitem(last=False)[1])
    if dropped:
        kept = {id(leaf.arrays) for index in _INDEXES.values() for leaf in index.leaves}
        for index in dropped:
            for leaf in index.leaves:
                if id(leaf.arrays) not in kept:
                    leaf.arrays.words.release()


def _segment_arrays(folder: Path, segment: Any) -> SegmentArrays | None:
    key = (str(folder), segment.segment_id())
    with _CACHE_LOCK:
        if key in _SEGMENTS:
            _SEGMENTS.move_to_end(key)
            return _SEGMENTS[key]
    arrays = SegmentArrays.read(folder, segment)
    with _CACHE_LOCK:
        _SEGMENTS[key] = arrays
        while len(_SEGMENTS) > SEGMENT_CACHE:
            _SEGMENTS.popitem(last=False)
    return arrays


def index_folder(searcher: Any) -> Path | None:
    """The folder of the index a Whoosh searcher reads (None for other storages)."""
    ix = getattr(searcher, "_ix", None)
    folder = getattr(getattr(ix, "storage", None), "folder", None)
    return Path(folder) if folder else None


def section_norm(lengths: np.ndarray, avg: np.ndarray, bs: np.ndarray) -> np.ndarray:
    """``1 / (1 − b_f + b_f · len_f / avglen_f)`` of documents of weighted lengths per
    section *lengths* (one row a document); 0 where that is 1 / 0 (b_f 1 and an empty
    section: the document has no count there to normalise)."""
    # In place, in the order of (1 − b) + b · len / avglen: a commit's new generation
    # computes every document's anew (the averages changed).
    out = np.array(lengths, dtype=np.float64)
    out *= bs
    out /= avg
    out += 1 - bs
    np.divide(1.0, out, out=out, where=out > 0)  # the others are 0 (never negative)
    return out


class ArrayIndex:
    """The array postings of every segment a Whoosh searcher reads, as one document space
    (Whoosh's document numbers) and one term space (ids valid for this generation, given
    to terms as they are looked up: :class:`search.termspace.TermSpace`)."""

    def __init__(
        self,
        leaves: list[_Leaf],
        doc_count: int,
        avg_length: float,
        k1: float,
        b: float,
        section_b: tuple[float, ...] | None = None,
        section_scale: tuple[float, ...] | None = None,
    ) -> None:
        self.leaves = leaves
        self.n = doc_count
        self.avglen = avg_length or 1.0
        self.k1, self.b = k1, b
        #: Each section's b (per-field BM25F), or None: the sections merged.
        self.section_b = section_b
        #: The body's weight scale (per-field, :meth:`search.ranking.Params.section_scale`;
        #: 1: the servers' weight).  The other sections' are in their norms (``restnorm``);
        #: the body's norm stays unscaled, as :meth:`length_factor` reads it.
        self.body_scale = 1.0 if section_scale is None else float(section_scale[0])
        #: The term space: stems to ids (``get``, ``in``, ``[]``, as a dict of every
        #: term would answer), each id's term and document frequency.
        self.terms = TermSpace(
            [leaf.arrays.words for leaf in leaves], [leaf.arrays.starts for leaf in leaves]
        )
        self.ids = self.terms
        for leaf in leaves:
            # k1 · (1 − b + b · len / avglen): the document's half of BM25's denominator.
            leaf.lennorm = k1 * ((1 - b) + b * LENGTHS[leaf.arrays.lengths] / self.avglen)
        self.deleted = (
            np.concatenate([leaf.deleted + leaf.base for leaf in leaves])
            if leaves
            else np.empty(0, dtype=np.int64)
        )
        #: Each section's average weighted length over the live documents (per-field).
        self.section_avglen = np.ones(N_SECTIONS, dtype=np.float64)
        if section_b is not None:
            self._section_norms(np.asarray(section_b, dtype=np.float64), section_scale)
        #: Values per document number attached to this index generation, by name (the
        #: database ids, the searcher's linkranks, DPH's page lengths).
        self.per_doc: dict[str, Any] = {}

    def _section_norms(self, bs: np.ndarray, scale: tuple[float, ...] | None) -> None:
        """Each document's ``1 / (1 − b_f + b_f · len_f / avglen_f)`` per section, those
        of the sections but the body multiplied by their weight *scale*."""
        total = np.zeros(N_SECTIONS, dtype=np.float64)
        live = 0
        for leaf in self.leaves:
            lengths = leaf.arrays.section_lengths
            gone = leaf.deleted[leaf.deleted < len(lengths)]
            # The segment's sum (kept with its arrays) less its deleted documents'.
            total += leaf.arrays.section_totals() - lengths[gone].astype(np.float64).sum(axis=0)
            live += len(lengths) - len(gone)
        avg = total / max(live, 1)
        avg[avg <= 0] = 1.0
        self.section_avglen = avg
        for leaf in self.leaves:
            lengths = leaf.arrays.section_lengths
            leaf.bodynorm = section_norm(lengths[:, 0], avg[0], bs[0])
            rest = section_norm(lengths[:, 1:], avg[1:], bs[1:])
            if scale is not None:
                rest *= np.asarray(scale[1:], dtype=np.float64)
            leaf.restnorm = rest

    @classmethod
    def load(
        cls,
        searcher: Any,
        k1: float,
        b: float,
        section_b: tuple[float, ...] | None = None,
        section_scale: tuple[float, ...] | None = None,
    ) -> ArrayIndex | None:
        """The arrays of the index *searcher* reads (per-field BM25F with each section's
        b in *section_b*, its weight scaled by *section_scale*); None when a segment has
        none."""
        folder = index_folder(searcher)
        if folder is None:
            return None
        reader = searcher.reader()
        leaves_in = reader.leaf_readers()
        key: list[Any] = [str(folder), k1, b, section_b, section_scale]
        for r, base in leaves_in:
            segment = r.segment() if hasattr(r, "segment") else None
            if segment is None:
                return None
            key.append((segment.segment_id(), base, segment.deleted_count()))
        n = int(searcher.doc_count_all())
        avglen = float(searcher.avg_field_length(FIELD) or 1.0)
        key += [n, avglen]
        cache_key = tuple(key)
        with _CACHE_LOCK:
            if cache_key in _INDEXES:
                _INDEXES.move_to_end(cache_key)
                return _INDEXES[cache_key]
        leaves = []
        for r, base in leaves_in:
            segment = r.segment()
            arrays = _segment_arrays(folder, segment)
            if arrays is None:
                return None
            deleted = (
                np.fromiter(sorted(segment.deleted_docs()), dtype=np.int64)
                if segment.has_deletions()
                else np.empty(0, dtype=np.int64)
            )
            leaves.append(_Leaf(arrays, base, deleted))
        index = cls(leaves, n, avglen, k1, b, section_b, section_scale)
        with _CACHE_LOCK:
            _INDEXES[cache_key] = index
            _trim_indexes()
        return index

    def nbytes(self) -> int:
        """The bytes of this generation's own arrays: its norms and deleted documents, its
        term space, the values attached per document (the segments' arrays are the
        segment cache's, shared by the generations)."""
        total = self.deleted.nbytes + self.terms.nbytes() + _nbytes(self.per_doc)
        for leaf in self.leaves:
            total += leaf.lennorm.nbytes + leaf.bodynorm.nbytes + leaf.restnorm.nbytes
        return total

    def docids(self, searcher: Any) -> np.ndarray:
        """The database id of every document number (-1: none), from the array files, or
        from Whoosh's stored fields of *searcher* for documents a file lacks
        (:func:`search.arrayreader.segment_docids`)."""
        out = np.full(self.n, -1, dtype=np.int64)
        for i, leaf in enumerate(self.leaves):
            end = self.leaves[i + 1].base if i + 1 < len(self.leaves) else self.n
            out[leaf.base : end] = segment_docids(
                leaf.arrays, end - leaf.base, partial(_stored_at, searcher, leaf.base)
            )
        return out

    def docids_cached(self, searcher: Any) -> np.ndarray:
        """:meth:`docids`, read once for this index generation (:attr:`per_doc`)."""
        ids = self.per_doc.get("docid")
        if ids is None:
            ids = self.per_doc["docid"] = self.docids(searcher)
        return ids

    @property
    def texts(self) -> list[str]:
        """Each term id's stem."""
        return self.terms.texts

    @property
    def df(self) -> np.ndarray:
        """Each term id's document frequency."""
        return self.terms.df

    # -- scoring -------------------------------------------------------------------------

    def idf(self, gids: np.ndarray) -> np.ndarray:
        df = self.df[gids].astype(np.float64)
        return np.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def accumulate(
        self,
        weights: dict[str, float],
        require_all: bool = False,
        start: np.ndarray | None = None,
        memo: Memo | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Each document's score for the weighted query (0: no match), added to a copy of
        *start* if given, and with *require_all* how many of the query's terms each
        document holds.

        With *memo*, each term's scored postings are kept in it (views of this call's
        arrays, with the weight they were scored at), and a term already in it is not read
        again: its parts are scaled to the new weight (a term's part is linear in its
        query weight).  Query expansion's second pass re-weighs the query's own terms,
        which are most of the postings it reads."""
        known = [(g, qw) for s, qw in weights.items() if (g := self.terms.get(s)) is not None]
        reused_docs: list[np.ndarray] = []
        reused_parts: list[np.ndarray] = []
        if memo:
            unread = []
            for g, qw in known:
                for docs, part, was in memo.get(g, ()):
                    reused_docs.append(docs)
                    reused_parts.append(part * (qw / was))
                if g not in memo:
                    unread.append((g, qw))
            known = unread
        gids = np.array([g for g, _ in known], dtype=np.int64)
        # qw · idf · (k1 + 1) of each term: the part of its score that is the same in
        # every document.
        factors = np.array(
            [qw * ranking.idf(self.n, int(self.df[g])) * (self.k1 + 1) for g, qw in known],
            dtype=np.float64,
        )
        # Every posting of every query term, scored in one pass per segment, then summed
        # per document by one bincount.
        all_docs, all_parts = [], []
        for i, leaf, present, los, his in leaf_postings(self, gids):
            a = leaf.arrays
            docs = np.concatenate([a.docs[lo:hi] for lo, hi in zip(los, his, strict=True)])
            sizes = np.subtract(his, los)
            if self.section_b is None:
                tf = np.concatenate([a.tfs[lo:hi] for lo, hi in zip(los, his, strict=True)])
                tf = tf.astype(np.float64)
                part = np.repeat(factors[present], sizes) * tf / (tf + np.take(leaf.lennorm, docs))
            else:
                tf = self._field_tfs(i, leaf, gids[present], los, his, docs)
                part = np.repeat(factors[present], sizes) * tf / np.maximum(tf + self.k1, 1e-300)
            docs = docs + leaf.base if leaf.base else docs
            all_docs.append(docs)
            all_parts.append(part)
            if memo is not None:
                at = 0
                for j, size in zip(present.tolist(), sizes.tolist(), strict=True):
                    g, qw = known[j]
                    if qw:
                        memo.setdefault(g, []).append(
                            (docs[at : at + size], part[at : at + size], qw)
                        )
                    at += size
        return sum_parts(self, reused_docs + all_docs, reused_parts + all_parts, start, require_all)

    def _field_tfs(
        self,
        i: int,
        leaf: _Leaf,
        gids: np.ndarray,
        los: list[int],
        his: list[int],
        docs: np.ndarray,
    ) -> np.ndarray:
        """Per-field BM25F's ``tf~`` of every posting of terms *gids* in segment *i*
        (*leaf*): their postings ``los[k] … his[k] - 1``, of documents *docs*
        (the segment's numbers), one after the other.  The body's counts are every
        posting's; those of the other sections are read for the postings that have them
        (a fifth of a site's), by the terms' slices of them."""
        a = leaf.arrays
        tf = np.concatenate([a.body[lo:hi] for lo, hi in zip(los, his, strict=True)])
        tf = tf.astype(np.float64) * np.take(leaf.bodynorm, docs)
        if self.body_scale != 1:
            tf *= self.body_scale
        terms = self.terms.local(i)[gids]
        firsts, lasts = a.extra_starts[terms].tolist(), a.extra_starts[terms + 1].tolist()
        sizes = np.subtract(his, los)
        offsets = np.cumsum(sizes) - sizes
        at = np.concatenate(
            [
                a.extra_at[first:last].astype(np.int64) + offset
                for first, last, offset in zip(firsts, lasts, offsets.tolist(), strict=True)
            ]
        )
        if len(at):
            rows = np.concatenate(
                [a.extra[first:last] for first, last in zip(firsts, lasts, strict=True)],
                dtype=np.float64,
            )
            tf[at] += np.einsum("ij,ij->i", rows, np.take(leaf.restnorm, docs[at], axis=0))
        return tf

    def field_tf(self, docnum: int, gid: int) -> tuple[float, np.ndarray]:
        """Per-field BM25F's ``tf~`` of term *gid* in document *docnum* (0 when it does
        not hold it), and the posting's weighted count per section."""
        for i in reversed(range(len(self.leaves))):
            leaf = self.leaves[i]
            if docnum < leaf.base:
                continue
            local, term = docnum - leaf.base, self.terms.local(i)[gid]
            if term < 0:
                break
            a = leaf.arrays
            lo, hi = int(a.starts[term]), int(a.starts[term + 1])
            at = int(np.searchsorted(a.docs[lo:hi], local))
            if at >= hi - lo or a.docs[lo + at] != local:
                break
            sec = a.posting_sections(term, at).astype(np.float64)
            norm = (
                np.concatenate(
                    [leaf.bodynorm[local : local + 1] * self.body_scale, leaf.restnorm[local]]
                )
                if self.section_b is not None
                else np.ones(N_SECTIONS)
            )
            return float(sec @ norm), sec
        return 0.0, np.zeros(N_SECTIONS)

    def containing_any(self, stems: Iterable[str]) -> np.ndarray:
        """Which documents hold at least one of *stems* (a boolean per document)."""
        out = np.zeros(self.n, dtype=bool)
        for docs in self._posting_docs(stems):
            out[docs] = True
        return out

    def containing_all(self, stems: Iterable[str]) -> np.ndarray:
        """Which documents hold every one of *stems* (a boolean per document)."""
        wanted = set(stems)
        found = list(self._posting_docs(wanted))
        if len(found) < len(wanted):  # a stem in no document
            return np.zeros(self.n, dtype=bool)
        counts = np.zeros(self.n, dtype=np.int32)
        for docs in found:
            counts[docs] += 1  # a stem has one posting per document
        return counts == len(wanted)

    def _posting_docs(self, stems: Iterable[str]) -> Iterator[np.ndarray]:
        """Each of *stems*' documents (global numbers, one array per stem that has any)."""
        for stem in set(stems):
            gid = self.ids.get(stem)
            if gid is None:
                continue
            parts = []
            for i, leaf in enumerate(self.leaves):
                local = self.terms.local(i)[gid]
                if local >= 0:
                    lo, hi = leaf.arrays.starts[local], leaf.arrays.starts[local + 1]
                    parts.append(leaf.arrays.docs[lo:hi].astype(np.int64) + leaf.base)
            if parts:
                yield np.concatenate(parts)

    def best(
        self, scores: np.ndarray, limit: int, among: np.ndarray | None = None
    ) -> list[tuple[float, int]]:
        """The *limit* best (score, docnum) pairs with a positive score: score descending,
        then document number ascending (the order Whoosh keeps among equal scores); only
        among the document numbers *among* when given (those the caller knows hold the
        best, so that the others are not read)."""
        candidates = np.flatnonzero(scores > 0) if among is None else among[scores[among] > 0]
        return best_of(candidates, scores[candidates], limit)

    def _forward(self, docnum: int) -> tuple[int, np.ndarray, np.ndarray, int] | None:
        """Where document *docnum*'s vector is: its leaf, its term numbers there and
        their weighted term frequencies (the forward index's slices), and its length
        byte; None for a document number past the index's."""
        for i in reversed(range(len(self.leaves))):
            leaf = self.leaves[i]
            if docnum >= leaf.base:
                local = docnum - leaf.base
                a = leaf.arrays
                if local >= len(a.lengths):
                    return None
                lo, hi = a.fwd_starts[local], a.fwd_starts[local + 1]
                return i, a.fwd_terms[lo:hi], a.fwd_tfs[lo:hi], int(a.lengths[local])
        return None

    def vector(self, docnum: int) -> tuple[np.ndarray, np.ndarray, float]:
        """A document's term ids, their weighted term frequencies, and its field length."""
        found = self._forward(docnum)
        if found is None:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64), 1.0
        i, numbers, tfs, length = found
        return self.terms.ids_of(i, numbers), tfs.astype(np.float64), float(LENGTHS[length])

    def page_stems(self, docnum: int) -> PageStems:
        """The stems document *docnum* holds, asked one at a time (``stem in …``)."""
        return PageStems(self, docnum)

    def feedback_model(
        self,
        docnums: Sequence[int],
        weights: Sequence[float],
        frequent: float,
        asked: np.ndarray,
    ) -> TermModel:
        """Relevance-model weights of the terms of documents *docnums*: each term's
        ``Σ_d weight_d · tf(t, d) / |d|`` (Lavrenko & Croft's RM1 over the whole document
        model: ``|d|`` is the sum of the document's weighted tfs, every term counted).

        Terms found in more than *frequent* documents of one segment are left out (then
        they are in more than that overall), and so are those already given an id whose
        document frequency over the index is above it, but for the query's own (ids
        *asked*): what is left may still hold terms above *frequent* overall, which the
        caller checks once they have ids.  No id is given here: a term is its number in
        its segment, and the same term of several segments is merged by its bytes.  (The
        frequent terms weigh most in a relevance model: left for the caller, they made it
        give ids to six times the terms it kept, round after round.)"""
        by_segment: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}
        for docnum, weight in zip(docnums, weights, strict=True):
            found = self._forward(docnum)
            if found is None:
                continue
            i, numbers, tfs, _ = found
            tf = tfs.astype(np.float64)
            total = float(tf.sum())
            if total <= 0:
                continue
            held = by_segment.setdefault(i, ([], []))
            held[0].append(numbers)
            held[1].append(tf * (weight / total))
        segments, numbers_of, values = [], [], []
        for i, (numbers_held, values_held) in by_segment.items():
            distinct, inverse = unique_inverse(np.concatenate(numbers_held).astype(np.int64))
            value = np.bincount(inverse, weights=np.concatenate(values_held))
            starts = self.leaves[i].arrays.starts
            kept = starts[distinct + 1] - starts[distinct] <= frequent
            # The ids given so far (-1: none yet) and their frequencies over the index.
            gids = self.terms.to_global(i)[distinct]
            known = np.flatnonzero(gids >= 0)
            kept[known] &= self.terms.df[gids[known]] <= frequent
            own = self.terms.local(i)[asked]
            for number in own[own >= 0].tolist():  # a few: faster than numpy's isin
                kept |= distinct == number
            distinct = distinct[kept]
            segments.append(np.full(len(distinct), i, dtype=np.int64))
            numbers_of.append(distinct)
            values.append(value[kept])
        if not segments:
            return TermModel.empty()
        if len(segments) == 1:
            # One segment's numbers, distinct and ascending, are already in the order of
            # their terms' bytes (a segment's terms are sorted): nothing to merge.
            return TermModel(segments[0], numbers_of[0], values[0])
        key = np.concatenate(
            [
                self.terms.segments[i].keys(numbers)
                for i, numbers in zip(by_segment, numbers_of, strict=True)
            ]
        )
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.ones(len(key), dtype=bool)
        first[1:] = key[1:] != key[:-1]
        heads = np.flatnonzero(first)
        return TermModel(
            np.concatenate(segments)[order][heads],
            np.concatenate(numbers_of)[order][heads],
            np.add.reduceat(np.concatenate(values)[order], heads) if len(heads) else key[:0],
        )

    def heaviest(
        self, model: TermModel, n: int, keep: Callable[[np.ndarray], np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The *n* heaviest terms of *model* among those *keep* keeps (given their ids):
        their ids and weights, weight descending, then term ascending.  Ids are given only
        to the heaviest, twice as many each time those kept are too few."""
        # The model's terms are in the order of their bytes: its positions break ties.
        order = np.lexsort((np.arange(len(model.weight)), -model.weight))
        gids_kept: list[np.ndarray] = []
        weights_kept: list[np.ndarray] = []
        at, step, found = 0, max(2 * n, 16), 0
        while at < len(order) and found < n:
            part = order[at : at + step]
            at, step = at + step, step * 2
            gids = self.terms.ids_of_terms(model.segment[part], model.number[part])
            kept = keep(gids)
            gids_kept.append(gids[kept])
            weights_kept.append(model.weight[part][kept])
            found += int(kept.sum())
        if not gids_kept:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        return np.concatenate(gids_kept)[:n], np.concatenate(weights_kept)[:n]

    def bm25(self, gids: np.ndarray, tf: np.ndarray, length: Any) -> np.ndarray:
        """BM25 weights (idf included) of terms *gids* with frequencies *tf* in documents
        of *length* (one or one per term): :func:`search.ranking.bm25`, vectorised."""
        norm = tf / ((1 - self.b) + self.b * length / self.avglen)
        return self.idf(gids) * ((self.k1 + 1) * norm) / (self.k1 + norm)

    def text_rank(self, gids: np.ndarray) -> np.ndarray:
        """The rank of each of term ids *gids* in the sorted order of their terms (for
        ties): only among these, so that no more terms than a query reads are sorted."""
        texts = self.terms.texts
        # numpy's strings compare by code point, as Python's do.
        keys = np.array([texts[g] for g in gids.tolist()], dtype=str)
        rank = np.empty(len(keys), dtype=np.int64)
        rank[np.argsort(keys, kind="stable")] = np.arange(len(keys))
        return rank

    def length_factor(self, docnums: np.ndarray) -> np.ndarray:
        """BM25's ``K = k1 · (1 − b + b · len / avglen)`` of documents *docnums*: the
        body's length and b in the per-field form, the page's in the merged one."""
        docnums = np.asarray(docnums, dtype=np.int64)
        out = np.full(len(docnums), self.k1, dtype=np.float64)
        leaf_of = np.searchsorted([leaf.base for leaf in self.leaves], docnums, "right") - 1
        for i, leaf in enumerate(self.leaves):
            at = np.flatnonzero(leaf_of == i)
            local = docnums[at] - leaf.base
            if self.section_b is None:
                out[at] = leaf.lennorm[local]
            else:  # bodynorm is 1 / (1 − b + b · len / avglen) of the body
                norm = leaf.bodynorm[local]
                out[at] = self.k1 / np.where(norm > 0, norm, 1.0)
        return out


#: Scored postings of terms, kept between the passes of one query
#: (:meth:`ArrayIndex.accumulate`): term id -> (documents, parts, query weight) a segment.
Memo = dict[int, list[tuple[np.ndarray, np.ndarray, float]]]


def _stored_at(searcher: Any, base: int, docnum: int) -> Any:
    """The stored fields of document *docnum* of the segment starting at *base*."""
    return searcher.stored_fields(base + docnum)


class PageStems:
    """Whether a document holds a stem (``in``), from its term numbers in its segment's
    forward index: the stem's number there is looked up (an id it has, or gets), the
    document's other terms are given no id (their look-up in every segment costs tens of
    milliseconds on a page of thousands of words)."""

    def __init__(self, arrays: ArrayIndex, docnum: int) -> None:
        self._arrays = arrays
        found = arrays._forward(docnum)
        self._segment = -1 if found is None else found[0]
        self._numbers = np.empty(0, dtype=np.int64) if found is None else found[1]

    def __contains__(self, stem: object) -> bool:
        if self._segment < 0 or not isinstance(stem, str):
            return False
        gid = self._arrays.terms.get(stem)
        if gid is None:
            return False
        number = self._arrays.terms.local(self._segment)[gid]
        return bool(number >= 0 and (self._numbers == number).any())


def leaf_postings(
    arrays: Any, gids: np.ndarray
) -> Iterator[tuple[int, Any, np.ndarray, list[int], list[int]]]:
    """For each segment of *arrays* that holds any of the terms *gids*: its number, its
    leaf, the positions in *gids* of the terms it holds, and where each one's postings
    start and end in the leaf's arrays."""
    for i, leaf in enumerate(arrays.leaves):
        local = arrays.terms.local(i)[gids]
        present = np.flatnonzero(local >= 0)
        if not len(present):
            continue
        starts = leaf.arrays.starts
        yield i, leaf, present, starts[local[present]].tolist(), starts[local[present] + 1].tolist()


def best_of(candidates: np.ndarray, values: np.ndarray, limit: int) -> list[tuple[float, int]]:
    """The *limit* best ``(value, document number)`` pairs of documents *candidates*
    scoring *values*: value descending, then document number ascending (the order Whoosh
    keeps among equal scores)."""
    if limit <= 0 or not len(candidates):
        return []
    if len(candidates) > limit:
        # The limit-th best score; every document scoring at least as much is kept
        # (ties included), then the sort below decides.
        kth = np.partition(values, len(values) - limit)[len(values) - limit]
        keep = values >= kth
        candidates, values = candidates[keep], values[keep]
    order = np.lexsort((candidates, -values))[:limit]
    return [(float(values[i]), int(candidates[i])) for i in order]


def sum_parts(
    arrays: Any,
    all_docs: list[np.ndarray],
    all_parts: list[np.ndarray],
    start: np.ndarray | None,
    require_all: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Each document's score, the sum of its postings' parts (global document numbers
    *all_docs*, scores *all_parts*) added to *start* if given, deleted documents 0; with
    *require_all*, how many postings (query terms) each document has."""
    docs = np.concatenate(all_docs) if all_docs else np.empty(0, dtype=np.int64)
    parts = np.concatenate(all_parts) if all_parts else np.empty(0, dtype=np.float64)
    scores = np.bincount(docs, parts, minlength=arrays.n)
    if start is not None:
        scores += start
    matched = np.bincount(docs, minlength=arrays.n).astype(np.int16) if require_all else None
    if len(arrays.deleted):
        scores[arrays.deleted] = 0.0
    return scores, matched


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)``, which loads ``numpy.ma`` on its first
    call (15-30 ms of a new process's first expanded query)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


@dataclass(frozen=True, slots=True)
class TermModel:
    """Weights of terms not yet given ids (:meth:`ArrayIndex.feedback_model`): each term
    as a segment that holds it and its number there, in the order of the terms' bytes."""

    segment: np.ndarray
    number: np.ndarray
    weight: np.ndarray

    @classmethod
    def empty(cls) -> TermModel:
        none = np.empty(0, dtype=np.int64)
        return cls(none, none, np.empty(0, dtype=np.float64))
