"""The Whoosh adapter: schema, one writer, searcher.

Everything that knows Whoosh lives here, behind :class:`IndexDoc`, :class:`Index` and
:class:`IndexWriter`, and in :mod:`search.indexquery` (the weighting model and the queries
of a parsed query), so the rest of the project could move to another engine.

Documents arrive already analyzed: the crawler has counted every stem per section, so the
index does not tokenize again.  The sections are merged into one field, ``words``, as BM25F
merges them (see :mod:`search.ranking`): a stem's posting carries its weighted count
``Σ_f w_f · count_f`` as its weight (the term frequency of the scorer) and, rounded, as its
``freq``, so that the field length Whoosh keeps is the page's weighted length.  Each page's
term vector, for query expansion, is kept by the array postings (:mod:`search.arrayfile`,
written by the same writer), which the product ranks on.

A full rebuild (:meth:`Index.rebuild`) takes documents as arrays (:class:`DocBatch`) and
writes the ``words`` postings, nearly all of a segment's, from arrays: sorted by term in
bounded memory (:class:`search.arrayfile.TermRuns`), encoded a block at a time.  Its files
are those of :meth:`Index.writer` fed the same documents one by one, byte for byte.

The index records its format, :data:`FORMAT`, in a file of its folder (:data:`FORMAT_FILE`),
written when the index is created and by every full rebuild.  An index of another format
(or one without it: written before it was recorded) is refused with one line saying to run
``python -m search reindex``: the database is the record, a rebuild loses nothing.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from whoosh import index as whoosh_index
from whoosh.fields import ID, STORED, FieldType, Schema
from whoosh.filedb.filestore import FileStorage
from whoosh.formats import Frequency
from whoosh.index import LockError
from whoosh.system import pack_uint
from whoosh.util.numeric import byte_to_length, length_to_byte
from whoosh.writing import CLEAR, PostingPool, SegmentWriter

from search import faults
from search.analysis import SECTIONS, WordRecord
from search.arrayfile import FIELD as _ARRAY_FIELD
from search.arrayfile import ArrayCodec, TermRuns

logger = logging.getLogger(__name__)

#: Index field of each analyzer section (``url`` is taken by the stored URL).
FIELD_OF_SECTION: dict[str, str] = {
    "body": "body",
    "title": "title",
    "url": "urlwords",
    "desc": "desc",
    "keywords": "keywords",
    "boilerplate": "boilerplate",
}
TEXT_FIELDS: tuple[str, ...] = tuple(FIELD_OF_SECTION[s] for s in SECTIONS)

#: The one scored field: every section's stems, weighted.
WORDS_FIELD = _ARRAY_FIELD

INDEX_NAME = "spidersite"

#: The index format: raise it when what an index holds changes (schema, codec, array
#: file), so that an index of another format is refused until it is rebuilt.  2: the
#: ``words`` field without Whoosh term vectors, array postings in every segment.
FORMAT = 2
#: The file of the index folder that records its format (a name Whoosh's own clean-up of
#: unused files leaves alone).
FORMAT_FILE = "spidersite-format.json"
REINDEX = "python -m search reindex"
#: The temporary table of contents Whoosh writes, then renames, at the end of a commit.
_TEMP_TOC = re.compile(rf"^_{INDEX_NAME}_[0-9]+\.toc\..+$")


#: Megabytes of postings a Whoosh writer holds in memory (its ``limitmb``: Whoosh counts
#: each posting's Python objects, within ~10 % of what they take); past it the writer sorts
#: them into a run on disk, and merges the runs when it commits.  Segment merges go through
#: the same buffer, so this bounds a merge's memory too (with the array postings' own
#: buffer, :data:`search.arrayfile.BUFFER_POSTINGS`).
LIMITMB = 32
#: Whether the writer reads the segments it merges through ``mmap``: off, so that their
#: pages are read into small buffers instead of being mapped (and counted) whole in the
#: indexer's resident memory while a merge reads them.
WRITER_MMAP = False


#: Merge policy (Lucene's log merge policy, by live documents): a segment's level is
#: ⌊log_MERGE_FACTOR(documents)⌋; when MERGE_FACTOR segments share a level, they and every
#: smaller segment are merged into the segment being written.  An index of N documents then
#: keeps at most about MERGE_FACTOR · log_MERGE_FACTOR(N) segments (ranking costs a little
#: per segment), and each document is rewritten about log_MERGE_FACTOR(N) times.  Whoosh's
#: own default merges only tiny segments: one commit of 5,000 documents at a time left 20
#: segments for 100,000 documents.
MERGE_FACTOR = 4


def _level(docs: int) -> int:
    return int(math.log(max(docs, 1), MERGE_FACTOR))


def merge_policy(writer: SegmentWriter, segments: list[Any]) -> list[Any]:
    """Whoosh merge type of :data:`MERGE_FACTOR`: merges into *writer*, returns the
    segments kept as they are."""
    from whoosh.reading import SegmentReader

    levels: dict[int, list[Any]] = {}
    for segment in segments:
        levels.setdefault(_level(segment.doc_count()), []).append(segment)
    chosen: list[Any] = []
    for level in sorted(levels):
        chosen += levels[level]
        if len(levels[level]) >= MERGE_FACTOR:
            break
    else:
        return list(segments)
    for segment in chosen:
        reader = SegmentReader(writer.storage, writer.schema, segment)
        writer.add_reader(reader)
        reader.close()
    faults.point("merge")
    merged = {id(s) for s in chosen}
    return [s for s in segments if id(s) not in merged]


class SearchIndexError(Exception):
    """The index cannot be used as asked (the message is one line meant for users)."""


class IndexMissing(SearchIndexError):
    """There is no index yet."""


class IndexOutdated(SearchIndexError):
    """The index was written in another format (:data:`FORMAT`): rebuild it."""


class IndexUnavailable(SearchIndexError):
    """Another process is writing the index."""


def _pre_analyzed(value: Any) -> dict[str, tuple[int, float]]:
    if isinstance(value, str):  # a plain string: one term per whitespace-separated word
        counts: dict[str, int] = {}
        for word in value.split():
            counts[word] = counts.get(word, 0) + 1
        return {w: (c, float(c)) for w, c in counts.items()}
    return dict(value)


class PreAnalyzed(FieldType):
    """A text field fed with ``{stem: (freq, weight)}`` instead of a string."""

    def __init__(self) -> None:
        self.format = Frequency()
        self.analyzer = None
        self.scorable = True
        self.stored = False
        self.unique = False
        self.vector = None
        self.column_type = None

    def index(self, value: Any, **kwargs: Any) -> Iterator[tuple[bytes, int, float, bytes]]:
        for stem, (count, weight) in _pre_analyzed(value).items():
            # Frequency postings are fixed-size: the value must be pack_uint, as Whoosh
            # writes it (a varint breaks segment merges).
            yield stem.encode("utf-8"), count, weight, pack_uint(count)

    def process_text(self, qstring: str, mode: str = "", **kwargs: Any) -> Iterator[str]:
        # Query terms are analyzed by search.analysis before they reach Whoosh.
        return iter(qstring.split())

    def self_parsing(self) -> bool:
        return False


def make_schema() -> Schema:
    fields: dict[str, Any] = {
        "docid": ID(stored=True, unique=True),
        "url": STORED(),
        "host": ID(),
    }
    fields[WORDS_FIELD] = PreAnalyzed()
    return Schema(**fields)


def postings(weights: Mapping[str, float]) -> dict[str, tuple[int, float]]:
    """The ``words`` field of a document: per stem, (rounded, exact) weighted count."""
    return {s: (max(1, round(w)), w) for s, w in weights.items() if w > 0}


@dataclass(slots=True)
class IndexDoc:
    """One document as the index sees it: its stems with their weighted counts
    ``Σ_f w_f · count_f`` (:attr:`search.analysis.WordRecord.weight`)."""

    docid: int
    url: str
    host: str
    weights: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_records(
        cls,
        docid: int,
        url: str,
        host: str,
        records: Iterable[WordRecord],
        max_terms: int | None = None,
    ) -> IndexDoc:
        """The document of analyzer records, whose weights are already merged.

        *max_terms* keeps only that many distinct stems (highest weights first), the design
        documents' cap on the words indexed per page.
        """
        recs = list(records)
        if max_terms is not None and len(recs) > max_terms:
            recs.sort(key=lambda r: r.weight, reverse=True)
            recs = recs[:max_terms]
        return cls(docid, url, host, {r.stem: r.weight for r in recs})


class Index:
    """A Whoosh index folder: open or create, write through one writer, search."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def exists(self) -> bool:
        return whoosh_index.exists_in(str(self.path), indexname=INDEX_NAME)

    def format(self) -> int | None:
        """The format recorded in the index folder (None: none recorded)."""
        try:
            return int(json.loads((self.path / FORMAT_FILE).read_text())["format"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _record_format(self) -> None:
        (self.path / FORMAT_FILE).write_text(json.dumps({"format": FORMAT}) + "\n")

    def open(self, create: bool = False) -> Any:
        """The Whoosh index (created empty with *create*); :class:`IndexMissing` when
        there is none, :class:`IndexOutdated` when it is of another format."""
        if self.exists():
            self.check_format()
            return whoosh_index.open_dir(str(self.path), indexname=INDEX_NAME)
        if not create:
            raise IndexMissing(
                f"no search index at {self.path} yet: crawl a site first "
                f"(scrapy crawl site -a seeds=URL) or rebuild it ({REINDEX})"
            )
        return self._create()

    def check_format(self) -> None:
        """Raise :class:`IndexOutdated` unless the index is of :data:`FORMAT` (checked
        before Whoosh reads anything of it: an older schema may not even unpickle)."""
        found = self.format()
        if found != FORMAT:
            written = f"format {found}" if found is not None else "an older version"
            raise IndexOutdated(
                f"the search index at {self.path} was written by {written} "
                f"(this version reads format {FORMAT}): run `{REINDEX}` to rebuild it "
                f"from the database"
            )

    def _create(self) -> Any:
        """A new, empty index of the current format (an index already there is dropped:
        Whoosh writes a first generation that lists no segment)."""
        self.path.mkdir(parents=True, exist_ok=True)
        ix = whoosh_index.create_in(str(self.path), make_schema(), indexname=INDEX_NAME)
        self._record_format()
        return ix

    @contextmanager
    def writer(
        self, limitmb: int = LIMITMB, clear: bool = False, wait: float = 0.0
    ) -> Iterator[IndexWriter]:
        """The one writer: committed on success, cancelled on error.

        With *clear* the index is rewritten whole (a full rebuild); an index of another
        format is then started anew in the current one, while without *clear* it is
        refused (:class:`IndexOutdated`).  *wait* is how many seconds to wait for another
        writer's lock before giving up.
        """
        ix = self._open_for_writing(clear)
        with self._committed(
            ix, SegmentWriter, clear, limitmb=limitmb, timeout=wait, delay=0.25
        ) as w:
            yield IndexWriter(w)

    @contextmanager
    def rebuild(
        self, vocabulary: Sequence[str], limitmb: int = LIMITMB, wait: float = 0.0
    ) -> Iterator[RebuildWriter]:
        """The one writer of a full rebuild from arrays (:class:`DocBatch`): the index is
        rewritten whole in one segment, committed on success, cancelled on error, as
        ``writer(clear=True)`` does, with the same files, byte for byte, in a fraction of
        the time.  *vocabulary* is the stem of each term id the batches use."""
        ix = self._open_for_writing(clear=True)
        with self._committed(
            ix, _RebuildSegmentWriter, True, vocabulary, limitmb=limitmb, timeout=wait, delay=0.25
        ) as w:
            yield RebuildWriter(w)

    def _open_for_writing(self, clear: bool) -> Any:
        if clear and self.exists() and self.format() != FORMAT:
            self._create()
        ix = self.open(create=True)
        if not WRITER_MMAP:
            ix = FileStorage(str(self.path), supports_mmap=False).open_index(INDEX_NAME)
        return ix

    @contextmanager
    def _committed(
        self, ix: Any, cls: type[SegmentWriter], clear: bool, *args: Any, **kwargs: Any
    ) -> Iterator[Any]:
        try:
            w = cls(ix, *args, codec=ArrayCodec(), **kwargs)
        except LockError:
            raise IndexUnavailable(
                f"the search index at {self.path} is being written by another process "
                f"(a crawl or a reindex); try again when it has finished"
            ) from None
        before = self._remove_leftovers()
        try:
            yield w
        except BaseException:
            w.cancel()
            raise
        else:
            w.commit(mergetype=CLEAR if clear else merge_policy)
            self._sync(before)

    def _remove_leftovers(self) -> set[str]:
        """What a writer killed in its commit left and Whoosh never removes: the temporary
        copy of a table of contents it was writing (``_spidersite_N.toc.<time>``).  Called
        with the writer's lock held, so no live writer owns one.  (The files of a segment
        no table of contents lists, and the writer's temporary folder, go with the next
        commit: Whoosh removes them.)  Returns the names now in the folder."""
        names = set(os.listdir(self.path))
        for name in [n for n in names if _TEMP_TOC.match(n)]:
            logger.info("Removing %s, left by a writer that was killed", name)
            (self.path / name).unlink(missing_ok=True)
            names.discard(name)
        return names

    def _sync(self, before: set[str]) -> None:
        """Make a commit durable before its documents are marked indexed: the files it
        wrote (its segment, its table of contents) and the folder's entries for them are
        flushed to disk, so that a power cut cannot lose what the database says is
        searchable (a kill alone cannot: the files are in the system's cache)."""
        for name in sorted(set(os.listdir(self.path)) - before):
            path = self.path / name
            if not path.is_file():
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def doc_count(self) -> int:
        """Documents in the index (0 when there is none)."""
        if not self.exists():
            return 0
        return int(self.open().doc_count())

    def docids(self) -> set[int]:
        """Every document id in the index (for consistency checks)."""
        ix = self.open()
        with ix.searcher() as s:
            return {int(fields["docid"]) for fields in s.all_stored_fields()}


class IndexWriter:
    """Adds, replaces and deletes documents through one Whoosh writer."""

    def __init__(self, writer: SegmentWriter) -> None:
        self._w = writer
        self.added = 0

    def add(self, doc: IndexDoc, update: bool = True) -> None:
        values: dict[str, Any] = {"docid": str(doc.docid), "url": doc.url, "host": doc.host}
        words = postings(doc.weights)
        if words:
            values[WORDS_FIELD] = words
        if update:
            self._w.update_document(**values)
        else:
            self._w.add_document(**values)
        self.added += 1

    def delete(self, docid: int) -> None:
        self._w.delete_by_term("docid", str(docid))


@dataclass(slots=True)
class DocBatch:
    """Consecutive documents of a full rebuild (:meth:`Index.rebuild`) as arrays: each
    document's id, URL, host and number of postings, then every posting, document after
    document: its term id (an index into the rebuild's vocabulary) and its weighted count
    ``Σ_f w_f · count_f`` (what :attr:`IndexDoc.weights` holds).  Postings of weight 0
    are left out, as :func:`postings` leaves them out."""

    docids: Sequence[int]
    urls: Sequence[str]
    hosts: Sequence[str]
    sizes: np.ndarray
    terms: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return len(self.docids)


#: Whoosh's field length of each length byte.
_BYTE_LENGTHS = np.array([byte_to_length(b) for b in range(256)], dtype=np.int64)


class _PoolWithoutWords(PostingPool):
    """Whoosh's posting pool, without the ``words`` field (a rebuild writes it whole)."""

    def add(self, item: Any) -> None:
        if item[0] != WORDS_FIELD:
            super().add(item)


class _RebuildSegmentWriter(SegmentWriter):
    """Whoosh's segment writer for a full rebuild: every field but ``words`` goes through
    Whoosh as usual (two postings a document); the ``words`` postings, nearly all of them,
    are sorted by term in arrays (:class:`search.arrayfile.TermRuns`, bounded memory) and
    written when the segment is flushed, a block of 128 at a time, by the codec's field
    writer (:meth:`search.arrayfile._FieldWriter.add_term`), instead of going one by one
    through Whoosh's pool, its sorted runs on disk and their merge."""

    def __init__(self, ix: Any, vocabulary: Sequence[str], **kwargs: Any) -> None:
        super().__init__(ix, **kwargs)
        self.pool = _PoolWithoutWords(
            self._tempstorage, self.newsegment, limitmb=kwargs.get("limitmb", LIMITMB)
        )
        self._stems: list[str] = []
        folder = getattr(self.storage, "folder", None)
        self._runs = TermRuns(folder, self._ranks(vocabulary))
        self._length_bytes = bytearray()

    def _ranks(self, vocabulary: Sequence[str]) -> np.ndarray:
        """Each term id's rank in the sorted order of the stems (kept in ``_stems``)."""
        order = sorted(range(len(vocabulary)), key=vocabulary.__getitem__)
        ranks = np.empty(len(vocabulary), dtype=np.int64)
        ranks[order] = np.arange(len(vocabulary))
        self._stems = [vocabulary[i] for i in order]
        return ranks

    def grow_vocabulary(self, vocabulary: Sequence[str]) -> None:
        """Use *vocabulary*, the one given to the writer with more term ids after it (the
        stems stored since it was read)."""
        self._runs.ranks = self._ranks(vocabulary)

    def add_batch(self, batch: DocBatch) -> None:
        n = len(batch)
        if not n:
            return
        sizes = np.asarray(batch.sizes, dtype=np.int64)
        terms = np.asarray(batch.terms, dtype=np.int64)
        weights = np.asarray(batch.weights, dtype=np.float64)
        of_doc = np.repeat(np.arange(n, dtype=np.int64), sizes)
        keep = weights > 0
        if not keep.all():
            terms, weights, of_doc = terms[keep], weights[keep], of_doc[keep]
        # The field length of a document is the sum of its postings' frequencies.
        freqs = np.maximum(np.rint(weights), 1)
        lengths = np.bincount(of_doc, weights=freqs, minlength=n).astype(np.int64).tolist()
        base = self.docnum
        for docid, url, host, length in zip(
            batch.docids, batch.urls, batch.hosts, lengths, strict=True
        ):
            fields: dict[str, Any] = {"docid": str(docid), "url": url, "host": host}
            if length:
                # One posting whose frequency is the document's length: what Whoosh
                # records of the field here (its postings are written at the flush).
                fields[WORDS_FIELD] = {"": (length, 0.0)}
            self.add_document(**fields)
            self._length_bytes.append(length_to_byte(length) if length else 0)
        self._runs.add(terms, of_doc + base, weights)

    def _flush_segment(self) -> None:
        self.perdocwriter.close()
        pdr = self.per_document_reader()
        try:
            self.fieldwriter.add_postings(self.schema, pdr, self.pool.iter_postings())
            self._write_words()
            self.fieldwriter.close()
        finally:
            pdr.close()
            self._runs.close()

    def _write_words(self) -> None:
        writer = self.fieldwriter
        lengths = _BYTE_LENGTHS[np.frombuffer(bytes(self._length_bytes), dtype=np.uint8)]
        started = False
        for ranks, cuts, docs, weights in self._runs.terms():
            if not started:
                writer.start_field(WORDS_FIELD, self.schema[WORDS_FIELD])
                writer.set_field_lengths(bytes(self._length_bytes))
                started = True
            texts = [self._stems[r].encode("utf-8") for r in ranks]
            writer.add_terms(texts, cuts, docs, weights, lengths[docs])
        if started:
            writer.finish_field()

    def cancel(self) -> None:
        self._runs.close()
        super().cancel()


class RebuildWriter:
    """Adds documents to a full rebuild (:meth:`Index.rebuild`), batch after batch."""

    def __init__(self, writer: _RebuildSegmentWriter) -> None:
        self._w = writer
        self.added = 0

    def add(self, batch: DocBatch) -> None:
        self._w.add_batch(batch)
        self.added += len(batch)

    def grow_vocabulary(self, vocabulary: Sequence[str]) -> None:
        """Batches from now on may use the term ids of *vocabulary*, which is the
        vocabulary given to :meth:`Index.rebuild` with more ids after it (words stored
        meanwhile: the stems of the ids already given must not change)."""
        self._w.grow_vocabulary(vocabulary)


# -- scoring and queries ---------------------------------------------------------------
