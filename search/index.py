"""The Whoosh adapter: schema, one writer, searcher.

Everything that knows Whoosh lives here, behind :class:`IndexDoc`, :class:`Index` and
:class:`IndexWriter`, so the rest of the project could move to another engine.

Documents arrive already analyzed: the crawler has counted every stem per section, so the
index does not tokenize again.  The sections are merged into one field, ``words``, as BM25F
merges them (see :mod:`search.ranking`): a stem's posting carries its weighted count
``Σ_f w_f · count_f`` as its weight (the term frequency of the scorer) and, rounded, as its
``freq``, so that the field length Whoosh keeps is the page's weighted length.  Each page's
term vector, for query expansion, is kept by the array postings (:mod:`search.arrays`,
written by the same writer); indexes written before them keep Whoosh term vectors instead.
"""

from __future__ import annotations

import logging
import math
import shutil
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whoosh import index as whoosh_index
from whoosh.fields import ID, STORED, FieldType, Schema
from whoosh.formats import Frequency
from whoosh.index import LockError
from whoosh.system import pack_uint
from whoosh.writing import CLEAR, SegmentWriter

from search.analysis import SECTIONS, WordRecord
from search.arrays import FIELD as _ARRAY_FIELD
from search.arrays import ArrayCodec

logger = logging.getLogger(__name__)

#: Index field of each analyzer section (``url`` is taken by the stored URL).
FIELD_OF_SECTION: dict[str, str] = {
    "body": "body",
    "title": "title",
    "url": "urlwords",
    "desc": "desc",
    "keywords": "keywords",
}
TEXT_FIELDS: tuple[str, ...] = tuple(FIELD_OF_SECTION[s] for s in SECTIONS)

#: The one scored field: every section's stems, weighted.
WORDS_FIELD = _ARRAY_FIELD

INDEX_NAME = "spidersite"


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
    merged = {id(s) for s in chosen}
    return [s for s in segments if id(s) not in merged]


class IndexError_(Exception):
    """The index cannot be opened or written (the message is meant for users)."""


class IndexMissing(IndexError_):
    pass


def _pre_analyzed(value: Any) -> dict[str, tuple[int, float]]:
    if isinstance(value, str):  # a plain string: one term per whitespace-separated word
        counts: dict[str, int] = {}
        for word in value.split():
            counts[word] = counts.get(word, 0) + 1
        return {w: (c, float(c)) for w, c in counts.items()}
    return dict(value)


class _VectorFormat(Frequency):
    """Term vectors of a :class:`PreAnalyzed` field (freq and weight of each stem).  New
    indexes do not write them (the array postings hold the same by document); the class
    stays for the schema of indexes written before, which Whoosh unpickles."""

    def word_values(self, value: Any, analyzer: Any, **kwargs: Any) -> Any:
        for stem, (count, weight) in sorted(_pre_analyzed(value).items()):
            yield stem, count, weight, pack_uint(count)


class PreAnalyzed(FieldType):
    """A text field fed with ``{stem: (freq, weight)}`` instead of a string."""

    def __init__(self, vector: bool = False) -> None:
        self.format = Frequency()
        self.analyzer = None
        self.scorable = True
        self.stored = False
        self.unique = False
        self.vector = _VectorFormat() if vector else None
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

    def open(self, create: bool = False) -> Any:
        if self.exists():
            return whoosh_index.open_dir(str(self.path), indexname=INDEX_NAME)
        if not create:
            raise IndexMissing(
                f"no search index at {self.path} yet: crawl a site first "
                f"(scrapy crawl site -a seeds=URL) or rebuild it (python -m search reindex)"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        return whoosh_index.create_in(str(self.path), make_schema(), indexname=INDEX_NAME)

    def clear(self) -> None:
        """Remove the index (used by a full rebuild)."""
        if self.path.exists():
            shutil.rmtree(self.path)

    @contextmanager
    def writer(
        self, limitmb: int = 256, clear: bool = False, wait: float = 0.0
    ) -> Iterator[IndexWriter]:
        """The one writer: committed on success, cancelled on error.

        *wait* is how many seconds to wait for another writer's lock before giving up.
        """
        ix = self.open(create=True)
        try:
            w = ix.writer(limitmb=limitmb, timeout=wait, delay=0.25, codec=ArrayCodec())
        except LockError:
            raise IndexError_(
                f"the search index at {self.path} is being written by another process "
                f"(a crawl or a reindex); try again when it has finished"
            ) from None
        if WORDS_FIELD not in w.schema:
            # An index of an older version: a full rebuild moves it to the current schema.
            if not clear:
                w.cancel()
                raise IndexError_(
                    f"the search index at {self.path} was built by an older version: "
                    f"rebuild it with python -m search reindex"
                )
            for name in list(w.schema.names()):
                if name in TEXT_FIELDS:
                    w.remove_field(name)
            w.add_field(WORDS_FIELD, PreAnalyzed())
        elif clear and w.schema[WORDS_FIELD].vector is not None:
            # Whoosh term vectors (before the array postings kept them): a full rebuild
            # drops them; a commit that adds to the index keeps the schema it has.
            w.remove_field(WORDS_FIELD)
            w.add_field(WORDS_FIELD, PreAnalyzed())
        writer = IndexWriter(w)
        try:
            yield writer
        except BaseException:
            w.cancel()
            raise
        else:
            w.commit(mergetype=CLEAR if clear else merge_policy)

    def doc_count(self) -> int:
        if not self.exists():
            return 0
        ix = self.open()
        return int(ix.doc_count())

    def has_arrays(self) -> bool:
        """Whether every segment carries its array postings (:mod:`search.arrays`)."""
        from search.arrays import SegmentArrays

        if not self.exists():
            return False
        ix = self.open()
        with ix.reader() as reader:
            return all(
                SegmentArrays.read(self.path, r.segment()) is not None
                for r, _ in reader.leaf_readers()
            )

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
