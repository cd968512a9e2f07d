"""Crashes and consistency: a crawl killed with SIGKILL resumes where it was; the index
and the database agree afterwards (`python -m search check`); exact duplicates are
recorded once."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from search.models import Crawl
from tests.conftest import (
    ROOT,
    CrawlResult,
    Site,
    _env,
    count_documents,
    crawl_command,
    damaged_sqlite,
    run_crawl,
    run_search,
    start_crawl,
    wait_for_documents,
)

N_PAGES = 40


def build_slow_site(site: Site) -> None:
    """A tree of pages, each a little slow, so a crawl can be killed half way."""
    for i in range(N_PAGES):
        children = [f"/p{c}.html" for c in (2 * i + 1, 2 * i + 2) if c < N_PAGES]
        site.page(f"/p{i}.html", f"Page {i}", f"page number{i} marmot", children, delay=0.15)


#: The settings of the slow site's crawls: two requests at a time, small batches.
SLOW_CRAWL = {
    "CONCURRENT_REQUESTS": 2,
    "STORE_BATCH_SIZE": 3,
    "INDEX_BATCH_SIZE": 3,
    "LOG_LEVEL": "INFO",
}


def seeds(site: Site) -> tuple[str, str]:
    """The slow site's crawl arguments."""
    return ("-a", f"seeds={site.url}p0.html")


def crawl_cmd(site: Site, data: Path) -> list[str]:
    return crawl_command(data, *seeds(site), settings=SLOW_CRAWL)


def last_reason(crawl: CrawlResult) -> str:
    """The finish reason recorded of the last crawl."""
    return str(crawl.scalar("SELECT finish_reason FROM crawls ORDER BY id DESC LIMIT 1"))


def crawl_again(site: Site, data: Path) -> CrawlResult:
    """The same crawl command run again to its end (a resume)."""
    return run_crawl(data, *seeds(site), settings=SLOW_CRAWL, timeout=180)


def test_killed_crawl_resumes_and_index_agrees(site: Site, tmp_path: Path) -> None:
    build_slow_site(site)
    data = tmp_path / "data"
    data.mkdir()
    db = data / "spidersite.db"
    db_url = f"sqlite:///{db}"
    proc = subprocess.Popen(
        crawl_cmd(site, data),
        cwd=ROOT,
        env=_env(data, None),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_documents(db_url, 12)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stored_before = count_documents(db_url)
    assert 12 <= stored_before < N_PAGES, "the crawl was killed half way"
    fetched_before = len(site.hits)

    again = crawl_again(site, data)
    assert again.returncode == 0, again.stderr[-2000:]
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        urls = [r.url for r in conn.execute(text("SELECT url FROM documents"))]
        stats = json.loads(
            conn.execute(text("SELECT stats FROM crawls ORDER BY id DESC LIMIT 1")).scalar_one()
        )
        crawls = conn.execute(
            text("SELECT id, finished_at IS NOT NULL, finish_reason, stats FROM crawls ORDER BY id")
        ).all()
    engine.dispose()
    assert sorted(urls) == sorted(f"{site.url}p{i}.html" for i in range(N_PAGES))
    assert len(urls) == len(set(urls))
    assert stats["resume/requests"] > 0
    # The killed crawl's row is closed by the crawl that resumed it: no crawl is left
    # looking as if it were still running.
    (killed, killed_done, killed_reason, killed_stats), (resumed, *resumed_end) = crawls
    assert stats["resume/crawl"] == killed
    assert (killed_done, killed_reason) == (1, "resumed")
    assert json.loads(killed_stats) == {"resumed_by": resumed}
    assert resumed_end[:2] == [1, "finished"]
    # Pages stored before the kill were not fetched again.
    refetched = len(site.hits) - fetched_before
    # + robots.txt, sitemap.xml and in-flight pages
    assert refetched <= N_PAGES - stored_before + 5
    check = run_search("check", "--dry-run", "--json", data_dir=data)
    assert check.returncode == 0, check.stdout + check.stderr
    assert json.loads(check.stdout)["in_index"] == N_PAGES
    found = run_search("number17", "--json", data_dir=data)
    assert [h["url"] for h in json.loads(found.stdout)["hits"]] == [f"{site.url}p17.html"]


#: The settings of :func:`_crawled_then_killed`'s crawls, and of the tests' next ones.
_KILLED_SETTINGS = {"LOG_LEVEL": "INFO", "CONCURRENT_REQUESTS": 1}


def _crawled_then_killed(site: Site, data: Path, db_url: str, recrawl: tuple[str, ...]) -> int:
    """A site of 12 pages with ETags crawled into *data* from its first, then a re-crawl
    with the arguments *recrawl* killed at its third download: the killed crawl's row,
    left unfinished."""
    for i in range(12):
        children = [f"/p{c}.html" for c in (2 * i + 1, 2 * i + 2) if c < 12]
        site.page(f"/p{i}.html", f"Page {i}", f"page {i}", children, headers={"ETag": f'"{i}"'})
    first = run_crawl(
        data,
        "-a",
        f"seeds={site.url}p0.html",
        settings=_KILLED_SETTINGS,
        database_url=db_url,
        timeout=180,
    )
    assert first.returncode == 0, first.stderr[-2000:]
    killed = start_crawl(
        data,
        *recrawl,
        settings=_KILLED_SETTINGS,
        database_url=db_url,
        env={"SPIDERSITE_KILL_AT": "download:3"},
    )
    _, err = killed.communicate(timeout=180)
    assert killed.returncode == -signal.SIGKILL, err[-2000:]
    killed_id = first.scalar("SELECT max(id) FROM crawls")
    assert first.scalar("SELECT finished_at FROM crawls WHERE id = :i", i=killed_id) is None
    return int(killed_id)


def test_a_killed_recrawl_is_closed_by_the_next_crawl(
    site: Site, db_url: str, tmp_path: Path
) -> None:
    """A killed re-crawl is not resumed (the same command starts again): its row was
    unfinished for ever, shown running by the admin, and no later crawl could skip its
    link analysis.  The next crawl finds it dead (its lock free) and closes it
    (``abandoned``); the one after, which changed no page, skips its link analysis."""
    from search.web.jobs import crawl_state
    from search.web.runners import FINISHED

    data = tmp_path / "data"
    args = ("-a", f"seeds={site.url}p0.html")
    recrawl = (*args, "-a", "recrawl=all")
    killed_id = _crawled_then_killed(site, data, db_url, recrawl)
    settings = _KILLED_SETTINGS

    again = run_crawl(data, *recrawl, settings=settings, database_url=db_url, timeout=180)
    assert again.returncode == 0, again.stderr[-2000:]
    finder = again.scalar("SELECT max(id) FROM crawls")
    assert again.stats["store/abandoned_crawls"] == 1
    assert "linkrank/skipped" not in again.stats  # the killed crawl may have changed links
    engine = again.engine()
    try:
        with Session(engine) as s:
            row = s.get(Crawl, killed_id)
            assert row is not None
            assert row.finish_reason == "abandoned"
            assert row.stats == {"abandoned_found_by": finder}
            assert crawl_state(row, runner=None) == FINISHED  # type: ignore[arg-type]
    finally:
        engine.dispose()

    unchanged = run_crawl(data, *recrawl, settings=settings, database_url=db_url, timeout=180)
    assert unchanged.returncode == 0, unchanged.stderr[-2000:]
    assert unchanged.stats["recrawl/not_modified"] == 12
    assert unchanged.stats["linkrank/skipped"] == 1
    assert "store/abandoned_crawls" not in unchanged.stats


def test_a_killed_reanalyze_runs_again_over_every_page(
    site: Site, db_url: str, tmp_path: Path
) -> None:
    """A killed ``recrawl=reanalyze`` is not resumed, as no re-crawl is: the same command
    starts again, and re-visits (whole) and analyzes again every stored page, those the
    killed one had reached and those it had not; the killed crawl's row is closed."""
    data = tmp_path / "data"
    reanalyze = ("-a", "recrawl=reanalyze")
    killed_id = _crawled_then_killed(site, data, db_url, reanalyze)
    settings = _KILLED_SETTINGS
    site.hits.clear()
    again = run_crawl(data, *reanalyze, settings=settings, database_url=db_url, timeout=180)
    assert again.returncode == 0, again.stderr[-2000:]
    stats = again.stats
    assert stats["store/abandoned_crawls"] == 1 and "resume/requests" not in stats
    assert stats["recrawl/scheduled"] == 12 and stats["recrawl/reanalyzed"] == 12
    assert stats["analyze/pages"] == 12 and "conditional/requests" not in stats
    pages = sorted(p for p in site.paths() if p.startswith("/p"))
    assert pages == sorted(f"/p{i}.html" for i in range(12))
    reason = again.scalar("SELECT finish_reason FROM crawls WHERE id = :i", i=killed_id)
    assert reason == "abandoned"


def test_check_repairs_the_index(site: Site, crawl) -> None:
    for i in range(5):
        site.page(f"/d{i}.html", f"Doc {i}", f"ocelot{i}", [f"/d{i + 1}.html"])
    result = crawl("-a", f"seeds={site.url}d0.html")
    assert result.returncode == 0, result.stderr
    from search.index import Index

    index = Index(result.data_dir / "index")
    with index.writer() as w:  # lose two documents from the index
        for docid in sorted(index.docids())[:2]:
            w.delete(docid)
    dry = run_search("check", "--dry-run", "--json", data_dir=result.data_dir)
    assert dry.returncode == 1
    report = json.loads(dry.stdout)
    assert len(report["missing"]) == 2 and report["extra"] == []
    fixed = run_search("check", data_dir=result.data_dir)
    assert fixed.returncode == 0, fixed.stderr
    assert "Repaired" in fixed.stdout
    assert len(index.docids()) == 5
    again = run_search("check", "--dry-run", data_dir=result.data_dir)
    assert again.returncode == 0 and "agrees" in again.stdout


def test_check_marks_what_the_index_holds(site: Site, crawl) -> None:
    for i in range(5):
        site.page(f"/d{i}.html", f"Doc {i}", f"ocelot{i}", [f"/d{i + 1}.html"])
    result = crawl("-a", f"seeds={site.url}d0.html")
    assert result.returncode == 0, result.stderr
    ids = sorted(r.id for r in result.rows("SELECT id FROM documents"))[:2]
    engine = result.engine()
    with engine.begin() as conn:  # as a kill between a Whoosh commit and its marking
        conn.execute(
            text("UPDATE documents SET indexed = false WHERE id IN (:a, :b)"),
            {"a": ids[0], "b": ids[1]},
        )
    engine.dispose()
    dry = run_search("check", "--dry-run", "--json", data_dir=result.data_dir)
    assert dry.returncode == 1
    report = json.loads(dry.stdout)
    assert report["unmarked"] == ids and report["missing"] == report["extra"] == []
    fixed = run_search("check", data_dir=result.data_dir)
    assert fixed.returncode == 0 and "Repaired" in fixed.stdout, fixed.stdout + fixed.stderr
    assert result.scalar("SELECT count(*) FROM documents WHERE NOT indexed") == 0
    from search.index import Index

    assert Index(result.data_dir / "index").doc_count() == 5  # indexed again, not twice
    again = run_search("check", "--dry-run", data_dir=result.data_dir)
    assert again.returncode == 0 and "agrees" in again.stdout


def test_exact_duplicates_are_recorded_and_indexed_once(site: Site, crawl) -> None:
    same = "<html><head><title>Twin</title></head><body>identical okapi text</body></html>"
    site.page("/", "Home", "home", ["/one.html", "/two.html", "/three.html"])
    site.add("/one.html", same)
    site.add("/two.html", same)
    site.page("/three.html", "Other", "different okapi text")
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    rows = {r.url: r for r in result.rows("SELECT url, id, clone_of_id, indexed FROM documents")}
    one, two = rows[site.url + "one.html"], rows[site.url + "two.html"]
    original, clone = (one, two) if one.id < two.id else (two, one)
    assert clone.clone_of_id == original.id and original.clone_of_id is None
    assert not clone.indexed and original.indexed
    proc = result.search("okapi", "--json")
    urls = [h["url"] for h in json.loads(proc.stdout)["hits"]]
    assert len(urls) == 2  # the original and the different page, not the clone
    assert result.stats["store/clones"] == 1


@pytest.mark.parametrize("fate", ["gone", "changed"])
def test_a_duplicate_takes_the_place_of_its_original(site: Site, crawl, fate: str) -> None:
    """When the page a duplicate copies goes away or changes, the first of its duplicates
    becomes the original (searchable, in the same re-crawl), and the others its
    duplicates; before, they all stayed out of the index for good."""
    same = "<html><head><title>Twin</title></head><body>identical okapi text</body></html>"
    site.page("/", "Home", "home", ["/one.html", "/two.html", "/three.html"])
    for path in ("/one.html", "/two.html", "/three.html"):
        site.add(path, same)
    first = crawl("-a", f"seeds={site.url}")
    assert first.returncode == 0, first.stderr
    rows = first.rows("SELECT url, id, clone_of_id FROM documents WHERE url LIKE '%.html'")
    [original] = [r for r in rows if r.clone_of_id is None]
    copies = sorted(r.id for r in rows if r.clone_of_id == original.id)
    assert len(copies) == 2
    path = "/" + original.url.removeprefix(site.url)
    if fate == "gone":
        site.add(path, "gone", status=410, content_type="text/plain")
    else:
        site.page(path, "Changed", "a page about pangolins now")
    again = crawl("-a", "recrawl=all")
    assert again.returncode == 0, again.stderr
    now = {r.id: r for r in again.rows("SELECT id, url, clone_of_id, indexed FROM documents")}
    first_copy, second_copy = now[copies[0]], now[copies[1]]
    assert first_copy.clone_of_id is None and first_copy.indexed
    assert second_copy.clone_of_id == first_copy.id and not second_copy.indexed
    hits = [h["url"] for h in json.loads(again.search("okapi", "--json").stdout)["hits"]]
    assert hits == [first_copy.url]
    check = run_search("check", "--dry-run", data_dir=again.data_dir)
    assert check.returncode == 0 and "agrees" in check.stdout, check.stdout


def test_near_duplicates_are_recorded(site: Site, crawl) -> None:
    # 1,000 distinct words: the two manuals share all but a few of their ~1,000 shingles
    # (2 bits apart). With words repeated, as "term1 term1 term2 term2 term2 …", a page has
    # few distinct shingles and the same ending differs in 3 or 4 bits, on the threshold.
    words = " ".join(f"term{i}" for i in range(1000))
    site.page("/", "Home", "home", ["/orig.html", "/near.html", "/other.html"])
    site.page("/orig.html", "Manual", f"{words} printed edition")
    site.page("/near.html", "Manual", f"{words} online edition with a footer")
    site.page("/other.html", "Other", " ".join(f"other{i}" for i in range(400)))
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    rows = {
        r.url: r
        for r in result.rows(
            "SELECT url, id, near_duplicate_of_id, clone_of_id, simhash, indexed FROM documents"
        )
    }
    orig, near, other = (rows[site.url + p] for p in ("orig.html", "near.html", "other.html"))
    first, second = sorted([orig, near], key=lambda r: r.id)
    assert second.near_duplicate_of_id == first.id and first.near_duplicate_of_id is None
    assert second.clone_of_id is None and second.indexed  # recorded, not a clone, indexed
    assert other.near_duplicate_of_id is None and other.simhash is not None
    assert result.stats["store/near_duplicates"] == 1


def test_distinct_pages_sharing_a_vocabulary_are_not_near_duplicates(site: Site, crawl) -> None:
    """Pages of one site drawn from one Zipf vocabulary share their common words, not their
    text: none is a near-duplicate (the heaviest-stems fingerprint marked most of them)."""
    rng = random.Random(12)
    vocab = [f"v{rank}k{rng.randrange(10**5)}" for rank in range(5000)]
    weights = [1 / r**1.07 for r in range(1, len(vocab) + 1)]
    paths = [f"/p{i}.html" for i in range(40)]
    site.page("/", "Home", "home", paths)
    for path in paths:
        site.page(path, "Page", " ".join(rng.choices(vocab, weights=weights, k=500)))
    result = crawl("-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    rows = result.rows("SELECT near_duplicate_of_id, simhash FROM documents WHERE url LIKE '%/p%'")
    assert len(rows) == 40
    assert all(r.near_duplicate_of_id is None and r.simhash is not None for r in rows)
    assert "store/near_duplicates" not in result.stats


def test_reindex_follow_feeds_the_index_of_crawlers_without_one(site: Site, crawl) -> None:
    """Scale-out: crawlers run with INDEX_ENABLED=False and write only to the database; one
    `reindex --follow` process keeps the index in step."""
    for i in range(4):
        site.page(f"/f{i}.html", f"Follow {i}", f"narwhal{i} tusk", [f"/f{i + 1}.html"])
    result = crawl("-a", f"seeds={site.url}f0.html", settings={"INDEX_ENABLED": False})
    assert result.returncode == 0, result.stderr
    assert result.search("tusk").returncode == 1  # no index yet
    proc = run_search(
        "reindex", "--follow", "--interval", "0.2", "--rounds", "2", data_dir=result.data_dir
    )
    assert proc.returncode == 0, proc.stderr
    assert "indexed 4" in proc.stdout
    found = json.loads(result.search("tusk", "--json").stdout)["hits"]
    assert len(found) == 4
    # A page that left the searchable set (gone, noindex, clone) leaves the index.
    engine = create_engine(result.database_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE documents SET gone_at = crawled_at, status = 404, "
                "indexed = false WHERE url = :u"
            ),
            {"u": f"{site.url}f2.html"},
        )
    engine.dispose()
    again = run_search(
        "reindex", "--follow", "--interval", "0.2", "--rounds", "1", data_dir=result.data_dir
    )
    assert again.returncode == 0 and "removed 1" in again.stdout
    urls = [h["url"] for h in json.loads(result.search("tusk", "--json").stdout)["hits"]]
    assert f"{site.url}f2.html" not in urls and len(urls) == 3


def _worker_of(crawler_pid: int, timeout: float = 60.0) -> Any:
    """The crawl's worker process: the crawler's child that has a child (its indexer)."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process(crawler_pid).children():
            if child.children():
                return child
        time.sleep(0.1)
    raise AssertionError("no worker process found")


def test_a_crawl_whose_worker_dies_is_recorded_stopped_and_resumes(
    site: Site, tmp_path: Path
) -> None:
    """kill -9 of the worker alone: the crawl stops (store_failed, store/worker_error),
    is recorded so by the crawler (the worker cannot), exits 1; the same command then
    resumes it to its end."""
    build_slow_site(site)
    data = tmp_path / "data"
    db_url = f"sqlite:///{data / 'spidersite.db'}"
    proc = start_crawl(data, *seeds(site), settings={**SLOW_CRAWL, "ANALYZE_PROCESSES": 0})
    try:
        worker = _worker_of(proc.pid)
        wait_for_documents(db_url, 6)
        worker.kill()
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, stderr[-2000:]
    engine = create_engine(db_url)
    with engine.connect() as conn:
        row = conn.execute(text("SELECT finish_reason, finished_at, stats FROM crawls")).one()
    engine.dispose()
    assert row.finish_reason == "store_failed" and row.finished_at is not None
    stats = json.loads(row.stats)
    assert stats["store/worker_error"] and stats["finish_reason"] == "store_failed"
    stored_before = count_documents(db_url)
    assert stored_before < N_PAGES

    again = crawl_again(site, data)
    assert again.returncode == 0, again.stderr[-2000:]
    assert count_documents(db_url) == N_PAGES
    assert last_reason(again) == "finished" and again.stats["resume/requests"] > 0
    check = run_search("check", "--dry-run", data_dir=data)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_crawl_stopped_with_ctrl_c_resumes(site: Site, tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) stops a crawl gracefully (``shutdown``); the same command then
    resumes it, as Scrapy's JOBDIR would, without fetching the stored pages again."""
    build_slow_site(site)
    data = tmp_path / "data"
    db_url = f"sqlite:///{data / 'spidersite.db'}"
    proc = start_crawl(data, *seeds(site), settings=SLOW_CRAWL)
    try:
        wait_for_documents(db_url, 6)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    stopped = CrawlResult(proc.returncode, "", stderr, data, db_url)
    assert last_reason(stopped) == "shutdown", stderr[-2000:]
    stored = {"/" + url.removeprefix(site.url) for url in stopped.urls()}
    assert 0 < len(stored) < N_PAGES
    site.hits.clear()
    again = crawl_again(site, data)
    assert again.returncode == 0, again.stderr[-2000:]
    assert count_documents(db_url) == N_PAGES
    assert not stored & set(site.paths())  # nothing stored fetched again
    assert last_reason(again) == "finished" and again.stats["resume/requests"] > 0


@contextlib.contextmanager
def small_disk(path: Path, size: str = "8m") -> Iterator[Path]:
    """A file system of *size* at *path* (tmpfs; root only, else the test is skipped)."""
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr!r}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_stops_the_crawl_at_once_and_it_resumes(site: Site, tmp_path: Path) -> None:
    """The database's disk fills up: the batch fails at once, saying so (it is not retried
    as a database that does not answer), the crawl stops (store_failed, exit status 1);
    once there is room, the same command resumes it to its end."""
    rng = random.Random(7)
    n_pages = 30
    paths = [f"/w{i}.html" for i in range(n_pages)]
    site.page("/", "Home", "home", paths)
    for path in paths:  # ~1,500 distinct words a page: ~60 kB of postings each
        site.page(path, path, " ".join(f"w{rng.randrange(10**9)}" for _ in range(1500)))
    data = tmp_path / "data"
    settings = {"STORE_BATCH_SIZE": 4, "CONCURRENT_REQUESTS": 2, "LOG_LEVEL": "INFO"}
    with small_disk(tmp_path / "disk", "1m") as disk:
        db_url = f"sqlite:///{disk / 'spidersite.db'}"
        first = run_crawl(data, "-a", f"seeds={site.url}", settings=settings, database_url=db_url)
        assert first.returncode == 1, first.stderr[-2000:]
        log = (data / "crawl.log").read_text()
        assert "A batch could not be stored: the database's disk is full" in log
        assert "Database unavailable" not in log  # not retried
        assert "Closing spider (store_failed)" in log
        assert "Traceback" not in log
        stored = count_documents(db_url)
        assert stored < n_pages + 1
        # Room again: a bigger disk with the same database (its file and its WAL).
        for part in disk.glob("spidersite.db*"):
            shutil.copy(part, tmp_path / part.name)
        copy = tmp_path / "spidersite.db"
    again = run_crawl(
        data, "-a", f"seeds={site.url}", settings=settings, database_url=f"sqlite:///{copy}"
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert count_documents(f"sqlite:///{copy}") == n_pages + 1
    assert "resume/requests" in again.stats


@pytest.mark.parametrize("damage", ["not a database", "truncated"])
def test_a_damaged_sqlite_database_stops_the_crawl_cleanly(
    site: Site, tmp_path: Path, damage: str
) -> None:
    """A SQLite file that is not a database, or one cut short, at the start of a crawl: the
    crawl stops as for a database that cannot be opened (one line saying why, finish reason
    ``database_unusable``, exit status 1), with no traceback, and the file is left as it
    was."""
    site.page("/", "Home", "home page")
    data = tmp_path / "data"
    data.mkdir()
    path = data / "spidersite.db"
    damaged_sqlite(path, damage)
    before = path.read_bytes()
    result = run_crawl(data, "-a", f"seeds={site.url}", settings={"LOG_LEVEL": "INFO"})
    assert result.returncode == 1, result.stderr[-2000:]
    log = result.log
    errors = [line for line in log.splitlines() if "ERROR" in line]
    assert len(errors) == 1, log[-3000:]
    assert "cannot open database sqlite:///" in errors[0]
    assert ("not a database" if damage == "not a database" else "malformed") in errors[0]
    assert "Closing spider (database_unusable)" in log
    assert "'finish_reason': 'database_unusable'" in log
    assert "Traceback" not in log + result.stderr
    assert path.read_bytes() == before
    assert not site.requested("/")  # nothing fetched that could not be stored


@pytest.mark.parametrize("empty", ["zero bytes", "no tables"])
def test_an_empty_sqlite_file_is_a_new_database(site: Site, tmp_path: Path, empty: str) -> None:
    """A database file with nothing in it (``touch data/spidersite.db``: zero bytes, which
    SQLite opens as an empty database; or a database without a table) is a new database,
    as a missing file is: the crawl creates the schema in it, stores and indexes."""
    site.page("/", "Home", "home page", ["/a.html"])
    site.page("/a.html", "A", "aardvark page")
    data = tmp_path / "data"
    data.mkdir()
    path = data / "spidersite.db"
    if empty == "zero bytes":
        path.touch()
    else:
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA user_version = 7")  # writes the file's header
        assert path.stat().st_size > 0
    result = run_crawl(data, "-a", f"seeds={site.url}", settings={"LOG_LEVEL": "INFO"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.log + result.stderr
    assert result.urls() == {site.url, f"{site.url}a.html"}
    proc = result.search("aardvark", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [h["url"] for h in json.loads(proc.stdout)["hits"]] == [f"{site.url}a.html"]


def test_a_database_of_something_else_stops_the_crawl_cleanly(site: Site, tmp_path: Path) -> None:
    """A SQLite file that holds another application's tables and not this project's
    schema: the crawl stops as for a database that cannot be used (one line naming the
    tables, ``database_unusable``, exit status 1), and adds nothing to it."""
    site.page("/", "Home", "home page")
    data = tmp_path / "data"
    data.mkdir()
    path = data / "spidersite.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.commit()
    result = run_crawl(data, "-a", f"seeds={site.url}", settings={"LOG_LEVEL": "INFO"})
    assert result.returncode == 1, result.stderr[-2000:]
    log = result.log
    errors = [line for line in log.splitlines() if "ERROR" in line]
    assert len(errors) == 1, log[-3000:]
    assert f"cannot use the database sqlite:///{path}" in errors[0]
    assert "invoices" in errors[0]
    assert "'finish_reason': 'database_unusable'" in log
    assert "Traceback" not in log + result.stderr
    with contextlib.closing(sqlite3.connect(path)) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"invoices"}
    assert not site.requested("/")
