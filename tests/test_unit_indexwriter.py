"""The incremental writer (search.indexwriter, search.index.Index.writer): a commit of new
documents written from arrays, and a merge written from the merged segments' array files,
are Whoosh's own commit and merge, byte for byte, without a ``words`` posting going
through Whoosh's posting-by-posting path; deletions and updates as Whoosh's."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from whoosh.filedb.filestore import FileStorage
from whoosh.reading import SegmentReader

from search import arraycodec, arrayfile, arraywriter, indexwriter, termruns
from search.index import INDEX_NAME, MERGE_FACTOR, WORDS_FIELD, Index, IndexDoc
from search.segmentwords import SegmentWords, fixed_width, fixed_width_of
from tests.test_unit_rebuild import random_docs, segment_files
from tests.whooshwriter import whoosh_writer

VOCABULARY = [f"w{(i * 7919) % 900:03d}" for i in range(900)] + ["été", "日本", "a"]
# Stems longer than a merge's fixed-width array of terms holds (segmentwords.WIDE bytes).
VOCABULARY += ["w" * 40, "日本" * 7, "w" * 33]


class Watch:
    """Whether a words posting went one by one to the codec (fails the test while on),
    and the terms whose words postings were read through a Whoosh matcher."""

    def __init__(self) -> None:
        self.on = False
        self.looked_up: list[bytes] = []


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Watch]:
    seen = Watch()
    add = arraycodec._FieldWriter.add
    postings = SegmentReader.postings

    def add_one(self: Any, docnum: int, *args: Any) -> None:
        assert not (seen.on and self._in_words), "a words posting added one by one"
        add(self, docnum, *args)

    def postings_of(self: Any, fieldname: str, text: Any, *args: Any, **kwargs: Any) -> Any:
        if seen.on and fieldname == WORDS_FIELD:
            seen.looked_up.append(text)
        return postings(self, fieldname, text, *args, **kwargs)

    monkeypatch.setattr(arraycodec._FieldWriter, "add", add_one)
    monkeypatch.setattr(SegmentReader, "postings", postings_of)
    yield seen


def renumbered(docs: list[IndexDoc], start: int) -> list[IndexDoc]:
    for n, doc in enumerate(docs):
        doc.docid = start + n
        doc.url = f"http://h{n % 5}.example/p{start + n}"
    return docs


def write(index: Index, docs: list[IndexDoc], ours: bool, deletes: tuple[int, ...] = ()) -> None:
    writer = index.writer() if ours else whoosh_writer(index)
    with writer as w:
        for docid in deletes:
            w.delete(docid)
        for doc in docs:
            w.add(doc)


@pytest.mark.parametrize(("buffer", "pending"), [(None, 256), (2000, 7)])
def test_a_commit_writes_what_whoosh_writes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    watch: Watch,
    buffer: int | None,
    pending: int,
) -> None:
    if buffer:
        monkeypatch.setattr(arrayfile, "BUFFER_POSTINGS", buffer)
    monkeypatch.setattr(indexwriter, "PENDING_DOCS", pending)
    docs = random_docs(300, VOCABULARY, seed=4)
    expected = Index(tmp_path / "whoosh")
    write(expected, docs, ours=False)
    ours = Index(tmp_path / "ours")
    watch.on = True
    write(ours, docs, ours=True)
    watch.on = False
    assert segment_files(ours.path) == segment_files(expected.path)


def segments_to_merge(path: Path, weights: list[float] | None = None) -> Index:
    """An index of MERGE_FACTOR segments of one level, written by Whoosh, with deleted
    documents in each (updated in a later commit, or deleted): the next commit merges
    them all."""
    index = Index(path)
    for k in range(MERGE_FACTOR):
        docs = renumbered(random_docs(40, VOCABULARY, seed=10 + k), 100 * k)
        if k:  # replaces two documents of the first commit, deletes one of the last
            docs += renumbered(random_docs(2, VOCABULARY, seed=20 + k), 2 * k)
        if weights and k == 1:
            docs[3].weights = {f"x{i}": w for i, w in enumerate(weights)}
            docs[3].sections = {f"x{i}": (w, 0, 0, 0, 0, 0) for i, w in enumerate(weights)}
        write(index, docs, ours=False, deletes=(100 * (k - 1) + 5,) if k else ())
    assert len(index.open()._segments()) == MERGE_FACTOR
    return index


#: Weights a float32 rounds to a fraction of exactly .5: their frequency (their exact
#: weight rounded) is not the float32's rounded.
UNSURE = [2.5000000000000004, 2.4999999999999996, 3.5, 1.5, 0.5, 7.25]


def spill_other_fields(monkeypatch: pytest.MonkeyPatch, limit: int) -> list[int]:
    """Make the posting pool of the fields other than ``words`` (``PostingPool``,
    ``INDEX_LIMITMB``) sort its postings into a run on disk past *limit* bytes (of
    Whoosh's count), as a merge of a large segment does; the list returned gets the size
    of each run written."""
    start = arraywriter._PoolWithoutWords.__init__
    save = arraywriter._PoolWithoutWords.save
    runs: list[int] = []

    def small(self: Any, *args: Any, **kwargs: Any) -> None:
        start(self, *args, **kwargs)
        self.limit = limit

    def counted(self: Any) -> None:
        runs.append(len(self.current))
        save(self)

    monkeypatch.setattr(arraywriter._PoolWithoutWords, "__init__", small)
    monkeypatch.setattr(arraywriter._PoolWithoutWords, "save", counted)
    return runs


@pytest.mark.parametrize(
    ("buffer", "weights", "pool"),
    [
        (None, None, None),
        (700, None, None),
        (None, UNSURE, None),
        (40, None, None),
        (40, UNSURE, None),
        (None, None, 2000),
    ],
)
def test_a_merge_writes_what_whoosh_merges(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    watch: Watch,
    buffer: int | None,
    weights: list[float] | None,
    pool: int | None,
) -> None:
    if buffer:
        monkeypatch.setattr(arrayfile, "BUFFER_POSTINGS", buffer)
    runs = spill_other_fields(monkeypatch, pool) if pool else []
    start = segments_to_merge(tmp_path / "start", weights)
    shutil.copytree(start.path, tmp_path / "whoosh")
    shutil.copytree(start.path, tmp_path / "ours")
    # New documents, of which one replaces a document of the segments (an update).
    new = renumbered(random_docs(12, VOCABULARY, seed=30), 1000)
    new[0].docid = 205
    expected, ours = Index(tmp_path / "whoosh"), Index(tmp_path / "ours")
    write(expected, new, ours=False, deletes=(301,))
    watch.on = True
    write(ours, new, ours=True, deletes=(301,))
    watch.on = False
    if pool:
        # The merge's ids and hosts went through several runs on disk.
        assert len([n for n in runs if n]) > 3
    # No words posting read through Whoosh, but those whose frequency the arrays do not
    # tell (weights of 2.5000000000000004 and 3.5 merged as 2.5 and 3.5).
    assert sorted(set(watch.looked_up)) == ([b"x0", b"x1", b"x2", b"x3"] if weights else [])
    got = segment_files(ours.path)  # one segment: the four merged, the new documents
    assert got == segment_files(expected.path)
    assert ours.docids() == expected.docids()
    assert 205 in ours.docids() and 301 not in ours.docids() and 105 not in ours.docids()
    assert ours.doc_count() == expected.doc_count() == len(ours.docids())


def all_segment_files(path: Path) -> list[dict[str, bytes]]:
    """The files of every segment of the index at *path*, in order (ids taken out)."""
    storage = FileStorage(str(path))
    out = []
    for segment in storage.open_index(INDEX_NAME)._segments():
        compound = segment.open_compound_file(storage)
        try:
            out.append(
                {
                    name.replace(segment.segment_id(), "SEG"): compound.open_file(name).read()
                    for name in compound.list()
                }
            )
        finally:
            compound.close()
    return out


def test_commits_and_merges_write_what_whoosh_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits of documents with and without words, updates of documents of earlier
    commits and of the same commit, deletions, merges of several levels."""
    monkeypatch.setattr(indexwriter, "PENDING_DOCS", 3)
    ours, expected = Index(tmp_path / "ours"), Index(tmp_path / "whoosh")
    for k in range(12):
        docs = []
        for n in range(5):
            docid = 10 * k + n
            weights = {} if n == 3 else {"owl": n + 1.0, f"w{docid}": 2.0}
            docs.append(IndexDoc(docid, f"http://h/{docid}", "h", weights))
        if k:
            docs.append(IndexDoc(10 * (k - 1), "http://h/again", "h", {"kestrel": 2.0}))
            docs.append(IndexDoc(10 * k + 1, "http://h/twice", "h", {"kestrel": 3.0}))
        for index, mine in ((ours, True), (expected, False)):
            write(index, docs, ours=mine, deletes=(10 * k - 8,) if k else ())
        assert all_segment_files(ours.path) == all_segment_files(expected.path), k
    assert len(all_segment_files(ours.path)) < 12  # merged
    assert ours.docids() == expected.docids()
    with ours.open().searcher() as s:
        kestrels = {
            int(s.stored_fields(d)["docid"]) for d in s.postings(WORDS_FIELD, "kestrel").all_ids()
        }
    assert {10 * k for k in range(11)} <= kestrels


@pytest.mark.parametrize("size", [1, 3, 7, 10**6])
def test_a_merged_segment_is_read_in_chunks_of_at_most_its_size(tmp_path: Path, size: int) -> None:
    """A merge reads a segment's words postings at most *size* at a time, a term with
    more in pieces (in order), and the chunks are the whole segment's postings."""
    index = Index(tmp_path / "ix")
    docs = [IndexDoc(n, f"http://h/{n}", "h", {"a": 1.0 + n, f"w{n % 3}": 2.0}) for n in range(9)]
    write(index, docs, ours=True)
    (segment,) = index.open()._segments()
    with SegmentWords(index.path, segment) as words:
        terms, chunks = words.terms, list(words.chunks(size))
        whole = next(words.chunks(10**6))
    assert terms.tolist() == [b"a", b"w0", b"w1", b"w2"]
    assert all(len(c.docs) <= size for c in chunks)
    assert sum(len(c.docs) for c in chunks) == len(whole.docs) == 18
    got = [
        (terms[c.first + t], int(d), float(w))
        for c in chunks
        for t in range(len(c.starts) - 1)
        for d, w in zip(
            c.docs[c.starts[t] : c.starts[t + 1]], c.tfs[c.starts[t] : c.starts[t + 1]], strict=True
        )
    ]
    expected = [
        (terms[t], int(d), float(w))
        for t in range(len(terms))
        for d, w in zip(
            whole.docs[whole.starts[t] : whole.starts[t + 1]],
            whole.tfs[whole.starts[t] : whole.starts[t + 1]],
            strict=True,
        )
    ]
    assert got == expected


class _Segment:
    """What the array file's reader asks of a Whoosh segment: its files' names."""

    def make_filename(self, ext: str) -> str:
        return "seg" + ext

    def is_compound(self) -> bool:
        return False


@pytest.mark.parametrize("size", [1, 2, 5, 13, 10**6])
def test_a_merge_reads_each_posting_s_counts_per_section(tmp_path: Path, size: int) -> None:
    """The chunks of a segment's postings carry each posting's weighted counts per
    section as they were written, the body's and the others' (stored apart: every
    posting's body, the others only where a posting has any), whatever the chunks' size."""
    rng = np.random.default_rng(3)
    sizes = rng.integers(0, 7, size=25)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n_post = int(starts[-1])
    docs = np.concatenate([np.sort(rng.choice(10, size=n, replace=False)) for n in sizes])
    sections = np.zeros((n_post, 6))
    sections[:, 0] = rng.integers(1, 4, size=n_post)
    beyond = rng.random(n_post) < 0.4
    sections[beyond, 1:] = rng.integers(0, 3, size=(int(beyond.sum()), 5))
    (tmp_path / "seg.wpa").write_bytes(
        arrayfile.encode_arrays(
            [b"t%02d" % i for i in range(len(sizes))],
            starts.tobytes(),
            docs.astype(np.uint32).tobytes(),
            sections.sum(axis=1).astype(np.float32).tobytes(),
            bytes([5] * 10),
            sections=sections,
        )
    )
    with SegmentWords(tmp_path, _Segment()) as words:
        chunks = list(words.chunks(size))
    assert all(len(c.docs) <= size for c in chunks)
    got = np.concatenate([c.sections for c in chunks]).astype(np.float64)
    assert got.tolist() == sections.tolist()
    assert np.concatenate([c.docs for c in chunks]).tolist() == docs.tolist()


def test_long_posting_lists_written_in_pieces_are_whoosh_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A term of more postings than the writer's window is sorted and written in pieces of
    whole blocks (search.termruns.PIECE_ALIGN postings, at least one of Whoosh's blocks of
    128): commits and a merge whose common terms come in pieces still write Whoosh's
    files."""
    monkeypatch.setattr(arrayfile, "BUFFER_POSTINGS", 40)
    monkeypatch.setattr(termruns, "PIECE_ALIGN", 128)
    ours, expected = Index(tmp_path / "ours"), Index(tmp_path / "whoosh")
    for k in range(MERGE_FACTOR + 1):
        docs = renumbered(random_docs(300, VOCABULARY[:40], seed=50 + k), 1000 * k)
        for doc in docs:
            doc.weights["owl"] = 1.0 + doc.docid % 3
        for index, mine in ((ours, True), (expected, False)):
            write(index, docs, ours=mine, deletes=(1000 * (k - 1) + 7,) if k else ())
        assert all_segment_files(ours.path) == all_segment_files(expected.path), k
    assert len(all_segment_files(ours.path)) == 1  # the last commit merged them all
    with ours.open().searcher() as s:
        assert len(list(s.postings(WORDS_FIELD, "owl").all_ids())) == 5 * 300 - 4


def test_terms_as_one_fixed_width_array_read_back_as_their_bytes() -> None:
    long = "\u641c\u7d22" * 6  # 36 bytes: kept apart
    terms = [b"", b"a", "caf\u00e9".encode(), long.encode(), b"z" * 32, b"ab", b"y" * 64]
    got, apart = fixed_width_of(terms)
    assert got.dtype == np.dtype("S32")
    assert apart == {3: long.encode(), 6: b"y" * 64}
    assert [apart.get(i, t) for i, t in enumerate(got.tolist())] == terms
    assert got[3] == got[6] == b""
    empty, none = fixed_width(np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64))
    assert empty.tolist() == [] and none == {}


def test_the_merge_vocabulary_gives_ids_in_the_order_terms_come_and_ranks_in_byte_order() -> None:
    """Ids are given as terms come (the new documents' dict first), ranks follow the
    terms' bytes, the long terms kept apart among them."""
    long_a, long_b = "w" * 40, "\u641c" * 20  # 40 and 60 bytes
    stems = {"owl": 0, "\u641c\u7d22": 1, long_a: 2, "kestrel": 3}
    vocabulary = indexwriter.Vocabulary.of(stems)
    assert vocabulary.terms.tolist() == [b"kestrel", b"owl", "\u641c\u7d22".encode()]
    assert vocabulary.long == {long_a.encode(): 2}
    first = [b"kestrel", b"a", b"owl", long_b.encode(), b"a", b"w" * 32, long_a.encode()]
    assert vocabulary.ids_of(*fixed_width_of(first)).tolist() == [3, 5, 0, 4, 5, 6, 2]
    # Terms seen before, shorter after longer: the same ids; an empty batch.
    assert vocabulary.ids_of(*fixed_width_of([b"w" * 32, b"b", long_b.encode()])).tolist() == [
        6,
        7,
        4,
    ]
    assert vocabulary.ids_of(*fixed_width_of([])).tolist() == []
    ids = {
        **{s.encode(): i for s, i in stems.items()},
        b"a": 5,
        long_b.encode(): 4,
        b"w" * 32: 6,
        b"b": 7,
    }
    assert len(vocabulary) == len(ids) == 8
    in_order = sorted(ids)
    ranks = vocabulary.ranks()
    assert [in_order[ranks[i]] for i in ids.values()] == list(ids)
    assert vocabulary.texts(list(range(len(ids)))) == in_order
    assert vocabulary.texts([ranks[2], ranks[0], ranks[4]]) == [
        long_a.encode(),
        b"owl",
        long_b.encode(),
    ]


def test_the_merge_vocabulary_ranks_any_terms_as_sorting_their_bytes() -> None:
    rng = np.random.default_rng(5)
    alphabet = [b"a", b"b", b"\xc3\xa9"]
    vocabulary = indexwriter.Vocabulary()
    seen: dict[bytes, int] = {}
    for _ in range(6):
        batch = [
            b"".join(rng.choice(alphabet, size=int(rng.integers(1, 30))).tolist())
            for _ in range(200)
        ]
        ids = vocabulary.ids_of(*fixed_width_of(batch)).tolist()
        for term, tid in zip(batch, ids, strict=True):
            assert seen.setdefault(term, tid) == tid
    assert vocabulary.long and len(vocabulary) == len(seen)
    in_order = sorted(seen)
    ranks = vocabulary.ranks()
    assert sorted(ranks.tolist()) == list(range(len(seen)))
    assert all(in_order[ranks[tid]] == term for term, tid in seen.items())
    assert vocabulary.texts(list(range(len(seen)))) == in_order
