"""The analysis of the batches in analysis processes ahead of the worker
(search.analysispool): every page gets its own analysis, the same as the worker's own, and
the worker takes the batches in crawl order; a page whose analysis raises, or a dead
analysis process, fails its batch."""

from __future__ import annotations

import copy
import os
import pickle
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from search.analysispool import (
    AnalysisError,
    Analyzed,
    AnalyzedBatches,
    analyze_rows,
    batch_path,
)
from search.rows import DocumentRow
from search.worker import AnalysisProcesses

WEIGHTS = {"body": 1.0, "title": 4.0, "url": 2.0, "desc": 2.0, "keywords": 2.0}
MENU = "Home Products Support About Contact"


def _marker(n: int) -> str:
    return "mark" + "".join("abcdefghij"[int(d)] for d in str(n)) + "zz"


def _page(n: int) -> DocumentRow:
    body = (
        f"This article is about the {_marker(n)} of page {n}. It has a few sentences of "
        "prose, long enough for the extractor to keep it as the main content of the page, "
        "and they say nothing else of interest. " * 3
    )
    html = (
        f"<html><head><title>Page {n}</title></head><body>"
        f"<nav><ul>{''.join(f'<li><a href=/{w}>{w}</a></li>' for w in MENU.split())}</ul></nav>"
        f"<main><article><h1>Page {n}</h1><p>{body}</p><p>{body}</p></article></main>"
        "<footer>Copyright the zoo</footer></body></html>"
    )
    text = f"{MENU} Page {n} {body} {body} Copyright the zoo"
    return DocumentRow(
        url=f"http://example.org/p{n}.html",
        server="http://example.org/",
        values={"kind": "page", "title": f"Page {n}", "text": text, "language": "en"},
        links=[(f"http://example.org/p{n + 1}.html", "next", False)],
        weights=dict(WEIGHTS),
        html=html.encode(),
    )


def _batch() -> list[DocumentRow]:
    rows = [_page(n) for n in range(12)]
    rows.insert(3, DocumentRow("http://example.org/f.pdf", None, {"kind": "file", "text": "x"}))
    noindex = _page(99)
    noindex.values["noindex"] = True
    rows.insert(7, noindex)
    return rows


@pytest.fixture
def processes() -> Iterator[AnalysisProcesses]:
    processes = AnalysisProcesses(2, analyze=True, max_words=50_000)
    yield processes
    processes.close()


def test_batches_are_analyzed_in_the_processes_and_taken_in_crawl_order(
    processes: AnalysisProcesses,
) -> None:
    batches = {seq: _batch() for seq in (1, 2, 3)}
    for seq, rows in batches.items():
        processes.submit(seq, copy.deepcopy(rows))
    analyzed = AnalyzedBatches(processes.spool, processes.broken)
    for seq, alone in batches.items():
        rows, inc = analyzed.take(seq)
        analyze_rows(alone, True, 50_000, Counter())
        assert inc["analyze/pool_pages"] == inc["analyze/pages"] == 12
        assert inc["analyze/main_content"] == 12
        assert inc["analyze/skipped_noindex"] == 1
        assert [r.url for r in rows] == [r.url for r in alone]
        for row, single in zip(rows, alone, strict=True):
            assert row.values == single.values
            assert row.words == single.words
            assert row.links == single.links
            assert row.html is None
        pages = [r for r in rows if r.values["kind"] == "page" and not r.values.get("noindex")]
        for n, row in enumerate(pages):
            assert _marker(n) in row.values["text"]  # the main content of its own page
            assert row.words is not None and _marker(n) in row.words
            assert "contact" not in row.values["text"].lower()  # the menu is boilerplate
            assert row.words["contact"].count("boilerplate") == 1
    assert list(Path(processes.spool).iterdir()) == []  # each file removed once taken
    assert len(set(processes.pids())) == 2 and os.getpid() not in processes.pids()


def test_batches_are_taken_from_the_spool_whole_and_once(tmp_path: Path) -> None:
    row = _page(1)
    left = {2: Analyzed([row], Counter({"analyze/pages": 1})), 1: Analyzed([], Counter())}
    for seq, analyzed in left.items():
        batch_path(tmp_path, seq).write_bytes(pickle.dumps(analyzed))
    # A batch an analysis process was writing when it was killed: never renamed, never read.
    batch_path(tmp_path, 3).with_suffix(".part").write_bytes(b"cut short")
    analyzed = AnalyzedBatches(tmp_path)
    assert analyzed.take(1) == ([], Counter())
    assert analyzed.take(2) == ([row], Counter({"analyze/pages": 1}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["3.part"]


def test_a_dead_analysis_process_fails_the_batches_not_left_yet(tmp_path: Path) -> None:
    broken = threading.Event()
    batch_path(tmp_path, 1).write_bytes(pickle.dumps(Analyzed([], Counter())))
    analyzed = AnalyzedBatches(tmp_path, broken)
    broken.set()
    assert analyzed.take(1) == ([], Counter())  # left before: stored as ever
    with pytest.raises(AnalysisError, match="an analysis process died"):
        analyzed.take(2)


def test_a_page_whose_analysis_raises_fails_its_batch(processes: AnalysisProcesses) -> None:
    processes.submit(1, [DocumentRow("http://example.org/x", None, {})])  # no kind
    processes.submit(2, _batch())
    analyzed = AnalyzedBatches(processes.spool, processes.broken)
    with pytest.raises(AnalysisError, match="KeyError"):
        analyzed.take(1)
    rows, _ = analyzed.take(2)  # the next batch is analyzed as ever
    assert len(rows) == 14


def test_a_dead_analysis_process_fails_the_batch(processes: AnalysisProcesses) -> None:
    processes.submit(1, _batch())
    analyzed = AnalyzedBatches(processes.spool, processes.broken)
    analyzed.take(1)  # started and working
    os.kill(processes.pids()[0], signal.SIGKILL)
    processes.submit(2, _batch())
    with pytest.raises(AnalysisError, match="an analysis process died"):
        analyzed.take(2)


def test_the_worker_analyzes_alone_without_processes() -> None:
    rows = _batch()
    inc: Counter[str] = Counter()
    analyze_rows(rows, True, 50_000, inc)
    assert inc["analyze/pages"] == 12 and "analyze/pool_pages" not in inc
