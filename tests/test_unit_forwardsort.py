"""The forward index of an array file sorted in bounded memory (search/forwardsort.py):
sorted runs on disk merged by ranges of documents give the sort of the whole, and the
array file's writer stays within its bytes (search.arrayfile.SORT_BYTES)."""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from search import arrayfile, forwardsort


def _postings(seed: int, n_docs: int, n_terms: int, most: int) -> tuple[np.ndarray, ...]:
    """Postings in term order: each term's first posting (and the end), documents
    (ascending within a term) and weights."""
    rng = np.random.default_rng(seed)
    per_term = rng.integers(1, most + 1, size=n_terms)
    starts = np.concatenate([[0], np.cumsum(per_term)]).astype(np.int64)
    docs = np.concatenate([np.sort(rng.choice(n_docs, k, replace=False)) for k in per_term])
    tfs = rng.random(len(docs), dtype=np.float32)
    return starts, docs.astype(np.uint32), tfs


def _columns(docs: np.ndarray, tfs: np.ndarray) -> tuple[arrayfile._Column, arrayfile._Column]:
    docs_c = arrayfile._Column("I", np.uint32, None, 1 << 62)
    docs_c.buf.frombytes(docs.tobytes())
    tfs_c = arrayfile._Column("f", np.float32, None, 1 << 62)
    tfs_c.buf.frombytes(tfs.tobytes())
    return docs_c, tfs_c


@pytest.mark.parametrize("size", [1, 2, 5, 64, 1000, 10**9])
def test_runs_merged_by_ranges_are_the_sort_of_the_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """Whatever the postings sorted at a time (one: a run a posting, a range a document),
    the forward index is the stable sort of all the postings by document, each column
    padded, and the temporary files are gone."""
    starts, docs, tfs = _postings(5, n_docs=60, n_terms=80, most=40)
    counts = np.bincount(docs, minlength=60)
    fwd_starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    runs: list[int] = []
    write_runs = forwardsort._write_runs

    def spying(*args: Any) -> Any:
        made = write_runs(*args)
        runs.append(len(made))
        return made

    monkeypatch.setattr(forwardsort, "_write_runs", spying)
    docs_c, tfs_c = _columns(docs, tfs)

    def postings(chunk: int) -> Any:
        return zip(docs_c.chunks(chunk), tfs_c.chunks(chunk), strict=True)

    out = io.BytesIO()
    forwardsort.write_forward(out.write, postings, starts, fwd_starts, size, str(tmp_path))
    n = len(docs)
    order = np.argsort(docs, kind="stable")
    term_of = np.repeat(np.arange(len(starts) - 1, dtype=np.uint32), np.diff(starts))
    pad = bytes(-4 * n % 8)
    assert out.getvalue() == term_of[order].tobytes() + pad + tfs[order].tobytes() + pad
    if size < n:
        assert runs == [-(-n // size)]  # sorted runs on disk, then merged
    else:
        assert runs == []  # sorted in memory
    assert not list(tmp_path.iterdir())


def test_no_postings_no_forward_index() -> None:
    out = io.BytesIO()
    forwardsort.write_forward(
        out.write, lambda chunk: iter(()), np.zeros(1, np.int64), np.zeros(4, np.int64), 8, None
    )
    assert out.getvalue() == b""


def test_array_file_writer_holds_its_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With SORT_BYTES of 1 MB, the array file of 300,000 postings is written holding
    ~1 MB of temporaries at most (sorting them whole, as the writer did by
    BUFFER_POSTINGS, took ~70 bytes a posting: ~20 MB), and is the same file, byte for
    byte, as one sorted whole."""
    starts, docs, tfs = _postings(7, n_docs=2000, n_terms=3000, most=200)
    n_docs = 2000
    assert len(docs) > 250_000
    lengths = bytes([7]) * n_docs
    terms = [f"t{i:05d}".encode() for i in range(len(starts) - 1)]
    docids = np.arange(n_docs, dtype=np.int32)

    def write(path: Path, buffer: int | None) -> float:
        docs_c, tfs_c = _columns(docs, tfs)
        with open(path, "wb") as f:
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                arrayfile.write_arrays(
                    f, terms, starts.tobytes(), docs_c, tfs_c, lengths, docids, buffer
                )
                peak = tracemalloc.get_traced_memory()[1] - before
            finally:
                tracemalloc.stop()
        return peak / 2**20

    monkeypatch.setattr(arrayfile, "SORT_BYTES", 1 << 20)
    bounded = write(tmp_path / "bounded.wpa", None)
    whole = write(tmp_path / "whole.wpa", 10**9)
    assert (tmp_path / "bounded.wpa").read_bytes() == (tmp_path / "whole.wpa").read_bytes()
    assert whole > 10
    assert bounded < 2.5, bounded


def test_columns_spilled_at_different_points_are_read_in_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The array writer's columns hold COLUMN_BYTES each in memory: the documents (4
    bytes a posting) and the counts per section (12) spill at different postings, yet
    are read posting for posting in step, and the array file is the one of postings held
    whole."""
    monkeypatch.setattr(arrayfile, "COLUMN_BYTES", 40)
    starts, docs, tfs = _postings(9, n_docs=30, n_terms=40, most=20)
    rng = np.random.default_rng(2)
    sections = rng.integers(0, 9, size=(len(docs), arrayfile.N_SECTIONS)).astype(np.float16)
    folder = str(tmp_path)
    docs_c = arrayfile._Column("I", np.uint32, folder, 1 << 62)
    tfs_c = arrayfile._Column("f", np.float32, folder, 1 << 62)
    sections_c = arrayfile._Column("H", arrayfile.SECTION_DTYPE, folder, 1 << 62)
    for lo in range(0, len(docs), 7):
        docs_c.extend(docs[lo : lo + 7])
        tfs_c.extend(tfs[lo : lo + 7])
        sections_c.extend(sections[lo : lo + 7].ravel())
    assert docs_c.spilled != sections_c.spilled // arrayfile.N_SECTIONS
    got = list(zip(docs_c.chunks(11), sections_c.chunks(11 * arrayfile.N_SECTIONS), strict=True))
    assert np.concatenate([d for d, _ in got]).tolist() == docs.tolist()
    assert all(len(s) == len(d) * arrayfile.N_SECTIONS for d, s in got)
    assert np.concatenate([s for _, s in got]).tolist() == sections.ravel().tolist()
    terms = [f"t{i:03d}".encode() for i in range(len(starts) - 1)]
    lengths = bytes([3]) * 30
    out = tmp_path / "spilled.wpa"
    with open(out, "wb") as f:
        arrayfile.write_arrays(
            f, terms, starts.tobytes(), docs_c, tfs_c, lengths, None, 5, sections_c
        )
    for c in (docs_c, tfs_c, sections_c):
        c.close()
    whole = arrayfile.encode_arrays(terms, starts.tobytes(), docs, tfs, lengths, sections=sections)
    assert out.read_bytes() == whole
