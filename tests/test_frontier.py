"""The frontier of a crawl that runs alone (spidersite/frontier.py): waiting requests on
disk under FRONTIER_DIR, removed when the crawl closes; Scrapy's request filter on 8-byte
fingerprints."""

from __future__ import annotations

from pathlib import Path

import pytest
from scrapy import Request, Spider
from scrapy.dupefilters import RFPDupeFilter
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from search import fingerprints
from search.locks import WriterLock
from spidersite import settings
from spidersite.frontier import (
    LOCK_NAME,
    DiskFrontierScheduler,
    FingerprintDupeFilter,
    FrontierAddon,
    remove_stale,
)
from tests.conftest import Site


def test_the_addon_sets_the_frontier_unless_scaled_out() -> None:
    settings = Settings()
    FrontierAddon(None).update_settings(settings)  # type: ignore[arg-type]
    assert settings["SCHEDULER"] == "spidersite.frontier.DiskFrontierScheduler"
    assert settings["DUPEFILTER_CLASS"] == "spidersite.frontier.FingerprintDupeFilter"
    # A user's own choice (project settings, -s) wins.
    settings = Settings({"DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter"}, "project")
    FrontierAddon(None).update_settings(settings)  # type: ignore[arg-type]
    assert settings["DUPEFILTER_CLASS"] == "scrapy.dupefilters.BaseDupeFilter"
    # Scaled out, the frontier is scrapy-redis's (spidersite.scaleout).
    with pytest.raises(NotConfigured):
        FrontierAddon(None).update_settings(  # type: ignore[arg-type]
            Settings({"SCALEOUT_REDIS_URL": "redis://127.0.0.1:6379/0"})
        )


def test_dupefilter_filters_as_scrapys_in_eight_bytes_a_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fingerprints, "PENDING", 1024)  # merged into the array every 1,024
    df = FingerprintDupeFilter()
    requests = [Request(f"http://example.org/p/{i}.html") for i in range(20_000)]
    assert not any(df.request_seen(r) for r in requests)
    assert all(df.request_seen(r) for r in requests)
    # Same fingerprints as Scrapy's: the query's order does not matter, the method does.
    assert df.request_seen(Request("http://example.org/p/1.html?b=2&a=1")) is False
    assert df.request_seen(Request("http://example.org/p/1.html?a=1&b=2")) is True
    assert df.request_seen(Request("http://example.org/p/1.html", method="HEAD")) is False
    assert len(df.seen) == 20_002
    # Kept as 8-byte integers (the latest in a small set until merged), not in Scrapy's set.
    assert df.seen.nbytes == 8 * (len(df.seen) - len(df.seen._added))
    assert len(df.seen._added) < 1024
    assert not df._fingerprints


def test_dupefilter_reads_and_writes_scrapys_jobdir_file(tmp_path: Path) -> None:
    first = [Request(f"http://example.org/{i}") for i in range(50)]
    more = [Request(f"http://example.org/more/{i}") for i in range(50)]
    scrapys = RFPDupeFilter(str(tmp_path))
    assert not any(scrapys.request_seen(r) for r in first)
    scrapys.close("shutdown")
    ours = FingerprintDupeFilter(str(tmp_path))
    assert all(ours.request_seen(r) for r in first)
    assert not any(ours.request_seen(r) for r in more)
    ours.close("shutdown")
    scrapys = RFPDupeFilter(str(tmp_path))  # and back: the file is Scrapy's format
    assert all(scrapys.request_seen(r) for r in first + more)
    scrapys.close("finished")


def test_stale_frontiers_are_removed_live_ones_kept(tmp_path: Path) -> None:
    dead = tmp_path / "crawl-dead"
    dead.mkdir()
    (dead / LOCK_NAME).write_text("12345\n")
    (dead / "requests.queue").mkdir()
    live = tmp_path / "crawl-live"
    live.mkdir()
    other = tmp_path / "notes"
    other.mkdir()
    with WriterLock(live / LOCK_NAME, "a live crawl's frontier"):
        assert remove_stale(tmp_path) == 1
        assert not dead.exists() and live.exists() and other.exists()
    assert remove_stale(tmp_path) == 1  # its crawl is gone now
    assert not live.exists()


def _tree(site: Site, pages: int) -> list[str]:
    """Pages that all link to each other's neighbours; a redirect to a page linked too."""
    for i in range(pages):
        links = [f"/p{j}.html" for j in (2 * i + 1, 2 * i + 2, i + 1) if j < pages]
        if i == 0:
            links.append("/moved")
        site.page(f"/p{i}.html", f"Page {i}", f"words of page {i}", links)
    site.add("/moved", status=301, headers={"Location": "/p1.html"})
    return [f"{site.url}p{i}.html" for i in range(pages)]


def test_crawl_keeps_its_frontier_on_disk_and_removes_it(site: Site, crawl, tmp_path: Path) -> None:
    urls = _tree(site, 40)
    frontier = tmp_path / "data" / "frontier"
    stale = frontier / "crawl-killed"  # a crawl killed earlier left its folder
    (stale / "requests.queue").mkdir(parents=True)
    (stale / LOCK_NAME).write_text("1\n")
    settings = {"CONCURRENT_REQUESTS": 2, "FRONTIER_MEMORY_REQUESTS": 0}
    result = crawl("-a", f"seeds={site.url}p0.html", settings=settings)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.urls() == set(urls)
    stats = result.stats
    # Every request waited on disk, none in memory (FRONTIER_MEMORY_REQUESTS 0).
    assert stats["scheduler/enqueued/disk"] == stats["scheduler/enqueued"] >= 40
    assert "scheduler/enqueued/memory" not in stats
    # The redirect to a page already scheduled was filtered by Scrapy's filter (ours).
    assert stats["dupefilter/filtered"] >= 1
    assert len(site.requested("/p1.html")) == 1
    # The folder is gone, and the killed crawl's with it.
    assert frontier.is_dir() and list(frontier.iterdir()) == []
    assert "Removed the frontier of 1 crawl(s)" in result.log


def test_crawl_holds_a_few_requests_in_memory_while_the_disk_holds_none(
    site: Site, crawl, tmp_path: Path
) -> None:
    """FRONTIER_MEMORY_REQUESTS: the first requests wait in memory, the rest on disk once
    that many are held; every page is crawled once, and the folder is removed."""
    urls = _tree(site, 40)
    settings = {"CONCURRENT_REQUESTS": 1, "FRONTIER_MEMORY_REQUESTS": 3}
    result = crawl("-a", f"seeds={site.url}p0.html", settings=settings)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.urls() == set(urls)
    stats = result.stats
    assert stats["scheduler/enqueued/memory"] >= 3
    assert stats["scheduler/enqueued/disk"] >= 10
    assert (
        stats["scheduler/enqueued/memory"] + stats["scheduler/enqueued/disk"]
        == (stats["scheduler/enqueued"])
    )
    assert stats["scheduler/dequeued"] == stats["scheduler/enqueued"]
    assert len(site.requested("/p1.html")) == 1
    assert list((tmp_path / "data" / "frontier").iterdir()) == []


def _scheduler(tmp_path: Path, memory: int) -> DiskFrontierScheduler:
    crawler = get_crawler(
        settings_dict={
            "FRONTIER_DIR": str(tmp_path / "frontier"),
            "FRONTIER_MEMORY_REQUESTS": memory,
            "SPIDERSITE_DATA_DIR": str(tmp_path),
            # Scrapy's by slot needs a running engine; the order within one slot is this.
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
            # The project's queues (spidersite.settings): first in, first out.
            "SCHEDULER_DISK_QUEUE": settings.SCHEDULER_DISK_QUEUE,
            "SCHEDULER_MEMORY_QUEUE": settings.SCHEDULER_MEMORY_QUEUE,
        }
    )
    crawler.spider = Spider("s")
    scheduler = DiskFrontierScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    return scheduler


def test_requests_in_memory_keep_scrapys_order_and_touch_no_disk(tmp_path: Path) -> None:
    """Pushed and popped one at a time (a re-crawl's pace), requests never reach the disk
    (no disk queue is made, nothing pickled); past the cap they go to disk, and the order stays
    breadth-first by priority, first come first served within a priority."""
    scheduler = _scheduler(tmp_path, 4)
    try:
        for i in range(50):
            assert scheduler.enqueue_request(Request(f"http://a.example/{i}", dont_filter=True))
            assert scheduler.next_request().url == f"http://a.example/{i}"
        assert (scheduler.in_memory, scheduler.on_disk) == (0, 0)
        stats = scheduler.stats
        assert stats.get_value("scheduler/enqueued/memory") == 50
        assert stats.get_value("scheduler/enqueued/disk") is None
        # Ten requests of three priorities (-hops): four held in memory, six on disk.
        pushed = [(i, -(i % 3)) for i in range(10)]
        for i, priority in pushed:
            request = Request(f"http://a.example/q{i}", priority=priority, dont_filter=True)
            scheduler.enqueue_request(request)
        assert (scheduler.in_memory, scheduler.on_disk) == (4, 6)
        # A request scheduled while the disk holds some goes there too, even with room.
        first = scheduler.next_request()
        scheduler.enqueue_request(Request("http://a.example/late", dont_filter=True))
        assert (scheduler.in_memory, scheduler.on_disk) == (3, 7)
        popped = [first.url] + [scheduler.next_request().url for _ in range(10)]
        assert scheduler.next_request() is None
        assert (scheduler.in_memory, scheduler.on_disk) == (0, 0)
        # The memory's four (scheduled first) in order of priority, then the disk's.
        memory = sorted(pushed[:4], key=lambda p: (-p[1], p[0]))
        disk = sorted([*pushed[4:], (10, 0)], key=lambda p: (-p[1], p[0]))
        names = {10: "late"}
        assert popped == [f"http://a.example/{names.get(i, f'q{i}')}" for i, _ in memory + disk]
    finally:
        scheduler.close("finished")


def test_no_requests_in_memory_with_the_cap_at_zero(tmp_path: Path) -> None:
    scheduler = _scheduler(tmp_path, 0)
    try:
        scheduler.enqueue_request(Request("http://a.example/1", dont_filter=True))
        assert (scheduler.in_memory, scheduler.on_disk) == (0, 1)
        assert scheduler.next_request().url == "http://a.example/1"
        assert scheduler.on_disk == 0
    finally:
        scheduler.close("finished")


def test_frontier_in_memory_when_switched_off(site: Site, crawl, tmp_path: Path) -> None:
    urls = _tree(site, 10)
    result = crawl("-a", f"seeds={site.url}p0.html", settings={"FRONTIER_DISK": False})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.urls() == set(urls)
    stats = result.stats
    assert stats["scheduler/enqueued/memory"] == stats["scheduler/enqueued"] >= 10
    assert "scheduler/enqueued/disk" not in stats
    assert not (tmp_path / "data" / "frontier").exists()


def test_jobdir_keeps_scrapys_semantics(site: Site, crawl, tmp_path: Path) -> None:
    urls = _tree(site, 10)
    jobdir = tmp_path / "job"
    result = crawl("-a", f"seeds={site.url}p0.html", settings={"JOBDIR": str(jobdir)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.urls() == set(urls)
    assert result.stats["scheduler/enqueued/disk"] >= 10
    # The queue and the seen requests are in JOBDIR, kept; nothing under the data dir.
    assert (jobdir / "requests.queue" / "active.json").exists()
    assert (jobdir / "requests.seen").stat().st_size > 0
    assert not (tmp_path / "data" / "frontier").exists()
