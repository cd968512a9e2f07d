"""The analysis of a batch in the worker and its analysis processes (search.analysispool):
every page gets its own analysis, in crawl order, the same as one process gives; a dead
analysis process fails the batch."""

from __future__ import annotations

import copy
import os
import signal
from collections import Counter
from collections.abc import Iterator

import pytest

from search.analysispool import AnalysisError, AnalysisPool, _runs
from search.rows import DocumentRow

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
def pool() -> Iterator[AnalysisPool]:
    pool = AnalysisPool(3, analyze=True, max_words=50_000)
    yield pool
    pool.close()


def test_the_pool_gives_each_page_its_own_analysis_in_crawl_order(pool: AnalysisPool) -> None:
    rows = _batch()
    alone = copy.deepcopy(rows)
    inc: Counter[str] = Counter()
    pool.run(rows, inc)
    AnalysisPool(1, analyze=True, max_words=50_000).run(alone, Counter())

    assert inc["analyze/pool_pages"] >= 4  # two of the three runs went to other processes
    assert inc["analyze/pages"] == 12
    assert inc["analyze/main_content"] == 12
    assert inc["analyze/skipped_noindex"] == 1
    assert [r.url for r in rows] == [r.url for r in alone]
    for row, single in zip(rows, alone, strict=True):
        assert row.values == single.values
        assert row.words == single.words
        assert row.html == single.html
        assert row.links == single.links  # kept, though not shipped
    pages = [r for r in rows if r.values["kind"] == "page" and not r.values.get("noindex")]
    for n, row in enumerate(pages):
        assert row.html is None
        assert _marker(n) in row.values["text"]  # the main content of its own page
        assert row.words is not None and _marker(n) in row.words
        assert "contact" not in row.values["text"].lower()  # the menu is boilerplate
        assert row.words["contact"].count("boilerplate") == 1


def test_runs_are_consecutive_and_balanced() -> None:
    rows = [_page(n) for n in range(10)]
    runs = _runs(rows, 3)
    assert [r for run in runs for r in run] == rows
    assert len(runs) == 3
    assert max(map(len, runs)) - min(map(len, runs)) <= 1
    assert _runs(rows[:1], 3) == [rows[:1]]


def test_a_dead_analysis_process_fails_the_batch(pool: AnalysisPool) -> None:
    pool.run(_batch(), Counter())  # started and working
    pids = pool.pids()
    assert len(pids) == 2 and os.getpid() not in pids
    os.kill(pids[0], signal.SIGKILL)
    with pytest.raises(AnalysisError, match="an analysis process died"):
        for _ in range(3):  # the pool may hand the first runs to the live one
            pool.run(_batch(), Counter())


def test_one_process_starts_no_other() -> None:
    pool = AnalysisPool(1)
    assert pool.executor is None and pool.pids() == []
    rows = _batch()
    inc: Counter[str] = Counter()
    pool.run(rows, inc)
    assert inc["analyze/pages"] == 12 and "analyze/pool_pages" not in inc
