"""Unit tests for search.index: IndexDoc.from_records and a small real Whoosh index."""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from whoosh.query import Term

from search import ranking
from search.analysis import SECTIONS, WordRecord, analyze_document
from search.arrayreader import SegmentArrays, segment_docids
from search.arrays import ArrayIndex
from search.index import (
    FORMAT,
    FORMAT_FILE,
    WORDS_FIELD,
    Index,
    IndexDoc,
    IndexMissing,
    IndexOutdated,
    IndexUnavailable,
    PreAnalyzed,
    SearchIndexError,
    make_schema,
    postings,
)

WEIGHTS = {"body": 1.0, "title": 10.0, "url": 3.0, "desc": 0.5, "keywords": 2.0, "boilerplate": 0.2}


def record(
    stem: str,
    body: int = 0,
    title: int = 0,
    url: int = 0,
    desc: int = 0,
    keywords: int = 0,
    boilerplate: int = 0,
) -> WordRecord:
    counts = [body, title, url, desc, keywords, boilerplate]
    weight = sum(c * WEIGHTS[s] for c, s in zip(counts, SECTIONS, strict=True))
    return WordRecord(stem, stem, counts, weight)


def test_the_sections_are_one_field() -> None:
    schema = make_schema()
    # The sections are merged into one scored field (BM25F, see search.ranking).
    assert set(schema.names()) == {"docid", "url", "host", WORDS_FIELD}


def test_from_records_carries_the_merged_weights() -> None:
    records = [record("vacuum", body=2, title=1, url=1), record("tabl", body=1, desc=3)]
    doc = IndexDoc.from_records(5, "http://a.example/v", "a.example", records)
    assert (doc.docid, doc.url, doc.host) == (5, "http://a.example/v", "a.example")
    # Σ count × section weight, as the analyzer computed it: not split again by section.
    assert doc.weights == {"vacuum": 2 * 1 + 1 * 10 + 1 * 3, "tabl": 1 * 1 + 3 * 0.5}


def test_from_records_weighs_each_section_with_the_servers_weights() -> None:
    records = [record("vacuum", body=2, title=1, url=1), record("tabl", body=1, boilerplate=5)]
    doc = IndexDoc.from_records(5, "u", "h", records, section_weights=WEIGHTS)
    # body, title, url, desc, keywords, boilerplate: w_f · count_f
    assert doc.sections == {"vacuum": (2.0, 10.0, 3.0, 0, 0, 0), "tabl": (1.0, 0, 0, 0, 0, 1.0)}
    # Without the server's weights, the defaults (title 4, boilerplate 0.2).
    doc = IndexDoc.from_records(5, "u", "h", records)
    assert doc.sections["vacuum"][1] == 4.0
    assert doc.sections["tabl"][5] == pytest.approx(1.0)


def test_from_records_from_analyze_document() -> None:
    records = analyze_document({"body": "vacuum vacuuming", "title": "Vacuum"}, weights=WEIGHTS)
    doc = IndexDoc.from_records(1, "u", "h", records.values())
    assert doc.weights == {"vacuum": 2 * 1.0 + 1 * 10.0}


def test_postings_round_weights_into_freqs() -> None:
    assert postings({"a": 12.0, "b": 1.5, "c": 0.3, "gone": 0.0}, {"a": (2, 10, 0, 0, 0, 0)}) == {
        "a": (12, 12.0, (2, 10, 0, 0, 0, 0)),
        "b": (2, 1.5, None),  # no counts per section: the weight is the body's
        "c": (1, 0.3, None),  # at least 1
    }


def test_from_records_max_terms_keeps_highest_weights() -> None:
    records = [
        record("low", body=1),  # weight 1
        record("high", title=1),  # weight 10
        record("mid", body=2, desc=2),  # weight 2 + 1 = 3
        record("top", title=2),  # weight 20
    ]
    doc = IndexDoc.from_records(1, "u", "h", records, max_terms=2)
    assert set(doc.weights) == {"top", "high"}
    doc3 = IndexDoc.from_records(1, "u", "h", records, max_terms=3)
    assert set(doc3.weights) == {"top", "high", "mid"}


def test_from_records_max_terms_not_reached_keeps_all() -> None:
    records = [record("a", body=1), record("b", body=1)]
    doc = IndexDoc.from_records(1, "u", "h", records, max_terms=5)
    assert doc.weights == {"a": 1.0, "b": 1.0}


def test_from_records_empty() -> None:
    assert IndexDoc.from_records(1, "u", "h", []).weights == {}


# --- a real index ----------------------------------------------------------------------------


def docs() -> list[IndexDoc]:
    return [
        IndexDoc(
            1,
            "http://a.example/1",
            "a.example",
            {"vacuum": 2.0 + 4.0, "tabl": 1.0},
            {"vacuum": (2.0, 4.0, 0, 0, 0, 0)},  # tabl: no sections, the body's
        ),
        IndexDoc(2, "http://b.example/2", "b.example", {"tabl": 3.0}),
        IndexDoc(3, "http://c.example/3", "c.example", {"vacuum": 4.0}),
    ]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    ix = Index(tmp_path / "ix")
    with ix.writer() as w:
        for doc in docs():
            w.add(doc)
        assert w.added == 3
    yield ix


def search(ix: Index, field: str, stem: str) -> list[int]:
    with ix.open().searcher() as s:
        return sorted(int(hit["docid"]) for hit in s.search(Term(field, stem), limit=None))


def test_missing_index(tmp_path: Path) -> None:
    ix = Index(tmp_path / "nothing")
    assert not ix.exists()
    assert ix.doc_count() == 0
    with pytest.raises(IndexMissing) as info:
        ix.open()
    message = str(info.value)
    assert str(tmp_path / "nothing") in message
    assert "scrapy crawl site" in message
    assert "python -m search reindex" in message
    assert isinstance(info.value, SearchIndexError)
    assert not (tmp_path / "nothing").exists()  # opening does not create it


def test_docids_of_missing_index_raises(tmp_path: Path) -> None:
    with pytest.raises(IndexMissing):
        Index(tmp_path / "nothing").docids()


def test_open_create(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ix = Index(tmp_path / "new" / "ix")
    (tmp_path / "new" / "ix").mkdir(parents=True)
    (tmp_path / "new" / "ix" / "_other_1.toc").write_text("")
    assert not ix.exists()  # a folder without the index's table of contents
    assert ix.generation() is None
    ix.open(create=True)
    assert ix.generation() == 0
    with monkeypatch.context() as m:  # told by the file's name, without reading it
        m.setattr("whoosh.index.open_dir", lambda *a, **k: pytest.fail("opened"))
        m.setattr("whoosh.index.FileIndex", lambda *a, **k: pytest.fail("opened"))
        assert ix.exists()
    assert ix.doc_count() == 0
    assert ix.docids() == set()


def test_add_and_search(index: Index) -> None:
    assert index.exists()
    assert index.generation() == index.open().latest_generation() > 0  # Whoosh's own
    assert index.doc_count() == 3
    assert index.docids() == {1, 2, 3}
    assert search(index, "words", "vacuum") == [1, 3]
    assert search(index, "words", "tabl") == [1, 2]
    assert search(index, "words", "nothing") == []


def test_stored_fields(index: Index) -> None:
    with index.open().searcher() as s:
        hit = s.search(Term("words", "tabl"), limit=None)
        stored = {int(h["docid"]): h["url"] for h in hit}
    assert stored == {1: "http://a.example/1", 2: "http://b.example/2"}


def test_host_field_is_searchable(index: Index) -> None:
    assert search(index, "host", "b.example") == [2]


def test_postings_carry_count_and_weight(index: Index) -> None:
    with index.open().searcher() as s:
        # The weight is Σ count × section weight: doc 1 has vacuum 2×1 + 1×4 = 6, tabl 1.
        assert s.frequency("words", "tabl") == pytest.approx(4.0)  # 1 + 3
        assert s.frequency("words", "vacuum") == pytest.approx(10.0)  # 6 + 4
        assert s.doc_frequency("words", "vacuum") == 2
        # Field lengths are weighted too: doc 1 = round(6) + round(1) = 7 (Whoosh stores
        # lengths in one byte, exact for small ones).
        assert s.doc_field_length(0, "words") == 7
        # Each page's term vector is kept by the array postings, not by Whoosh.
        forward = ArrayIndex.load(s, ranking.K1, ranking.B)
        assert forward is not None
        gids, tfs, _ = forward.vector(0)
        assert dict(zip([forward.texts[g] for g in gids], tfs.tolist(), strict=True)) == {
            "tabl": 1.0,
            "vacuum": 6.0,
        }
        # ... and so is each posting's weighted count per section, and each page's weighted
        # length per section (body, title, url, desc, keywords, boilerplate).
        segment = forward.leaves[0].arrays
        vacuum = forward.ids["vacuum"]
        assert forward.field_tf(0, vacuum)[1].tolist() == [2.0, 4.0, 0, 0, 0, 0]
        assert segment.section_lengths[0].tolist() == [3.0, 4.0, 0, 0, 0, 0]


def test_update_replaces_same_docid(index: Index) -> None:
    with index.writer() as w:
        w.add(IndexDoc(1, "http://a.example/new", "a.example", {"analyz": 1.0}))
    assert index.doc_count() == 3
    assert index.docids() == {1, 2, 3}
    assert search(index, "words", "vacuum") == [3]
    assert search(index, "words", "analyz") == [1]
    with index.open().searcher() as s:
        assert [h["url"] for h in s.search(Term("words", "analyz"))] == ["http://a.example/new"]


def test_add_without_update_duplicates(index: Index) -> None:
    with index.writer() as w:
        w.add(
            IndexDoc(2, "http://b.example/2", "b.example", {"tabl": 1.0}),
            update=False,
        )
    assert index.doc_count() == 4
    assert index.docids() == {1, 2, 3}


def test_delete(index: Index) -> None:
    with index.writer() as w:
        w.delete(2)
    assert index.docids() == {1, 3}
    assert index.doc_count() == 2
    assert search(index, "words", "tabl") == [1]


def test_delete_missing_docid_is_harmless(index: Index) -> None:
    with index.writer() as w:
        w.delete(99)
    assert index.docids() == {1, 2, 3}


def test_writer_error_cancels(index: Index) -> None:
    with pytest.raises(RuntimeError, match="boom"), index.writer() as w:
        w.delete(1)
        w.add(IndexDoc(9, "u", "h", {"x": 1.0}))
        raise RuntimeError("boom")
    assert index.docids() == {1, 2, 3}
    # The lock was released: another writer can start.
    with index.writer() as w:
        w.delete(3)
    assert index.docids() == {1, 2}


def test_clear_writer_replaces_everything(index: Index) -> None:
    # writer(clear=True) is the full rebuild: only what this writer adds survives.
    with index.writer(clear=True) as w:
        w.add(IndexDoc(8, "u", "h", {"x": 1.0}))
    assert index.docids() == {8}
    assert search(index, "words", "x") == [8]
    assert search(index, "words", "tabl") == []


def test_index_records_its_format(index: Index) -> None:
    assert index.format() == FORMAT
    assert (index.path / FORMAT_FILE).exists()
    # Whoosh's clean-up of unused files (at each commit) leaves the record alone.
    for n in range(3):
        with index.writer() as w:
            w.add(IndexDoc(10 + n, "u", "h", {"x": 1.0}))
    assert index.format() == FORMAT


@pytest.mark.parametrize("record", [None, '{"format": 1}', '{"format": 2}', "not json"])
def test_index_of_another_format_is_refused(index: Index, record: str | None) -> None:
    if record is None:
        (index.path / FORMAT_FILE).unlink()  # an index written before formats were recorded
    else:
        (index.path / FORMAT_FILE).write_text(record)
    for call in (index.open, index.docids, index.doc_count):
        with pytest.raises(IndexOutdated) as info:
            call()
        assert "run `python -m search reindex`" in str(info.value)
        assert isinstance(info.value, SearchIndexError)
        assert not isinstance(info.value, IndexMissing)
    with pytest.raises(IndexOutdated), index.writer() as w:  # adding to it is refused
        w.add(IndexDoc(8, "u", "h", {"x": 1.0}))
    with index.writer(clear=True) as w:  # a full rebuild starts it anew
        w.add(IndexDoc(8, "u", "h", {"x": 1.0}))
    assert index.format() == FORMAT
    assert index.docids() == {8}


def test_a_second_writer_is_refused(index: Index) -> None:
    with index.writer(), pytest.raises(IndexUnavailable) as info, index.writer():
        pass
    assert "being written by another process" in str(info.value)
    assert isinstance(info.value, SearchIndexError)


def test_plain_string_field_value() -> None:
    # Whoosh's own callers may give the field a string: one term per word.
    postings_of = {t: (f, w) for t, f, w, _ in PreAnalyzed().index("alpha beta alpha")}
    assert postings_of == {b"alpha": (2, 2.0), b"beta": (1, 1.0)}


def test_many_small_commits_merge(tmp_path: Path) -> None:
    """Segments written by separate commits merge (posting values must be Whoosh's own
    fixed-size encoding, or the merge fails reading them)."""
    index = Index(tmp_path / "merge")
    for commit in range(12):
        with index.writer() as writer:
            for i in range(3):
                n = commit * 3 + i
                records = analyze_document({"body": f"word{n} shared text, more text {n}"})
                writer.add(IndexDoc.from_records(n, f"http://x/{n}", "x", records.values()))
    assert index.docids() == set(range(36))


def test_merge_policy_keeps_few_segments(tmp_path: Path) -> None:
    """Commits of 200 documents: Whoosh's default merge policy keeps one segment per commit
    of this size (up to 15); the log merge policy merges MERGE_FACTOR segments of a level."""
    from search.index import MERGE_FACTOR

    index = Index(tmp_path / "ix")
    for commit in range(12):
        with index.writer() as w:
            for i in range(200):
                docid = commit * 200 + i
                w.add(
                    IndexDoc(docid, f"http://h/{docid}", "h", {"word": 1.0}),
                    update=False,
                )
    ix = index.open()
    sizes = sorted(s.doc_count() for s in ix._segments())
    assert sum(sizes) == 2400 == index.doc_count()
    # At most MERGE_FACTOR segments of a level (the last commit's may complete a level:
    # the next commit merges it).
    levels = [int(math.log(n, MERGE_FACTOR)) for n in sizes]
    assert all(levels.count(level) <= MERGE_FACTOR for level in set(levels)), sizes
    assert len(sizes) <= 6, sizes
    with ix.searcher() as s:
        assert len(s.search(Term(WORDS_FIELD, "word"), limit=None)) == 2400


@pytest.mark.parametrize("cap", [None, 300])
def test_merge_policy_leaves_segments_over_the_cap(tmp_path: Path, cap: int | None) -> None:
    """Lucene's maxMergeDocs: commits of 100 documents, each fifth merging the four before
    it into a segment of 500; the 21st finds four of 500 and, without a cap, merges them
    all into one of 2,100; with a cap of 300 documents they stay.  A segment that
    deletions bring under the cap is merged again."""
    index = Index(tmp_path / "ix")

    def commit(n: int) -> None:
        with index.writer(max_merge_docs=cap) as w:
            for docid in range(100 * n, 100 * n + 100):
                w.add(IndexDoc(docid, f"http://h/{docid}", "h", {"word": 1.0}), update=False)

    def sizes() -> list[int]:
        return sorted(s.doc_count() for s in index.open()._segments())

    for n in range(21):
        commit(n)
    assert index.doc_count() == 2100
    assert sizes() == ([2100] if cap is None else [100, 500, 500, 500, 500])
    if cap is None:
        return
    # Four fifths of the first 500 deleted: 100 live documents, under the cap again.
    with index.writer(max_merge_docs=cap) as w:
        for docid in range(400):
            w.delete(docid)
    for n in range(21, 24):  # the third finds four segments of 100 to merge
        commit(n)
    assert index.doc_count() == 2000
    assert sizes() == [500, 500, 500, 500]


def test_the_writer_reads_segments_without_mmap(index: Index) -> None:
    """A merge reads its segments into small buffers: mapped whole, they would count in
    the indexer's resident memory."""
    with index.writer() as w:
        assert w._w.storage.supports_mmap is False
    with index.open().searcher() as s:  # searchers still map them
        assert s._ix.storage.supports_mmap is True


def test_release_memory_collects_what_a_commit_left_in_cycles() -> None:
    import gc
    import weakref

    from search.process import release_memory

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # type: ignore[attr-defined]
    gone = weakref.ref(a)
    del a, b
    gc.disable()
    try:
        assert gone() is not None
        release_memory()
        assert gone() is None
    finally:
        gc.enable()


def test_docid_array_is_read_from_the_array_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ids of the live documents, ascending, from each segment's array file (not from
    Whoosh's stored fields, which unpickles every document's); deleted and replaced
    documents left out; a segment whose file holds no ids read from its stored fields."""
    ix = Index(tmp_path / "ix")
    for first in (1, 11, 21):  # three commits: several segments
        with ix.writer() as w:
            for docid in range(first, first + 10):
                w.add(
                    IndexDoc.from_records(
                        docid, f"http://a.example/{docid}", "a.example", [record("vacuum", body=1)]
                    )
                )
    with ix.writer() as w:
        w.delete(3)
        w.delete(25)
        w.add(
            IndexDoc.from_records(12, "http://a.example/12b", "a.example", [record("tabl", body=1)])
        )
    expected = sorted(set(range(1, 31)) - {3, 25})

    def unpickling(*args: object, **kwargs: object) -> None:
        raise AssertionError("read from the stored fields")

    with monkeypatch.context() as m:
        m.setattr("whoosh.reading.SegmentReader.stored_fields", unpickling)
        m.setattr("whoosh.reading.SegmentReader.all_stored_fields", unpickling)
        got = ix.docid_array()
    assert got.dtype == np.int64 and got.tolist() == expected
    assert ix.docids() == set(expected)
    # A segment written before the files held ids: its stored fields.
    read = SegmentArrays.read

    def without_ids(folder: Path, segment: object) -> SegmentArrays | None:
        arrays = read(folder, segment)
        return None if arrays is None else dataclasses.replace(arrays, docids=None)

    monkeypatch.setattr(SegmentArrays, "read", staticmethod(without_ids))
    assert ix.docid_array().tolist() == expected


def test_segment_docids_reads_what_the_file_lacks_from_the_stored_fields() -> None:
    """Each document number's id from the array file; a document whose id the file lacks
    (-1, or past its end) or a file without ids from the stored fields, and only those;
    -1 where neither gives one."""
    stored = {0: {"docid": 70}, 1: {"docid": 71}, 2: {"docid": 72}, 3: {"docid": 73}, 4: {}}
    asked: list[int] = []

    def fields(docnum: int) -> dict[str, int]:
        asked.append(docnum)
        return stored[docnum]

    arrays = types.SimpleNamespace(docids=np.array([10, -1, 12], dtype=np.int32))
    got = segment_docids(arrays, 5, fields)  # type: ignore[arg-type]
    assert got.dtype == np.int64 and got.tolist() == [10, 71, 12, 73, -1]
    assert asked == [1, 3, 4]
    asked.clear()
    assert segment_docids(None, 4, fields).tolist() == [70, 71, 72, 73]
    assert asked == [0, 1, 2, 3]
    assert segment_docids(types.SimpleNamespace(docids=None), 0, fields).tolist() == []  # type: ignore[arg-type]
