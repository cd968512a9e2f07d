"""The indexer's memory through commits and merges, without a crawl.

    python benchmarks/indexmem.py [--docs 20000] [--batch 1000] [--limitmb 4] [--seed 1]
                                  [--mmap] [--no-release] [--tracemalloc] [--phases]
                                  [--crawl-like] [--message 100] [--json FILE]

Feeds :class:`search.index.Index`'s one writer the way the indexer child of a crawl does
(:func:`search.indexer._worker`): a writer per batch of ``--batch`` documents (a crawl's
``INDEX_BATCH_SIZE``), each committed with the index's merge policy, with a writer buffer of
``--limitmb`` (``INDEX_LIMITMB``), then :func:`search.process.release_memory` unless
``--no-release``; ``--mmap`` lets the writer map the segments it reads.  The documents are
those of ``benchmarks/scale.py``'s site, already analyzed: a title (3–9 words), a
description (12–25), keywords (3–6) and a body of ~600 words (log-normal, σ 0.25) drawn from
the Zipf vocabulary of :mod:`_synthetic`, counted per word with the default section weights
(~350 distinct stems a page; a crawl of the site stores ~385 with the URL's words).
With ``--crawl-like`` each page also has its weighted counts per section, its URL's words
and 60–120 words of boilerplate (its links' anchors), and the writer gets them as the
crawl's indexer does: the worker's messages of ``--message`` pages, pickled columns
(:class:`search.doccolumns.DocColumns`) in a file, read by :func:`search.indexer._apply`, each page
made as its message is (without it, a commit's documents are made before it, as objects).

A thread samples the process's RSS every 20 ms; after each commit the script prints the
documents so far, the segments, the RSS after the commit and the peak during it, the
commit's seconds (wall clock and CPU) and whether it merged.  With ``--tracemalloc`` it
also gives the Python heap's peak during each commit and the largest allocation sites of the
largest one.  With ``--phases`` it gives each commit's peak RSS per phase of the writer
(:class:`Phases`: the kernel's ``VmHWM``, reset at each phase's start, so no peak is
missed between samples), and with ``--tracemalloc`` the traced heap's rise per phase too.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import random
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _scalesite as scale  # noqa: E402

import search.index  # noqa: E402
from search.analysis import DEFAULT_WEIGHTS, SECTIONS  # noqa: E402
from search.doccolumns import DocColumns  # noqa: E402
from search.index import Index, IndexDoc  # noqa: E402
from search.indexer import Batch, _apply  # noqa: E402
from search.process import release_memory  # noqa: E402

#: The writer's phases (:class:`Phases`): a name and where it is (class or module,
#: attribute).
PHASES = (
    ("documents", "search.indexwriter", "IncrementalSegmentWriter", "flush_docs"),
    ("merge: read", "search.indexwriter", "IncrementalSegmentWriter", "add_reader"),
    ("other fields", "search.arraycodec", "_FieldWriter", "add_postings"),
    ("posting lists", "search.arraywriter", "ArraySegmentWriter", "_write_words"),
    ("array file", "search.arrayfile", None, "write_arrays"),
)


def status_mb() -> dict[str, float]:
    """The process's RSS, anonymous and file-backed parts, in MB (``/proc/self/status``)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) / 1024
    return out


def rss_mb() -> float:
    return status_mb()["VmRSS"]


class Sampler(threading.Thread):
    """The process's largest RSS since the last :meth:`reset`."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = status_mb()
        self.lock = threading.Lock()

    def run(self) -> None:
        while True:
            now = status_mb()
            with self.lock:
                if now["VmRSS"] > self.peak["VmRSS"]:
                    self.peak = now
            time.sleep(0.02)

    def reset(self) -> dict[str, float]:
        """The sample of the largest RSS since the last reset."""
        with self.lock:
            peak, self.peak = self.peak, status_mb()
        return peak


def vm_hwm_mb() -> float:
    """The process's peak RSS since the last :func:`reset_hwm` (``VmHWM``), in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def reset_hwm() -> None:
    """Start the kernel's peak RSS (``VmHWM``) again from the current RSS."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


class Phases:
    """Each phase's peak RSS (and traced heap's rise, with tracemalloc on) within a commit:
    the writer's functions of :data:`PHASES` are wrapped so that the peak since the last
    switch is credited to the phase that ran (``"other"`` outside them: Whoosh's own
    commit, the merge policy, the table of contents)."""

    def __init__(self) -> None:
        self.stack = ["other"]
        self.peaks: dict[str, float] = {}
        self.rises: dict[str, float] = {}
        self._heap_start = 0.0

    def _switch(self) -> None:
        name = self.stack[-1]
        self.peaks[name] = max(self.peaks.get(name, 0.0), vm_hwm_mb())
        if tracemalloc.is_tracing():
            rise = (tracemalloc.get_traced_memory()[1] - self._heap_start) / 2**20
            self.rises[name] = max(self.rises.get(name, 0.0), rise)
            tracemalloc.reset_peak()
            self._heap_start = tracemalloc.get_traced_memory()[0]
        reset_hwm()

    def reset(self) -> dict[str, Any]:
        self._switch()
        out = {"peak_mb": self.peaks, "heap_rise_mb": self.rises}
        self.peaks, self.rises = {}, {}
        return out

    def install(self) -> None:
        import importlib

        for name, module, cls, attr in PHASES:
            owner = importlib.import_module(module)
            if cls is not None:
                owner = getattr(owner, cls)
            setattr(owner, attr, self._wrap(name, getattr(owner, attr)))

    def _wrap(self, name: str, func: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self._switch()
            self.stack.append(name)
            try:
                return func(*args, **kwargs)
            finally:
                self._switch()
                self.stack.pop()

        return wrapped


class Documents:
    """Analyzed documents of ``scale.py``'s kind (its pages' words, drawn as it draws them)."""

    def __init__(self, seed: int) -> None:
        self.words = scale.Words(seed)
        self.rng = random.Random(seed + 1)

    def _draw(self, k: int) -> list[str]:
        return self.words.draw(k)

    def make(self, docid: int, per_section: bool = False) -> IndexDoc:
        """A page's document; with *per_section*, with its weighted counts per section
        too, and the words of its URL and of its ~30 links' anchors (boilerplate), as a
        crawl of the site indexes it."""
        rng = self.rng
        sections = {
            "title": self._draw(rng.randint(3, 9)),
            "desc": self._draw(rng.randint(12, 25)),
            "keywords": self._draw(rng.randint(3, 6)),
            "body": self._draw(
                max(150, int(rng.lognormvariate(math.log(scale.MEDIAN_WORDS), 0.25)))
            ),
        }
        url = f"http://bench.example/p/{docid // 1000}/{docid}.html"
        if per_section:
            sections["url"] = ["bench", "example", str(docid // 1000), str(docid)]
            sections["boilerplate"] = self._draw(rng.randint(60, 120))
        weights: dict[str, float] = {}
        counts: dict[str, list[float]] = {}
        for section, words in sections.items():
            w = DEFAULT_WEIGHTS[section]
            at = SECTIONS.index(section)
            for word in words:
                weights[word] = weights.get(word, 0.0) + w
                counts.setdefault(word, [0.0] * len(SECTIONS))[at] += w
        if not per_section:
            return IndexDoc(docid, url, "bench.example", weights)
        return IndexDoc(
            docid, url, "bench.example", weights, {k: tuple(v) for k, v in counts.items()}
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--docs", type=int, default=20_000)
    p.add_argument("--batch", type=int, default=1000, help="documents per commit")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--limitmb",
        type=int,
        default=search.index.LIMITMB,
        help="megabytes of postings the writer buffers (INDEX_LIMITMB)",
    )
    p.add_argument("--tracemalloc", action="store_true")
    p.add_argument("--phases", action="store_true", help="peak RSS per phase of each commit")
    p.add_argument("--mmap", action="store_true", help="the writer maps the segments it reads")
    p.add_argument(
        "--no-release", action="store_true", help="no release_memory() after each commit"
    )
    p.add_argument(
        "--crawl-like",
        action="store_true",
        help="documents with counts per section, URL and anchor words, sent as the crawl's\n"
        "worker sends them (pickled columns of --message documents)",
    )
    p.add_argument("--message", type=int, default=100, help="documents a message (100)")
    p.add_argument("--dir", help="index folder (default: a temporary one, removed)")
    p.add_argument("--json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    search.index.WRITER_MMAP = args.mmap
    tmp = tempfile.TemporaryDirectory(prefix="indexmem-") if not args.dir else None
    folder = Path(args.dir or tmp.name)  # type: ignore[union-attr]
    index = Index(folder / "index")
    docs = Documents(args.seed)
    sampler = Sampler()
    sampler.start()
    if args.tracemalloc:
        tracemalloc.start(12)
    phases = Phases() if args.phases else None
    if phases is not None:
        phases.install()
    commits: list[dict[str, Any]] = []
    worst: tuple[float, Any] = (0.0, None)
    started = time.perf_counter()
    print(f"start: RSS {rss_mb():.0f} MB", flush=True)
    for start in range(0, args.docs, args.batch):
        end = min(start + args.batch, args.docs)
        # Crawl-like: made a message at a time, in the commit (the crawl's indexer holds
        # one message's columns, never a commit's documents as objects).
        batch = [] if args.crawl_like else [docs.make(d) for d in range(start, end)]
        sampler.reset()
        if phases is not None:
            phases.reset()
        if args.tracemalloc:
            tracemalloc.reset_peak()
        t0, cpu0 = time.perf_counter(), time.process_time()
        before = [s.segment_id() for s in index.open(create=True)._segments()]
        with index.writer(limitmb=args.limitmb) as writer:
            if args.crawl_like:
                # As the crawl's indexer gets them: the worker's batches, pickled.
                for lo in range(start, end, args.message):
                    part = [docs.make(d, True) for d in range(lo, min(lo + args.message, end))]
                    # As files, as IndexerProcess.send leaves them for the indexer.
                    message = str(folder / "batch")
                    with open(message, "wb") as f:
                        pickle.dump(Batch(DocColumns.of_docs(part), []), f, pickle.HIGHEST_PROTOCOL)
                    del part
                    _apply(writer, message)
            else:
                for doc in batch:
                    writer.add(doc)
        if not args.no_release:
            release_memory()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        by_phase = phases.reset() if phases is not None else None
        segments = index.open()._segments()
        merged = len(set(before) - {s.segment_id() for s in segments})
        row = {
            "docs": end,
            "segments": [s.doc_count() for s in segments],
            "merged": merged,
            "rss_mb": round(rss_mb(), 1),
            **{f"peak_{k}_mb": round(v, 1) for k, v in sampler.reset().items()},
            "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2),
        }
        if by_phase is not None:
            row["phases"] = by_phase
        if args.tracemalloc:
            heap_peak = tracemalloc.get_traced_memory()[1] / 2**20
            row["heap_peak_mb"] = round(heap_peak, 1)
            if heap_peak > worst[0]:
                worst = (heap_peak, tracemalloc.take_snapshot())
        commits.append(row)
        print(
            f"{row['docs']:>7,} docs  {len(segments):>2} segments {row['segments']}  "
            f"merged {merged}  RSS {row['rss_mb']:.0f} MB, peak {row['peak_VmRSS_mb']:.0f} MB "
            f"(anon {row['peak_RssAnon_mb']:.0f}, file {row['peak_RssFile_mb']:.0f})"
            + (f", heap peak {row['heap_peak_mb']:.0f} MB" if args.tracemalloc else "")
            + f"  {seconds:.1f} s (CPU {cpu:.1f} s)",
            flush=True,
        )
        if by_phase is not None:
            rises = by_phase["heap_rise_mb"]
            print(
                "      peak by phase: "
                + ", ".join(
                    f"{k} {v:.0f} MB" + (f" (heap +{rises[k]:.0f})" if k in rises else "")
                    for k, v in by_phase["peak_mb"].items()
                ),
                flush=True,
            )
    total = time.perf_counter() - started
    cpu_total = sum(c["cpu_seconds"] for c in commits)
    peak = max(c["peak_VmRSS_mb"] for c in commits)
    print(
        f"{args.docs:,} documents in {total:.0f} s ({args.docs / total:.0f}/s), commits' CPU "
        f"{cpu_total:.1f} s; peak {peak:.0f} MB"
    )
    if worst[1] is not None:
        print(f"largest heap peak {worst[0]:.0f} MB; its live allocation sites at the end:")
        for stat in worst[1].statistics("lineno")[:12]:
            print(f"  {stat.size / 2**20:7.1f} MB  {stat.traceback[0]}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "args": vars(args),
                    "commits": commits,
                    "seconds": total,
                    "cpu_seconds": cpu_total,
                },
                indent=1,
            )
        )
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
