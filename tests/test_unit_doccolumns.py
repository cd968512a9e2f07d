"""Documents for the index in columns (search.doccolumns): made from the analyzer's
records they hold what IndexDoc.from_records holds, float for float; they pickle small;
a commit of them writes what Whoosh writes of the same documents one by one."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import numpy as np

from search.analysis import SECTIONS, PackedWords, WordRecord, pack_records, unpack_records
from search.doccolumns import DocColumns
from search.index import Index, IndexDoc
from tests.test_unit_rebuild import random_docs, segment_files
from tests.whooshwriter import whoosh_writer

VOCABULARY = [f"w{(i * 7919) % 900:03d}" for i in range(900)] + ["été", "日本"]
#: A server's section weights (the rest: the defaults).
SERVER = {"title": 3.0, "boilerplate": 0.3}


def records(rng: random.Random, n: int) -> list[WordRecord]:
    out = []
    for stem in rng.sample(VOCABULARY, n):
        counts = [rng.choice([0, 0, 1, 2, 3, 7]) for _ in SECTIONS]
        out.append(WordRecord(stem, stem.upper(), counts, rng.random() * 9))
    return out


def pages(seed: int = 1) -> list[tuple[int, str, str, list[WordRecord], dict[str, float] | None]]:
    rng = random.Random(seed)
    sizes = [0, 5, 40, 300, 1, 12]
    return [
        (10 + d, f"http://h{d % 2}.example/{d}", f"h{d % 2}.example", records(rng, k), w)
        for d, (k, w) in enumerate(zip(sizes, [None, SERVER] * 3, strict=True))
    ]


def assert_same(got: DocColumns, expected: DocColumns) -> None:
    assert (got.docids, got.urls, got.hosts, got.stems) == (
        expected.docids,
        expected.urls,
        expected.hosts,
        expected.stems,
    )
    assert got.sizes.tolist() == expected.sizes.tolist()
    # Bit for bit: the same doubles, not close ones.
    assert got.weights.tobytes() == expected.weights.tobytes()
    assert got.weighted_sections().tobytes() == expected.weighted_sections().tobytes()


def test_columns_of_records_hold_what_index_documents_hold() -> None:
    for max_terms in (None, 20):
        given = pages()
        columns = DocColumns.of_records(given, max_terms)
        docs = [IndexDoc.from_records(*page[:4], max_terms, page[4]) for page in given]
        assert_same(columns, DocColumns.of_docs(docs))
        assert columns.sizes.tolist() == [
            0,
            5,
            20 if max_terms else 40,
            20 if max_terms else 300,
            1,
            12,
        ]
        # And back, one document at a time.
        assert [(d.docid, d.weights, d.sections) for d in columns.docs()] == [
            (d.docid, d.weights, d.sections) for d in docs
        ]


def test_records_in_columns_make_the_same_columns() -> None:
    """A row's records as they come from another process (PackedWords, read as columns)
    give the index the same columns as the records themselves, cut at *max_terms* or not."""
    for max_terms in (None, 20):
        given = pages()
        packed = [
            (d, u, h, unpack_records(pack_records({r.stem: r for r in recs})), w)
            for d, u, h, recs, w in given
        ]
        assert all(isinstance(p[3], PackedWords) for p in packed if p[3] is not None)
        assert_same(
            DocColumns.of_records(packed, max_terms), DocColumns.of_records(given, max_terms)
        )


def test_columns_pickle_as_arrays_and_smaller_than_index_documents() -> None:
    given = pages()
    columns = DocColumns.of_records(given)
    message = pickle.dumps(columns, protocol=pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(message)
    assert_same(back, columns)
    assert back.weighted_sections().shape == (sum(len(p[3]) for p in given), len(SECTIONS))
    docs = [IndexDoc.from_records(*page[:4], None, page[4]) for page in given]
    assert len(message) < 0.6 * len(pickle.dumps(docs, protocol=pickle.HIGHEST_PROTOCOL))


def test_an_empty_batch_of_columns() -> None:
    columns = DocColumns.of_records([])
    assert len(columns) == 0 and columns.weighted_sections().shape == (0, len(SECTIONS))
    assert_same(pickle.loads(pickle.dumps(columns)), columns)


def test_a_commit_of_columns_writes_what_whoosh_writes(tmp_path: Path) -> None:
    docs = random_docs(200, VOCABULARY, seed=7)
    expected = Index(tmp_path / "whoosh")
    with whoosh_writer(expected) as w:
        for doc in docs:
            w.add(doc)
    ours = Index(tmp_path / "ours")
    with ours.writer() as w:
        # Some one by one, then columns, then one by one: in the order given.
        for doc in docs[:7]:
            w.add(doc)
        w.add_columns(DocColumns.of_docs(docs[7:150]))
        w.add_columns(pickle.loads(pickle.dumps(DocColumns.of_docs(docs[150:190]))))
        for doc in docs[190:]:
            w.add(doc)
        assert w.added == len(docs)
    assert segment_files(ours.path) == segment_files(expected.path)


def test_columns_given_to_a_plain_whoosh_writer_go_one_by_one(tmp_path: Path) -> None:
    docs = random_docs(30, VOCABULARY, seed=8)
    expected, ours = Index(tmp_path / "a"), Index(tmp_path / "b")
    with whoosh_writer(expected) as w:
        for doc in docs:
            w.add(doc)
    with whoosh_writer(ours) as w:
        w.add_columns(DocColumns.of_docs(docs))
    assert segment_files(ours.path) == segment_files(expected.path)
    assert np.array_equal(DocColumns.of_docs(docs).sizes, [len(d.weights) for d in docs])


def test_counts_past_two_bytes_keep_their_value() -> None:
    big = [WordRecord("many", "many", [70_000, 0, 0, 0, 0, 1], 70_000.2)]
    columns = pickle.loads(pickle.dumps(DocColumns.of_records([(1, "u", "h", big, None)])))
    [doc] = columns.docs()
    assert doc.sections["many"][0] == 70_000.0 and doc.weights["many"] == 70_000.2
