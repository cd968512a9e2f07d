"""The Whoosh adapter: schema, one writer, searcher.

Everything that knows Whoosh lives here, behind :class:`Index` and :class:`IndexWriter`,
and in :mod:`search.indexquery` (the weighting model and the queries of a parsed query), so
the rest of the project could move to another engine; the schema is
:mod:`search.indexschema`'s.  Documents come as :class:`search.doccolumns.IndexDoc` (or
:class:`search.doccolumns.DocColumns`), which know nothing of Whoosh.

Documents arrive already analyzed: the crawler has counted every stem per section, so the
index does not tokenize again.  The sections are merged into one field, ``words``, as BM25F
merges them (see :mod:`search.ranking`): a stem's posting carries its weighted count
``Σ_f w_f · count_f`` as its weight (the term frequency of the scorer) and, rounded, as its
``freq``, so that the field length Whoosh keeps is the page's weighted length.  Each page's
term vector, for query expansion, is kept by the array postings (:mod:`search.arrayfile`,
written by the same writer), which the product ranks on.

Both writers write the ``words`` postings from arrays (:mod:`search.arraywriter`): a full
rebuild (:meth:`Index.rebuild`) takes documents as arrays (:class:`DocBatch`, its writer is
:mod:`search.indexrebuild`); an incremental commit (:meth:`Index.writer`) gathers the
documents it is given into arrays, and writes the segments it merges from their array
files (:mod:`search.indexwriter`).  Their files are those of Whoosh's own writer fed the
same documents one by one, and of Whoosh's own merge, byte for byte.  The merge policy of
every incremental commit is :mod:`search.mergepolicy`'s.

The index records its format, :data:`FORMAT`, in a file of its folder (:data:`FORMAT_FILE`),
written when the index is created and by every full rebuild.  An index of another format
(or one without it: written before it was recorded) is refused with one line saying to run
``python -m search reindex``: the database is the record, a rebuild loses nothing.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import struct
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from whoosh import index as whoosh_index
from whoosh.filedb.filestore import FileStorage
from whoosh.index import LockError
from whoosh.writing import CLEAR, SegmentWriter

from search.analysis import SECTIONS
from search.arraycodec import ArrayCodec
from search.arrayfile import N_SECTIONS
from search.budgets import LIMITMB
from search.doccolumns import DocColumns, IndexDoc
from search.indexrebuild import DocBatch, RebuildWriter, _RebuildSegmentWriter
from search.indexschema import WORDS_FIELD, PreAnalyzed, make_schema, postings
from search.indexwriter import IncrementalSegmentWriter
from search.mergepolicy import MAX_MERGE_DOCS, MERGE_FACTOR, merge_policy
from search.ranking import SECTION_B

__all__ = [
    "FORMAT",
    "INDEX_NAME",
    "LIMITMB",
    "MAX_MERGE_DOCS",
    "MERGE_FACTOR",
    "REINDEX",
    "WORDS_FIELD",
    "DocBatch",
    "Index",
    "IndexDamaged",
    "IndexDoc",
    "IndexMissing",
    "IndexOutdated",
    "IndexUnavailable",
    "IndexWriter",
    "PreAnalyzed",
    "RebuildWriter",
    "SearchIndexError",
    "make_schema",
    "merge_policy",
    "postings",
]

logger = logging.getLogger(__name__)

# The array postings keep one weighted count per section, in SECTIONS order.
assert len(SECTIONS) == N_SECTIONS
assert tuple(SECTION_B) == SECTIONS

INDEX_NAME = "spidersite"
#: The name of each generation's table of contents of the index (Whoosh's ``TOC``).
_TOC_NAME = re.compile(rf"_{INDEX_NAME}_(\d+)\.toc\Z")

#: The index format: raise it when what an index holds changes (schema, codec, array
#: file), so that an index of another format is refused until it is rebuilt.  2: the
#: ``words`` field without Whoosh term vectors, array postings in every segment.  3: each
#: posting's weighted count per section (its Whoosh value and the array postings), each
#: document's weighted length per section, for per-field BM25F.  4: the array postings'
#: counts per section kept by section (the body's of every posting, the others' of the
#: postings that have them).
FORMAT = 4
#: The file of the index folder that records its format (a name Whoosh's own clean-up of
#: unused files leaves alone).
FORMAT_FILE = "spidersite-format.json"
REINDEX = "python -m search reindex"
#: The temporary table of contents Whoosh writes, then renames, at the end of a commit.
_TEMP_TOC = re.compile(rf"^_{INDEX_NAME}_[0-9]+\.toc\..+$")


#: Whether the writer reads the segments it merges through ``mmap``: off, so that their
#: pages are read into small buffers instead of being mapped (and counted) whole in the
#: indexer's resident memory while a merge reads them.
WRITER_MMAP = False


class SearchIndexError(Exception):
    """The index cannot be used as asked (the message is one line meant for users)."""


class IndexMissing(SearchIndexError):
    """There is no index yet."""


class IndexOutdated(SearchIndexError):
    """The index was written in another format (:data:`FORMAT`): rebuild it."""


class IndexUnavailable(SearchIndexError):
    """Another process is writing the index."""


class IndexDamaged(SearchIndexError):
    """A file of the index is missing or cannot be read (deleted, cut short, garbled):
    rebuild it."""


#: What reading the files of a damaged index raises: a missing or unreadable file
#: (OSError), one cut short (EOFError, struct.error, a memmap past the end: ValueError),
#: garbled (pickle's errors, zlib.error, a bad offset: IndexError, KeyError).
DAMAGE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    ValueError,
    IndexError,
    KeyError,
    pickle.UnpicklingError,
    struct.error,
    zlib.error,
)


@contextmanager
def reading(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn what reading the files of the index at *path* raises when one is missing,
    cut short or garbled (:data:`DAMAGE_ERRORS`) into :class:`IndexDamaged`, one line
    saying to rebuild it: around opening the index, its readers and its array files."""
    try:
        yield
    except SearchIndexError:
        raise
    except DAMAGE_ERRORS as exc:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise IndexDamaged(
            f"the search index at {path} is damaged ({detail}): run `{REINDEX}` to rebuild "
            f"it from the database"
        ) from exc


class Index:
    """A Whoosh index folder: open or create, write through one writer, search."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def exists(self) -> bool:
        """Whether the folder holds an index: a table of contents of some generation
        (Whoosh's ``exists_in`` without opening it, which reads and unpickles that table,
        its schema and every segment's entry: the web application asks before every
        search)."""
        return self.generation() is not None

    def generation(self) -> int | None:
        """The index's latest generation, by its tables of contents' file names (None: no
        index), without opening it."""
        try:
            names = os.listdir(self.path)
        except OSError:
            return None
        found = [int(m.group(1)) for name in names if (m := _TOC_NAME.match(name))]
        return max(found) if found else None

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
            with reading(self.path):
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
        self,
        limitmb: int = LIMITMB,
        clear: bool = False,
        wait: float = 0.0,
        max_merge_docs: int | None = MAX_MERGE_DOCS,
    ) -> Iterator[IndexWriter]:
        """The one writer: committed on success, cancelled on error.

        With *clear* the index is rewritten whole (a full rebuild); an index of another
        format is then started anew in the current one, while without *clear* it is
        refused (:class:`IndexOutdated`).  *wait* is how many seconds to wait for another
        writer's lock before giving up.  Its commit merges segments by
        :func:`search.mergepolicy.merge_policy`, leaving alone those of more than
        *max_merge_docs* documents (None: no cap).
        """
        ix = self._open_for_writing(clear)
        with self._committed(
            ix,
            IncrementalSegmentWriter,
            limitmb=limitmb,
            timeout=wait,
            delay=0.25,
            mergetype=CLEAR if clear else partial(merge_policy, max_docs=max_merge_docs),
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
            ix,
            _RebuildSegmentWriter,
            vocabulary,
            limitmb=limitmb,
            timeout=wait,
            delay=0.25,
            mergetype=CLEAR,
        ) as w:
            yield RebuildWriter(w)

    def _open_for_writing(self, clear: bool) -> Any:
        if clear and self.exists() and self.format() != FORMAT:
            self._create()
        try:
            ix = self.open(create=True)
        except IndexDamaged:
            if not clear:
                raise
            # A rebuild replaces it whole: its table of contents is started anew.
            ix = self._create()
        if not WRITER_MMAP:
            ix = FileStorage(str(self.path), supports_mmap=False).open_index(INDEX_NAME)
        return ix

    @contextmanager
    def _committed(
        self,
        ix: Any,
        cls: type[SegmentWriter],
        *args: Any,
        mergetype: Any,
        **kwargs: Any,
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
            w.commit(mergetype=mergetype)
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
        ix = self.open()
        with reading(self.path):
            return int(ix.doc_count())

    def docids(self) -> set[int]:
        """Every document id in the index (:meth:`docid_array`, as a set)."""
        return set(self.docid_array().tolist())

    def docid_array(self) -> np.ndarray:
        """Every document id in the index, ascending (``int64``; for consistency checks).

        Read from each segment's array postings file, which holds its documents' ids (4
        bytes a document), its deleted documents left out; the documents a file gives no id
        (a file written before files held them) are read from Whoosh's stored fields, which
        unpickles each one's (:func:`search.arrayreader.segment_docids`)."""
        from search.arrayreader import SegmentArrays, segment_docids

        ix = self.open()
        # Read as files, not mapped: Whoosh copies a mapped compound segment's files into
        # memory as it opens them (search.indexquery.open_searcher).
        ix.storage.supports_mmap = False
        parts: list[np.ndarray] = []
        with reading(self.path), ix.searcher() as s:
            folder = getattr(ix.storage, "folder", None)
            for reader, _ in s.reader().leaf_readers():
                segment = reader.segment() if hasattr(reader, "segment") else None
                arrays = (
                    SegmentArrays.read(Path(folder), segment)
                    if folder is not None and segment is not None
                    else None
                )
                ids = segment_docids(arrays, reader.doc_count_all(), reader.stored_fields)
                if segment is not None and segment.has_deletions():
                    alive = np.ones(len(ids), dtype=bool)
                    dead = np.fromiter(segment.deleted_docs(), dtype=np.int64)
                    alive[dead[dead < len(ids)]] = False
                    ids = ids[alive]
                parts.append(ids[ids >= 0])
        return np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)


class IndexWriter:
    """Adds, replaces and deletes documents through one writer: the index's own
    (:class:`search.indexwriter.IncrementalSegmentWriter`, which gathers them into arrays),
    or any Whoosh writer of the index's schema (one document at a time, through its
    posting pool)."""

    def __init__(self, writer: SegmentWriter) -> None:
        self._w = writer
        self._add_doc = getattr(writer, "add_doc", None)
        self.added = 0

    def add_columns(self, columns: DocColumns, update: bool = True) -> None:
        """Add the documents *columns*, as :meth:`add` adds each one."""
        if self._add_doc is None:
            for doc in columns.docs():
                self.add(doc, update)
            return
        self.added += len(columns)
        self._w.add_columns(columns, update)

    def add(self, doc: IndexDoc, update: bool = True) -> None:
        """Add *doc*; with *update*, it replaces the document of its id in the index (not
        one added by this writer: a document added twice in one commit is there twice)."""
        self.added += 1
        if self._add_doc is not None:
            self._add_doc(doc, update)
            return
        values: dict[str, Any] = {"docid": str(doc.docid), "url": doc.url, "host": doc.host}
        words = postings(doc.weights, doc.sections)
        if words:
            values[WORDS_FIELD] = words
        if update:
            self._w.update_document(**values)
        else:
            self._w.add_document(**values)

    def delete(self, docid: int) -> None:
        self._w.delete_by_term("docid", str(docid))
