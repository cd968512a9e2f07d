"""Two crawls on one data folder: the second refuses to start (one writer per Whoosh index
and SQLite file); a killed crawl leaves no stale lock; crawls that share a PostgreSQL
without an index (a scaled-out crawl's nodes) are not held back."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from search.locks import Locked, WriterLock, database_lock, index_lock
from tests.conftest import Site, run_crawl, start_crawl, wait_for_documents


def slow_site(site: Site, pages: int = 12, delay: float = 0.5) -> None:
    site.page("/", "Home", "okapi home", [f"/p{n}.html" for n in range(pages - 1)])
    for n in range(pages - 1):
        site.page(f"/p{n}.html", f"Page {n}", "okapi page", delay=delay)


def wait_for_lock(lock: WriterLock, timeout: float = 60.0) -> None:
    """Wait until a crawl holds *lock*."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lock.path.exists():
            try:
                lock.acquire().release()
            except Locked:
                return
        time.sleep(0.05)
    raise AssertionError(f"no crawl took {lock.path}")


def test_a_second_crawl_on_the_same_data_folder_refuses_to_start(
    site: Site, tmp_path: Path
) -> None:
    slow_site(site)
    data = tmp_path / "data"
    first = start_crawl(data, "-a", f"seeds={site.url}", settings={"CONCURRENT_REQUESTS": 1})
    try:
        wait_for_lock(index_lock(data / "index"))
        second = run_crawl(
            data, "-a", f"seeds={site.url}", settings={"LOG_FILE": data / "second.log"}
        )
        assert second.returncode == 2, second.stderr
        assert "Traceback" not in second.stderr
        lines = [line for line in second.stderr.splitlines() if "another crawl is running" in line]
        assert len(lines) == 1, second.stderr
        assert (
            f"the search index at {data / 'index'} is being written by another process"
            in (lines[0])
        )
        assert f"(process {first.pid})" in lines[0]
        _, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert first.returncode == 0, stderr
    assert second.scalar("SELECT count(*) FROM documents") == 12
    assert second.scalar("SELECT count(*) FROM crawls") == 1  # the second never started


def test_the_sqlite_file_is_locked_without_an_index(site: Site, tmp_path: Path) -> None:
    slow_site(site)
    data = tmp_path / "data"
    first = start_crawl(
        data, "-a", f"seeds={site.url}", settings={"CONCURRENT_REQUESTS": 1, "INDEX_ENABLED": False}
    )
    try:
        wait_for_lock(database_lock(data / "spidersite.db"))
        second = run_crawl(
            data,
            "-a",
            f"seeds={site.url}",
            settings={"LOG_FILE": data / "second.log", "INDEX_ENABLED": False},
        )
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate(timeout=60)
    assert second.returncode == 2, second.stderr
    assert f"the database sqlite:///{data / 'spidersite.db'} is being written" in second.stderr


def test_a_killed_crawl_leaves_no_stale_lock(site: Site, tmp_path: Path) -> None:
    slow_site(site)
    data = tmp_path / "data"
    first = start_crawl(data, "-a", f"seeds={site.url}", settings={"CONCURRENT_REQUESTS": 1})
    wait_for_lock(index_lock(data / "index"))
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate(timeout=60)
    again = run_crawl(data, "-a", f"seeds={site.url}")
    assert again.returncode == 0, again.stderr
    assert again.scalar("SELECT count(*) FROM documents") == 12


@pytest.mark.postgres
def test_crawls_sharing_a_postgresql_without_an_index_run_together(
    site: Site, tmp_path: Path, pg_url: str
) -> None:
    slow_site(site, pages=6)
    data = tmp_path / "data"
    first = start_crawl(
        data, "-a", f"seeds={site.url}", database_url=pg_url, settings={"INDEX_ENABLED": False}
    )
    try:
        wait_for_documents(pg_url, 1)
        second = run_crawl(
            data,
            "-a",
            f"seeds={site.url}",
            database_url=pg_url,
            settings={"LOG_FILE": data / "second.log", "INDEX_ENABLED": False},
        )
        _, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert second.returncode == 0, second.stderr
    assert first.returncode == 0, stderr
    assert second.scalar("SELECT count(*) FROM documents") == 6
