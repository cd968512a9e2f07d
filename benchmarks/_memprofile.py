"""Where a crawl's memory goes: a Scrapy extension that writes snapshots of the crawler.

Load it into a crawl run from the repository root (``python -m`` puts the current folder
on ``sys.path``, and ``benchmarks`` imports as a namespace package)::

    python -m scrapy crawl site -a seeds=... \\
        -s 'EXTENSIONS={"benchmarks._memprofile.MemProfile": 900,
                        "spidersite.extensions.CrawlRecorder": 0,
                        "spidersite.extensions.IndexExtension": 0,
                        "spidersite.pagestore.PageStore": 0}' \
        -s MEMPROFILE_FILE=mem.jsonl

(``EXTENSIONS`` replaces the project's: name its three extensions too, or the crawl records
no stats and its index is not checked at start; ``INDEX_ENABLED=False`` is what turns the
indexer off.)

or through ``benchmarks/scale.py --set NAME=VALUE`` (the same ``-s`` settings).
Every ``MEMPROFILE_INTERVAL`` seconds (and when the spider closes) one JSON line goes to
``MEMPROFILE_FILE``:

- ``rss_mb``, and the crawl's progress (responses, items);
- ``components``: for every attribute of the crawl's components (the engine's slot, the
  scheduler and its queues, the dupe filter, the scraper's slot, the downloader and its
  slots, the spider, every item pipeline, spider and downloader middleware, extension)
  that holds a collection, its length and its deep size in bytes (``sys.getsizeof`` of it
  and of everything it holds, through collections and objects' ``__dict__``/``__slots__``,
  estimated from a sample of 200 elements for longer collections);
- ``gc_types``: the most numerous object types the garbage collector tracks, and
  ``gc_seconds``/``gc_runs``: time spent in its collections so far, by generation;
- with ``MEMPROFILE_REFERRERS`` = a type name (``WordRecord``), ``referrers``: for 5 live
  objects of that type, the chain of what holds them (first referrer, 10 levels up);
- with ``MEMPROFILE_TRACEMALLOC`` = N > 0, tracemalloc (N frames) traces the allocations
  of a window: from the first snapshot ``MEMPROFILE_TRACEMALLOC_AFTER`` seconds into the
  crawl (default 0) to the first one ``MEMPROFILE_TRACEMALLOC_FOR`` seconds later (default
  0: to the end). Each snapshot of the window holds the ``MEMPROFILE_TOP`` largest sites
  by traceback of what the window allocated and still holds (the growth), and the total
  traced. Tracing slows the crawl down many times over, hence the window.

``python benchmarks/_memsummary.py mem.jsonl`` prints the largest components and
allocation sites at 25/50/75/100 % of the run.
"""

from __future__ import annotations

import gc
import json
import logging
import sys
import time
import tracemalloc
import types
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

SAMPLE = 200
_SKIP_TYPES: tuple[type, ...] = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.FrameType,
    types.CodeType,
    logging.Logger,
)


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _children(obj: Any) -> Iterable[Any] | None:
    """What *obj* holds, or None for a leaf."""
    if isinstance(obj, dict):
        return (x for kv in obj.items() for x in kv)
    if isinstance(obj, list | tuple | set | frozenset) or type(obj).__name__ == "deque":
        return obj
    if isinstance(obj, str | bytes | int | float | bool | type(None)):
        return None
    held = []
    if hasattr(obj, "__dict__") and isinstance(obj.__dict__, dict):
        held.append(obj.__dict__)
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and slot != "__dict__" and hasattr(obj, slot):
                held.append(getattr(obj, slot))
    return held


def deep_size(obj: Any, seen: set[int], depth: int = 12) -> int:
    """Bytes of *obj* and what it holds (not counting what ``seen`` holds already);
    collections longer than :data:`SAMPLE` are estimated from a sample."""
    if id(obj) in seen or isinstance(obj, _SKIP_TYPES) or depth < 0:
        return 0
    if type(obj).__name__ in {"Crawler", "AsyncCrawler"} or (
        hasattr(obj, "crawler") and hasattr(obj, "start_requests")  # the spider itself
    ):
        return 0
    seen.add(id(obj))
    try:
        size = sys.getsizeof(obj)
    except TypeError:
        return 0
    held = _children(obj)
    if held is None:
        return size
    if isinstance(obj, dict | list | tuple | set | frozenset) or type(obj).__name__ == "deque":
        n = len(obj)
        if n > SAMPLE:
            step = n / SAMPLE
            items = list(obj.items()) if isinstance(obj, dict) else list(obj)
            sample = [items[int(i * step)] for i in range(SAMPLE)]
            part = sum(deep_size(x, seen, depth - 1) for x in sample)
            return size + int(part * n / SAMPLE)
    for x in held:
        size += deep_size(x, seen, depth - 1)
    return size


def referrer_chains(type_name: str, chains: int = 5, depth: int = 10) -> list[list[str]]:
    """For a few live objects of the type named *type_name*, what holds them: each chain
    goes from the object up through its first referrer (not a frame) ``depth`` times."""
    objects = gc.get_objects()
    found = [o for o in objects if type(o).__name__ == type_name]
    del objects
    if not found:
        return []
    step = max(1, len(found) // chains)
    picked = found[::step][:chains]
    del found
    out = []
    for obj in picked:
        out.append(_chain(obj, type_name, depth, {id(picked)}))
    return out


def _chain(here: Any, name: str, depth: int, ignore: set[int]) -> list[str]:
    """The chain of first referrers of *here* (plain loops only: a comprehension would
    hold *here* in a closure cell of its own)."""
    chain = [name]
    ignore.add(id(chain))
    for _ in range(depth):
        holders = gc.get_referrers(here)
        ignore.add(id(holders))
        holder = None
        for candidate in holders:
            if id(candidate) not in ignore and not isinstance(candidate, types.FrameType):
                holder = candidate
                break
        del holders
        if holder is None:
            chain.append("(no tracked referrer)")
            break
        label = type(holder).__name__
        if isinstance(holder, dict):
            for key, value in holder.items():
                if value is here:
                    label += f"[{str(key)[:40]!r}]"
                    break
        elif isinstance(holder, list | tuple | set) or label == "deque":
            label += f"(len {len(holder)})"
        elif hasattr(holder, "__qualname__"):
            label += f" {holder.__qualname__}"
        chain.append(label)
        here = holder
    return chain


def _len(value: Any) -> int | None:
    try:
        return len(value)
    except TypeError:
        pass
    queue = getattr(value, "_work_queue", value)  # a ThreadPoolExecutor: its queue
    try:
        return int(queue.qsize())
    except (AttributeError, NotImplementedError, TypeError):
        return None


def _components(crawler: Any) -> dict[str, Any]:
    """Name -> object of each component of the running crawl."""
    engine = crawler.engine
    found: dict[str, Any] = {"spider": crawler.spider, "stats": crawler.stats}
    slot = getattr(engine, "_slot", None) or getattr(engine, "slot", None)
    if slot is not None:
        found["engine.slot"] = slot
        scheduler = slot.scheduler
        found["scheduler"] = scheduler
        for name in ("mqs", "dqs", "df"):
            if getattr(scheduler, name, None) is not None:
                found[f"scheduler.{name}"] = getattr(scheduler, name)
    found["scraper.slot"] = engine.scraper.slot
    found["downloader"] = engine.downloader
    groups = (
        ("pipeline", engine.scraper.itemproc),
        ("spidermw", engine.scraper.spidermw),
        ("downloadermw", engine.downloader.middleware),
        ("extension", crawler.extensions),
    )
    for prefix, manager in groups:
        for mw in getattr(manager, "middlewares", ()):
            if isinstance(mw, MemProfile):
                continue
            found[f"{prefix}.{type(mw).__name__}"] = mw
    return found


def census(crawler: Any) -> list[dict[str, Any]]:
    """Length and deep size of every collection attribute of every component."""
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()
    for name, component in _components(crawler).items():
        attributes = getattr(component, "__dict__", {})
        for attr, value in list(attributes.items()):
            if isinstance(value, _SKIP_TYPES) or _children(value) is None:
                continue
            if attr == "crawler":
                continue
            size = deep_size(value, seen)
            length = _len(value)
            if hasattr(value, "_work_queue"):  # a thread pool: the work waiting for it
                rows.append({"where": f"{name}.{attr} (queued work)", "len": length, "bytes": 0})
            if size < 64 * 1024 and (length or 0) < 1000:
                continue
            rows.append({"where": f"{name}.{attr}", "len": length, "bytes": size})
    rows.sort(key=lambda r: int(r["bytes"]), reverse=True)
    return rows


class MemProfile:
    """Writes a memory snapshot of the crawl every ``MEMPROFILE_INTERVAL`` seconds."""

    def __init__(self, crawler: Any) -> None:
        from twisted.internet import task

        settings = crawler.settings
        self.crawler = crawler
        self.interval = settings.getfloat("MEMPROFILE_INTERVAL", 30.0)
        self.frames = settings.getint("MEMPROFILE_TRACEMALLOC", 0)
        self.top = settings.getint("MEMPROFILE_TOP", 25)
        self.trace_after = settings.getfloat("MEMPROFILE_TRACEMALLOC_AFTER", 0.0)
        self.trace_for = settings.getfloat("MEMPROFILE_TRACEMALLOC_FOR", 0.0)
        self.trace_started: float | None = None
        self.referrers = settings.get("MEMPROFILE_REFERRERS") or ""
        self.gc_seconds = [0.0, 0.0, 0.0]
        self.gc_runs = [0, 0, 0]
        self._gc_began = 0.0
        gc.callbacks.append(self._gc_callback)
        self.path = Path(settings.get("MEMPROFILE_FILE") or "memprofile.jsonl")
        self.started = time.monotonic()
        self.loop = task.LoopingCall(self.snapshot)

    @classmethod
    def from_crawler(cls, crawler: Any) -> MemProfile:
        from scrapy import signals

        ext = cls(crawler)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self, spider: Any) -> None:
        self.started = time.monotonic()
        self._trace_window(self.started)
        self.loop.start(self.interval, now=False)

    def spider_closed(self, spider: Any, reason: str) -> None:
        if self.loop.running:
            self.loop.stop()
        self.snapshot(final=True)
        if tracemalloc.is_tracing():
            tracemalloc.stop()

    def _gc_callback(self, phase: str, info: dict[str, int]) -> None:
        """Time spent in the garbage collector, by generation."""
        if phase == "start":
            self._gc_began = time.perf_counter()
        else:
            self.gc_seconds[info["generation"]] += time.perf_counter() - self._gc_began
            self.gc_runs[info["generation"]] += 1

    def _trace_window(self, now: float) -> None:
        """Start tracing when the window opens."""
        if self.frames <= 0 or self.trace_started is not None:
            return
        if now - self.started >= self.trace_after:
            tracemalloc.start(self.frames)
            self.trace_started = now
            self.trace_responses = self.crawler.stats.get_value("response_received_count", 0)
            logger.info("memprofile: tracemalloc started (%d frames)", self.frames)

    def snapshot(self, final: bool = False) -> None:
        began = time.monotonic()
        stats = self.crawler.stats
        record: dict[str, Any] = {
            "t": round(began - self.started, 1),
            "final": final,
            "rss_mb": round(_rss_mb(), 1),
            "responses": stats.get_value("response_received_count", 0),
            "items": stats.get_value("item_scraped_count", 0),
        }
        try:
            record["components"] = census(self.crawler)[:40]
        except Exception as exc:  # a snapshot must never end the crawl
            record["components_error"] = repr(exc)
        counts = Counter(type(o).__name__ for o in gc.get_objects())
        record["gc_types"] = counts.most_common(20)
        record["gc_seconds"] = [round(x, 2) for x in self.gc_seconds]
        record["gc_runs"] = list(self.gc_runs)
        if self.referrers:
            record["referrers"] = referrer_chains(self.referrers)
        if tracemalloc.is_tracing() and self.trace_started is not None:
            record["traced_for_s"] = round(began - self.trace_started, 1)
            record["traced_responses"] = record["responses"] - self.trace_responses
            snap = tracemalloc.take_snapshot()
            snap = snap.filter_traces(
                (
                    tracemalloc.Filter(False, tracemalloc.__file__),
                    tracemalloc.Filter(False, __file__),
                )
            )
            record["traced_mb"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
            record["by_traceback"] = [
                {
                    "mb": round(s.size / 2**20, 2),
                    "count": s.count,
                    "trace": [f"{f.filename}:{f.lineno}" for f in s.traceback],
                }
                for s in snap.statistics("traceback")[: self.top]
            ]
            record["by_line"] = [
                {"mb": round(s.size / 2**20, 2), "count": s.count, "line": str(s.traceback[0])}
                for s in snap.statistics("lineno")[: self.top]
            ]
            if self.trace_for and began - self.trace_started >= self.trace_for:
                tracemalloc.stop()
                logger.info("memprofile: tracemalloc stopped")
        self._trace_window(began)
        record["snapshot_s"] = round(time.monotonic() - began, 2)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
        logger.info(
            "memprofile: %.0f MB RSS at %s responses (snapshot %.1f s)",
            record["rss_mb"],
            record["responses"],
            record["snapshot_s"],
        )
