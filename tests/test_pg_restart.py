"""PostgreSQL restarted in the middle of a crawl: batches are retried, no page is lost.

The test starts a private PostgreSQL cluster of its own (initdb + pg_ctl, as the postgres
user, on a free port and a socket in a temporary folder), so the shared one is never
disturbed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import ROOT, Site, _env, crawl_command, free_port, wait_for_documents

PG_BIN = Path("/usr/lib/postgresql/15/bin")
N_PAGES = 30


def as_postgres(*cmd: str) -> subprocess.CompletedProcess[str]:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=60)


@pytest.fixture
def private_pg():  # type: ignore[no-untyped-def]
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"no PostgreSQL server binaries in {PG_BIN}")
    # Outside pytest's private temporary folder: the postgres user must reach it.
    root = Path(tempfile.mkdtemp(prefix="spidersite-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    init = as_postgres(
        str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"
    )
    assert init.returncode == 0, init.stderr
    port = free_port()
    opts = f"-p {port} -k {sock} -c listen_addresses=''"

    def ctl(action: str) -> None:
        args = [str(PG_BIN / "pg_ctl"), "-D", str(data), "-w", "-l", str(root / "log")]
        if action != "stop":
            args += ["-o", opts]
        else:
            args += ["-m", "fast"]
        result = as_postgres(*args, action)
        assert result.returncode == 0, result.stderr + (root / "log").read_text()

    ctl("start")
    url = f"postgresql+psycopg://postgres@/postgres?host={sock}&port={port}"
    try:
        yield url, ctl
    finally:
        as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)


def _chain(site: Site, n_pages: int, delay: float) -> None:
    """Pages /p0.html … each linking to the next, each answered after *delay* seconds."""
    for i in range(n_pages):
        site.page(
            f"/p{i}.html",
            f"Page {i}",
            f"quagga number{i}",
            [f"/p{i + 1}.html"] if i + 1 < n_pages else [],
            delay=delay,
        )


def _start_crawl(
    site: Site, data: Path, url: str, settings: dict[str, object]
) -> subprocess.Popen[str]:
    """A crawl of the chain from /p0.html into the database *url*, started (stderr piped)."""
    cmd = crawl_command(data, "-a", f"seeds={site.url}p0.html", settings=settings)
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=_env(data, url),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_restart_during_crawl_loses_nothing(site: Site, private_pg, tmp_path: Path) -> None:
    url, ctl = private_pg
    _chain(site, N_PAGES, delay=0.1)
    data = tmp_path / "data"
    settings = {"STORE_BATCH_SIZE": 2, "INDEX_BATCH_SIZE": 2, "LOG_LEVEL": "INFO"}
    proc = _start_crawl(site, data, url, settings)
    assert wait_for_documents(url, 6) >= 6
    ctl("stop")
    time.sleep(2)  # the crawl goes on meanwhile; its batches fail and wait
    ctl("start")
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr[-2000:]
    engine = create_engine(url)
    with engine.connect() as conn:
        urls = [r.url for r in conn.execute(text("SELECT url FROM documents"))]
        stats = conn.execute(text("SELECT stats FROM crawls ORDER BY id DESC LIMIT 1")).scalar_one()
    engine.dispose()
    stats = stats if isinstance(stats, dict) else json.loads(stats)
    log = (data / "crawl.log").read_text(encoding="utf-8", errors="replace")
    errors = "\n".join(line for line in log.splitlines() if "ERROR" in line)[:6000]
    assert sorted(urls) == sorted(f"{site.url}p{i}.html" for i in range(N_PAGES)), (stats, errors)
    assert stats.get("store/retries", 0) >= 1
    assert not stats.get("store/failed_batches")


def test_a_database_down_at_the_end_closes_at_once(site: Site, private_pg, tmp_path: Path) -> None:
    """PostgreSQL stops during a crawl and stays down: once the worker has given up a
    batch (the database is known to fail), the indexer's marks of the pages it made
    searchable are tried once, not retried for minutes as the crawl closes; the crawl
    says in one line what was not marked, and no traceback."""
    url, ctl = private_pg
    n_pages = 80
    _chain(site, n_pages, delay=0.2)
    data = tmp_path / "data"
    settings = {
        "STORE_BATCH_SIZE": 2,
        # One commit when the pages stop coming (the database down): its marks then fail.
        "INDEX_BATCH_SIZE": 1000,
        "STORE_RETRY_TIMES": 1,
        "LOG_LEVEL": "INFO",
    }
    proc = _start_crawl(site, data, url, settings)
    assert wait_for_documents(url, 6) >= 6
    ctl("stop")
    _, stderr = proc.communicate(timeout=300)
    log = (data / "crawl.log").read_text(encoding="utf-8", errors="replace")
    assert proc.returncode == 1, stderr[-2000:]  # store_failed: resume it
    assert "Traceback" not in log + stderr, (log + stderr)[-4000:]
    stats = dict(re.findall(r"'((?:index|store)/[a-z_]+)': (\d+)", log))
    assert int(stats.get("index/retries", 0)) <= 1, stats
    unmarked = int(stats["index/unmarked"])
    assert unmarked >= 1, stats
    lines = [line for line in log.splitlines() if "could not be marked indexed" in line]
    assert len(lines) == 1, log[-4000:]
    assert f"{unmarked} pages were made searchable" in lines[0]
    # Back up: the pages the crawl stored, searchable all, some not marked indexed; the
    # same command resumes the crawl, and its indexer marks them.
    ctl("start")
    engine = create_engine(url)

    def stored_and_marked() -> tuple[int, int]:
        with engine.connect() as conn:
            return tuple(
                conn.execute(
                    text("SELECT count(*), count(*) FILTER (WHERE indexed) FROM documents")
                ).one()
            )

    try:
        stored, marked = stored_and_marked()
        assert stored - marked == unmarked
        again = _start_crawl(site, data, url, settings)
        _, again_stderr = again.communicate(timeout=300)
        assert again.returncode == 0, again_stderr[-2000:]
        assert stored_and_marked() == (n_pages, n_pages)
    finally:
        engine.dispose()


def _one_line(log: str, words: str) -> str:
    """The one line of *log* that holds *words*, which must be a line of its own: the
    line after it is the next log record's (it starts with a time)."""
    lines = log.splitlines()
    found = [i for i, line in enumerate(lines) if words in line]
    assert len(found) == 1, log[-4000:]
    after = lines[found[0] + 1 : found[0] + 2]
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", line) for line in after), after
    return lines[found[0]]


def test_a_database_down_after_the_last_batch_closes_soon(
    site: Site, private_pg, tmp_path: Path
) -> None:
    """PostgreSQL stops once every page is stored, before the indexer marks them (it waits
    for the index's lock, held here as a reindex's commit would): no batch fails, so no
    batch tells the indexer the database is down, and the crawl's close bounds the
    retries of its marks, not ~2.5 minutes of them.  The crawl says in one line what it
    could not mark, and in one line that its end could not be recorded and that the same
    command resumes it; no traceback; it exits with status 1.  Back up, the same command
    resumes it, marks the pages, and closes the row of the crawl it resumed."""
    from search import db
    from search.index import Index
    from search.indexer import MARK_RETRY_TIMES
    from search.store import DocumentStore
    from tests.test_unit_linkrank import row

    url, ctl = private_pg
    n_pages = 20
    _chain(site, n_pages, delay=0.0)
    site.routes["/p0.html"].gate = gate = threading.Event()
    # A page an earlier crawl left unindexed: the indexer's catch-up marks it, and so says
    # that its start, which reads the database, is over.
    engine = db.connect(url)
    DocumentStore(engine).write_batch([row("earlier", "quagga earlier", [])])

    def stored_and_marked() -> tuple[int, int]:
        with engine.connect() as conn:
            stored, marked = conn.execute(
                text("SELECT count(*), count(*) FILTER (WHERE indexed) FROM documents")
            ).one()
        return stored, marked

    data = tmp_path / "data"
    # Every page is stored in a few batches, which the indexer's inbox holds while it
    # waits for the lock; its one commit is when the crawl closes.
    settings = {"STORE_BATCH_SIZE": 5, "INDEX_BATCH_SIZE": 1000, "LOG_LEVEL": "INFO"}
    try:
        proc = _start_crawl(site, data, url, settings)
        deadline = time.monotonic() + 60
        while stored_and_marked() != (1, 1) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stored_and_marked() == (1, 1)
        engine.dispose()
        held = Index(str(data / "index")).writer()
        held.__enter__()
        try:
            gate.set()
            assert wait_for_documents(url, n_pages + 1) == n_pages + 1
            ctl("stop")
            stopped = time.monotonic()
        finally:
            held.__exit__(None, None, None)
        _, stderr = proc.communicate(timeout=300)
        elapsed = time.monotonic() - stopped
        log = (data / "crawl.log").read_text(encoding="utf-8", errors="replace")
        # Every page stored and searchable, but the crawl's end is not recorded: the
        # database says it never finished, and the same command is to be run again.
        assert proc.returncode == 1, stderr[-2000:]
        assert "Traceback" not in log + stderr, (log + stderr)[-4000:]
        assert "A batch could not be stored" not in log
        stats = dict(re.findall(r"'((?:index|store)/[a-z_]+)': (\d+)", log))
        assert 1 <= int(stats.get("index/retries", 0)) < MARK_RETRY_TIMES, stats
        assert int(stats["index/unmarked"]) == n_pages, stats
        assert elapsed < 60, elapsed
        unmarked = _one_line(log, "could not be marked indexed")
        assert f"{n_pages} pages were made searchable" in unmarked
        end = _one_line(log, "could not be recorded")
        assert "The crawl's end could not be recorded" in end
        assert "OperationalError" in end and "Background on this error" not in end, end
        assert end.endswith("running the same command again resumes it"), end
        assert len(end) < 600, end
        # Back up: the same command resumes the crawl, and its indexer marks the pages.
        ctl("start")
        again = _start_crawl(site, data, url, settings)
        _, again_stderr = again.communicate(timeout=300)
        assert again.returncode == 0, again_stderr[-2000:]
        resumed = (data / "crawl.log").read_text(encoding="utf-8", errors="replace")[len(log) :]
        assert "Resuming an unfinished crawl" in resumed, resumed[-4000:]
        assert stored_and_marked() == (n_pages + 1, n_pages + 1)
        with engine.connect() as conn:
            crawls = conn.execute(
                text("SELECT id, finish_reason, stats FROM crawls ORDER BY id DESC LIMIT 2")
            ).all()
        # The crawl whose end could not be recorded is closed by the one that resumed it.
        (last, last_reason, last_stats), (resumed, resumed_reason, resumed_stats) = crawls
        assert (last_reason, last_stats["resume/crawl"]) == ("finished", resumed)
        assert (resumed_reason, resumed_stats) == ("resumed", {"resumed_by": last})
    finally:
        gate.set()
        engine.dispose()
