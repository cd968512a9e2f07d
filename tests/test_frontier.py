"""The frontier of a crawl that runs alone (spidersite/frontier.py): waiting requests on
disk under FRONTIER_DIR, removed when the crawl closes; Scrapy's request filter on 8-byte
fingerprints."""

from __future__ import annotations

from pathlib import Path

import pytest
from scrapy import Request
from scrapy.dupefilters import RFPDupeFilter
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings

from search import fingerprints
from search.locks import WriterLock
from spidersite.frontier import (
    LOCK_NAME,
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
    result = crawl("-a", f"seeds={site.url}p0.html", settings={"CONCURRENT_REQUESTS": 2})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.urls() == set(urls)
    stats = result.stats
    # Every request waited on disk, none in memory.
    assert stats["scheduler/enqueued/disk"] == stats["scheduler/enqueued"] >= 40
    assert "scheduler/enqueued/memory" not in stats
    # The redirect to a page already scheduled was filtered by Scrapy's filter (ours).
    assert stats["dupefilter/filtered"] >= 1
    assert len(site.requested("/p1.html")) == 1
    # The folder is gone, and the killed crawl's with it.
    assert frontier.is_dir() and list(frontier.iterdir()) == []
    assert "Removed the frontier of 1 crawl(s)" in result.log


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
