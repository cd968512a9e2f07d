"""The terms of the array postings, looked up without decoding them all.

An array file (:mod:`search.arrayfile`) holds its segment's terms as one run of UTF-8
bytes and where each term starts, in Whoosh's order: sorted by their bytes (which is also
the order of the decoded strings, code point by code point: UTF-8 keeps it).  Decoding a
large index's every term into a Python string, and giving each an id in one dictionary,
took most of a new process's first query (0.9 s of 2.2 at 100,000 documents and 164,559
terms).  So nothing is decoded when an index is opened:

- :class:`SegmentTerms` finds a term in one segment by binary search over the bytes (one
  term at a time), or by ``numpy.searchsorted`` over a fixed-width prefix of every term,
  made once the segment's binary searches have cost about what making them does (a
  query's expansion looks up tens of terms: a process's first expanded query made them
  in every segment, 30-50 ms at 100,000 documents, where its binary searches take ~1);
- :class:`TermSpace` gives ids, valid for one index generation, to the terms actually
  looked up (a query's stems, the terms of the feedback documents of query expansion)
  and counts their document frequency then, over every segment.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
from whoosh.codec.base import Automata

#: Bytes of each term's prefix in the array :meth:`SegmentTerms.find_many` searches; a
#: longer term is looked up by :meth:`SegmentTerms.find`.
PREFIX = 16


#: The prefixes of a segment are made once its binary searches (:meth:`SegmentTerms.find_many`'s)
#: have taken this many steps a term of the segment, together: a step in Python costs
#: about what making the prefixes of two to five terms does in numpy (0.3 µs against
#: 0.06-0.13 µs a term, 60,000 terms a segment), so look-ups cost at most about twice what
#: they would with the prefixes made at once, and a process that looks up few terms never
#: makes them.
STEPS_PER_TERM = 0.25


#: Terms :func:`fixed_width_rows` copies at a time (its temporaries: ~24 bytes a byte of
#: them).
FIXED_WIDTH_CHUNK = 1 << 14


def fixed_width_rows(
    text: np.ndarray, first: np.ndarray, sizes: np.ndarray, width: int
) -> np.ndarray:
    """Byte strings of *text* (``uint8``) as one ``S<width>`` array: item *i* is the
    *sizes[i]* bytes from *first[i]* on (at most *width*), padded with NUL bytes, which no
    term holds, so that the items sort and compare as the bytes do.

    Every byte of a chunk of terms is copied at once: the k-th byte of the chunk goes from
    the text to its term's row, each term's start moved in both.  By chunks, so that the
    temporaries stay small whatever the number of terms (a merge's whole vocabulary)."""
    first = np.asarray(first, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    out = np.zeros(len(first) * width, dtype=np.uint8)
    for lo in range(0, len(first), FIXED_WIDTH_CHUNK):
        starts, counts = first[lo : lo + FIXED_WIDTH_CHUNK], sizes[lo : lo + FIXED_WIDTH_CHUNK]
        before = np.cumsum(counts) - counts  # bytes of the chunk's terms before each one
        k = np.arange(int(counts.sum()))
        rows = (np.arange(len(starts)) + lo) * width - before
        out[k + np.repeat(rows, counts)] = text[k + np.repeat(starts - before, counts)]
    return out.view(f"S{width}")


def _raw(stem: str) -> bytes:
    # A stem that cannot be UTF-8 (a lone surrogate) is in no index: its bytes find nothing.
    return stem.encode("utf-8", "surrogatepass")


class SegmentTerms:
    """One segment's sorted terms: the bytes of them all (*text*) and where each starts
    (*starts*, one more than there are terms)."""

    def __init__(self, text: np.ndarray, starts: np.ndarray) -> None:
        self.text = text
        self.starts = starts
        self._data: bytes | None = None
        self._prefixes: np.ndarray | None = None
        self._memory: memoryview | None = None
        # Binary-search steps taken by find_many so far (until the prefixes are made).
        self._steps = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return max(len(self.starts) - 1, 0)

    def nbytes(self) -> int:
        """The bytes of what it made from its arrays (the terms' bytes as one ``bytes``,
        its starts as ``int64`` when they were not, the prefixes): its arrays themselves
        are mapped from the array file."""
        data, prefixes, memory = self._data, self._prefixes, self._memory
        total = len(data) if data is not None else 0
        if prefixes is not None:
            total += int(prefixes.nbytes)
        if memory is not None and not np.may_share_memory(memory.obj, self.starts):
            total += memory.nbytes
        return total

    def release(self) -> None:
        """Drop what it made (:meth:`nbytes`), made again when needed: the segment is
        no longer in an index generation kept open."""
        self._data = self._prefixes = self._memory = None
        self._steps = 0

    def data(self) -> bytes:
        # Read once into a local: release() may clear the attribute meanwhile (a query
        # still ranking on a generation the cache dropped).
        data = self._data
        if data is None:
            data = self._data = self.text.tobytes()
        return data

    def raw(self, i: int) -> bytes:
        """Term *i*'s bytes."""
        st = self._offsets()
        return self.data()[st[i] : st[i + 1]]

    def decode(self, i: int) -> str:
        return self.raw(i).decode("utf-8")

    def all(self) -> list[str]:
        """Every term, decoded (what a look-up avoids: for tests and whole-vocabulary uses)."""
        data, st = self.data(), self.starts.tolist()
        return [data[st[i] : st[i + 1]].decode("utf-8") for i in range(len(self))]

    def seek(self, term: bytes, lo: int = 0) -> int:
        """The number of the first term from *lo* on that is *term* or after it (the
        number of terms: none).  From *lo* > 0, galloping first: a walk through the
        terms (the spelling automaton's) mostly moves a few terms on."""
        data, st, n = self.data(), self._offsets(), len(self)
        hi = n
        if lo > 0:
            step, hi = 1, lo
            while hi < n and data[st[hi] : st[hi + 1]] < term:
                lo = hi + 1
                hi = lo + step
                step *= 2
            hi = min(hi, n)
        while lo < hi:
            mid = (lo + hi) // 2
            if data[st[mid] : st[mid + 1]] < term:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def keys(self, numbers: np.ndarray) -> np.ndarray:
        """The bytes of terms *numbers* as one fixed-width array (``S<longest>``, padded
        with NUL bytes, which no term holds): sorted and compared as the terms' bytes are,
        without a Python object a term."""
        numbers = np.asarray(numbers, dtype=np.int64)
        first = self.starts[numbers]
        sizes = self.starts[numbers + 1] - first
        return fixed_width_rows(self.text, first, sizes, max(int(sizes.max(initial=0)), 1))

    def _offsets(self) -> memoryview:
        """:attr:`starts` read item by item as Python ints (a numpy item is slower)."""
        memory = self._memory
        if memory is None:
            starts = np.ascontiguousarray(self.starts, dtype=np.int64)
            memory = self._memory = starts.data.cast("B").cast("q")
        return memory

    def find(self, term: bytes) -> int:
        """The number of the term of bytes *term*, or -1."""
        at = self.seek(term)
        if at < len(self) and self.raw(at) == term:
            return at
        return -1

    def prefixes(self) -> np.ndarray:
        """Every term's first :data:`PREFIX` bytes (``S16``: padded with NUL bytes, which
        no term holds), in the terms' order, so sorted."""
        prefixes = self._prefixes
        if prefixes is None:
            with self._lock:
                prefixes = self._prefixes
                if prefixes is None:
                    prefixes = self._prefixes = fixed_width_rows(
                        self.text,
                        self.starts[: len(self)],
                        np.minimum(np.diff(self.starts), PREFIX),
                        PREFIX,
                    )
        return prefixes

    def find_many(self, terms: Sequence[bytes]) -> np.ndarray:
        """The numbers of the terms of bytes *terms* (-1: absent): by binary search
        (:meth:`find`) until those have taken :data:`STEPS_PER_TERM` steps a term of the
        segment, then over the prefixes (:meth:`prefixes`, made then)."""
        out = np.full(len(terms), -1, dtype=np.int64)
        if not len(self) or not terms:
            return out
        short = [i for i, t in enumerate(terms) if len(t) < PREFIX]
        if short and self._prefixes is None:
            steps = len(short) * len(self).bit_length()
            if self._steps + steps <= STEPS_PER_TERM * len(self):
                self._steps += steps
                return np.array([self.find(t) for t in terms], dtype=np.int64)
        if short:
            prefixes = self.prefixes()
            wanted = np.array([terms[i] for i in short], dtype=f"S{PREFIX}")
            at = np.searchsorted(prefixes, wanted)
            at_ok = np.minimum(at, len(prefixes) - 1)
            # A term shorter than the prefix is its own prefix, and no other term's.
            found = (at < len(prefixes)) & (prefixes[at_ok] == wanted)
            out[np.array(short, dtype=np.int64)[found]] = at[found]
        for i, t in enumerate(terms):
            if len(t) >= PREFIX:
                out[i] = self.find(t)
        return out


class _UnionCursor:
    """The sorted union of several segments' terms, walked as Whoosh's spelling automaton
    walks one segment's term cursor (:meth:`text`, :meth:`find`)."""

    def __init__(self, segments: Sequence[SegmentTerms]) -> None:
        self._segments = [s for s in segments if len(s)]
        self._at = [0] * len(self._segments)

    def text(self) -> str | None:
        """The current term: the least of the segments' current ones (None: past the last)."""
        least: bytes | None = None
        for seg, at in zip(self._segments, self._at, strict=True):
            if at < len(seg):
                raw = seg.raw(at)
                if least is None or raw < least:
                    least = raw
        return None if least is None else least.decode("utf-8")

    def find(self, term: str) -> None:
        """Move to the first term that is *term* or after it (the automaton only moves on)."""
        raw = _raw(term)
        self._at = [seg.seek(raw, at) for seg, at in zip(self._segments, self._at, strict=True)]


def terms_within(
    segments: Sequence[SegmentTerms], text: str, maxdist: int, prefix: int
) -> set[str]:
    """The terms of *segments* within *maxdist* Damerau-Levenshtein edits of *text* that
    share its first *prefix* characters: Whoosh's Levenshtein automaton, made once, skips
    through the union of the segments' sorted terms (each step a binary search in each
    segment's bytes), where Whoosh's own walks each segment's term index on disk."""
    dfa = Automata.levenshtein_dfa(text, maxdist, prefix)
    return set(Automata.find_matches(dfa, _UnionCursor(segments)))


class TermSpace:
    """Term ids over the segments of one index generation, given to terms as they are
    looked up (ids from 0 up, in the order of the look-ups).

    For each id: its term (:attr:`texts`), its document frequency (:attr:`df`), its count
    summed over its postings once a caller has counted it (:meth:`totals`), and in each
    segment its number there (:meth:`local`, -1: not in that segment); for each segment,
    each of its term numbers' id (:meth:`to_global`, -1: none given yet).  Ids
    are given under a lock; what is read without one (by other threads) was written
    before the id was published.
    """

    def __init__(self, segments: list[SegmentTerms], posting_starts: list[np.ndarray]) -> None:
        self.segments = segments
        self._sizes = posting_starts
        self.texts: list[str] = []
        self._ids: dict[str, int] = {}
        self._df = np.zeros(0, dtype=np.int64)
        self._totals = np.zeros(0, dtype=np.float64)
        self._local = [np.zeros(0, dtype=np.int64) for _ in segments]
        self._to_global = [np.full(len(s), -1, dtype=np.int64) for s in segments]
        self._lock = threading.Lock()

    def nbytes(self) -> int:
        """The bytes of its arrays, ~100 a term looked up (its string, dict slot), and what
        its segments made for look-ups (:meth:`SegmentTerms.nbytes`: counted by each
        generation that reads the segment)."""
        arrays = [self._df, self._totals, *self._local, *self._to_global]
        made = sum(seg.nbytes() for seg in self.segments)
        return sum(int(a.nbytes) for a in arrays) + 100 * len(self.texts) + made

    # -- the mapping of stems to ids (what a dict of every term answered) ----------------

    def get(self, stem: str, default: int | None = None) -> int | None:
        gid = self._ids.get(stem)
        if gid is None:
            gid = self._look_up(stem)
        return default if gid is None else gid

    def __contains__(self, stem: object) -> bool:
        return isinstance(stem, str) and self.get(stem) is not None

    def __getitem__(self, stem: str) -> int:
        gid = self.get(stem)
        if gid is None:
            raise KeyError(stem)
        return gid

    def __len__(self) -> int:
        """Ids given so far (not the number of terms in the index)."""
        return len(self.texts)

    def frequencies(self, stems: Sequence[str]) -> np.ndarray:
        """The document frequency of each of *stems* over every segment (0: in none),
        found many at a time (:meth:`SegmentTerms.find_many`) and given no id: for the
        hundreds of candidates of a spelling correction, most of them never ranked."""
        raws = [_raw(stem) for stem in stems]
        df = np.zeros(len(raws), dtype=np.int64)
        for seg, starts in zip(self.segments, self._sizes, strict=True):
            numbers = seg.find_many(raws)
            found = numbers >= 0
            present = numbers[found]
            df[found] += starts[present + 1] - starts[present]
        return df

    def within(self, text: str, maxdist: int, prefix: int = 1) -> set[str]:
        """The terms of the index within *maxdist* edits of *text* sharing its first
        *prefix* characters (:func:`terms_within`), *text* itself left out."""
        found = terms_within(self.segments, text, maxdist, prefix)
        found.discard(text)
        return found

    # -- per id --------------------------------------------------------------------------

    @property
    def df(self) -> np.ndarray:
        """Each id's document frequency (over every segment; deleted documents count)."""
        return self._df[: len(self.texts)]

    def totals(self, gids: np.ndarray) -> np.ndarray:
        """The counts kept by :meth:`keep_totals` for ids *gids* (NaN: not kept yet)."""
        return self._totals[gids]

    def keep_totals(self, gids: np.ndarray, totals: np.ndarray) -> None:
        """Keep *totals*, the counts of ids *gids* summed over their postings (what
        :func:`search.dfr.collection_freq` counts: the same for every reader of this
        generation), so that a later query does not sum their postings again.  Written
        without the lock: a value lost to an array grown meanwhile is counted again."""
        self._totals[gids] = totals

    def local(self, segment: int) -> np.ndarray:
        """Each id's term number in *segment* (-1: absent); longer than the ids given."""
        return self._local[segment]

    def to_global(self, segment: int) -> np.ndarray:
        """Each term number of *segment*'s id (-1: none given yet)."""
        return self._to_global[segment]

    def ids_of(self, segment: int, numbers: np.ndarray) -> np.ndarray:
        """The ids of *segment*'s terms *numbers*, given now to those without one."""
        gids = self._to_global[segment][numbers]
        if (gids < 0).any():
            # Distinct (np.unique would load numpy.ma, ~15 ms of a first query).
            missing = list(dict.fromkeys(numbers[gids < 0].tolist()))
            seg = self.segments[segment]
            self._add([seg.raw(i) for i in missing], (segment, np.array(missing, dtype=np.int64)))
            gids = self._to_global[segment][numbers]
        return gids

    def ids_of_terms(self, segments: np.ndarray, numbers: np.ndarray) -> np.ndarray:
        """The ids of the terms numbered *numbers* in the segments *segments* (one segment
        each, no term twice), given now to those without one: all of them looked up in each
        segment at once, where :meth:`ids_of` per segment looks each segment's up in every
        segment (a relevance model's heaviest terms come from most segments)."""
        gids = np.empty(len(numbers), dtype=np.int64)
        for i in dict.fromkeys(segments.tolist()):
            rows = np.flatnonzero(segments == i)
            gids[rows] = self._to_global[i][numbers[rows]]
        missing = np.flatnonzero(gids < 0)
        if len(missing):
            raws = [
                self.segments[i].raw(n)
                for i, n in zip(segments[missing].tolist(), numbers[missing].tolist(), strict=True)
            ]
            gids[missing] = self._add(raws, None)
        return gids

    # -- giving ids ----------------------------------------------------------------------

    def _look_up(self, stem: str) -> int | None:
        raw = _raw(stem)
        found = [seg.find(raw) for seg in self.segments]
        if max(found, default=-1) < 0:
            return None
        return int(self._add([raw], None, [np.array([f], dtype=np.int64) for f in found])[0])

    def _add(
        self,
        raws: list[bytes],
        home: tuple[int, np.ndarray] | None,
        found: list[np.ndarray] | None = None,
    ) -> np.ndarray:
        """Ids for the terms of bytes *raws* (each in at least one segment; those of
        *home* at its numbers there), unless another thread gave them first."""
        with self._lock:
            if found is None:
                found = [
                    home[1] if home is not None and j == home[0] else seg.find_many(raws)
                    for j, seg in enumerate(self.segments)
                ]
            # A term given an id has it in every segment that holds it (set below), so
            # the greatest over the segments is its id, and -1 that it has none yet.
            out = np.full(len(raws), -1, dtype=np.int64)
            for j, f in enumerate(found):
                present = f >= 0
                out[present] = np.maximum(out[present], self._to_global[j][f[present]])
            new = np.flatnonzero(out < 0)
            if not len(new):
                return out
            first = len(self.texts)
            gids = np.arange(first, first + len(new), dtype=np.int64)
            out[new] = gids
            self._grow(first + len(new))
            df = np.zeros(len(new), dtype=np.int64)
            for j, f in enumerate(found):
                numbers = f[new]
                present = numbers >= 0
                self._local[j][gids] = numbers
                starts = self._sizes[j]
                df[present] += starts[numbers[present] + 1] - starts[numbers[present]]
            self._df[gids] = df
            texts = [raws[i].decode("utf-8") for i in new.tolist()]
            self.texts.extend(texts)
            self._ids.update(zip(texts, gids.tolist(), strict=True))
            # Last: what other threads read without the lock.
            for j, f in enumerate(found):
                numbers = f[new]
                present = numbers >= 0
                self._to_global[j][numbers[present]] = gids[present]
            return out

    def _grow(self, size: int) -> None:
        if size <= len(self._df):
            return
        capacity = max(size, 2 * len(self._df), 1024)
        df = np.zeros(capacity, dtype=np.int64)
        df[: len(self._df)] = self._df
        totals = np.full(capacity, np.nan, dtype=np.float64)
        totals[: len(self._totals)] = self._totals
        self._df, self._totals = df, totals
        for j, old in enumerate(self._local):
            local = np.full(capacity, -1, dtype=np.int64)
            local[: len(old)] = old
            self._local[j] = local
