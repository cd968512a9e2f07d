"""The crawler's memory beside its scraper slot: a Scrapy extension that samples, every
``CRAWLERMEM_INTERVAL`` seconds (2), the crawler process's RSS, glibc's ``mallinfo2``
(the main heap's size, bytes in use and free; large blocks ``mmap``ed apart), Python's
allocated blocks, threads, and what Scrapy holds in flight: the responses in the scraper
slot and their bytes (``SCRAPER_SLOT_MAX_ACTIVE_SIZE``'s measure) and the requests being
downloaded.  One JSON line a sample into ``CRAWLERMEM_FILE``::

    python benchmarks/scale.py --pages 5000 --skip-baseline --skip-queries --skip-reindex \\
        --set 'EXTENSIONS={"benchmarks._crawlermem.CrawlerMemory": 900,
                           "spidersite.extensions.CrawlRecorder": 0,
                           "spidersite.extensions.IndexExtension": 0,
                           "spidersite.pagestore.PageStore": 0}' \\
        --set CRAWLERMEM_FILE=/tmp/crawlermem.jsonl

(``EXTENSIONS`` replaces the project's: name its three extensions too.)  Unlike
tracemalloc (:mod:`_memprofile`), it costs nothing measurable, so the crawl keeps the
pace whose backlog it measures; ``python benchmarks/_crawlermem.py FILE`` summarizes a
file (medians once half the pages are downloaded).
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
import threading
import time
from typing import Any


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _mallinfo() -> dict[str, float]:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):  # not glibc, or glibc < 2.33
        return {}
    mb = 2**20
    return {
        "heap_mb": info.arena / mb,
        "heap_used_mb": info.uordblks / mb,
        "heap_free_mb": info.fordblks / mb,
        "mmapped_mb": info.hblkhd / mb,
    }


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class CrawlerMemory:
    def __init__(self, crawler: Any) -> None:
        from twisted.internet import task

        self.crawler = crawler
        self.path = crawler.settings.get("CRAWLERMEM_FILE") or "crawlermem.jsonl"
        self.interval = crawler.settings.getfloat("CRAWLERMEM_INTERVAL", 2.0)
        self.started = time.monotonic()
        self.loop = task.LoopingCall(self.sample)

    @classmethod
    def from_crawler(cls, crawler: Any) -> CrawlerMemory:
        from scrapy import signals

        ext = cls(crawler)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self, spider: Any) -> None:
        self.sample()
        self.loop.start(self.interval, now=False)

    def spider_closed(self, spider: Any, reason: str) -> None:
        if self.loop.running:
            self.loop.stop()
        self.sample()

    def sample(self) -> None:
        record: dict[str, Any] = {
            "t": round(time.monotonic() - self.started, 1),
            "rss_mb": round(_rss_mb(), 1),
            **{k: round(v, 1) for k, v in _mallinfo().items()},
            "py_blocks": sys.getallocatedblocks(),
            "threads": threading.active_count(),
            "responses": self.crawler.stats.get_value("response_received_count", 0),
        }
        engine = self.crawler.engine
        slot = getattr(getattr(engine, "scraper", None), "slot", None)
        if slot is not None:
            record["slot_responses"] = len(slot.active)
            record["slot_bytes"] = slot.active_size
        if engine is not None:
            record["downloading"] = len(engine.downloader.active)
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


def summary(path: str) -> dict[str, Any]:
    """The first sample's RSS and the medians of the samples taken once half the pages
    were downloaded (until the last response)."""
    with open(path, encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    last = max(r["responses"] for r in rows)
    steady = [r for r in rows if last / 2 <= r["responses"] < last] or rows
    keys = [k for k in rows[-1] if k not in ("t", "responses")]
    return {
        "samples": len(rows),
        "first_rss_mb": rows[0]["rss_mb"],
        "peak_rss_mb": max(r["rss_mb"] for r in rows),
        "steady_median": {k: statistics.median(r.get(k, 0) for r in steady) for k in keys},
    }


if __name__ == "__main__":
    print(json.dumps(summary(sys.argv[1]), indent=1))
