"""The crawl worker's memory and CPU, without a crawl: batches of synthetic rows fed to it.

    python benchmarks/workermem.py rows --pages 10000 --out rows.pkl [--seed 1]
    python benchmarks/workermem.py run --rows rows.pkl --out run.json
        [--trace 2000,8000] [--trim] [--no-index] [--batch 100]

``rows`` builds the rows the crawler hands to its worker (``scale.py``'s synthetic pages,
extracted by the crawler's ``extract_html``: text, title, links and HTML, not analyzed) and
pickles them in batches of ``--batch``; it imports the crawler's modules, so it runs in its
own process.  ``run`` then is the worker process alone: it imports what the worker imports
(``search.workerprocess``), opens a :class:`search.workerprocess.Worker` on a new SQLite
database and index in a temporary folder (its indexer child included), and writes each
batch as the crawler's calls would (``write`` for each, then the index closed),
sampling after every batch its RSS, its CPU time (user + system, this process only) and
the garbage collector's object count.  It writes the median and peak RSS, the RSS at each
tenth of the run, CPU seconds per page, its RSS by kind of mapping at the end (the C heap,
anonymous mappings, files: ``/proc/self/smaps``), and the samples to ``--out``.
``--arena-max N`` sets glibc's ``M_ARENA_MAX`` (``mallopt``) before the worker opens.

``--trace K1,K2`` takes tracemalloc snapshots after batches K1 and K2 (tracing slows the
run down; its RSS and CPU are not comparable with an untraced run) and writes the 25 lines
that grew most between them (file:line, bytes, blocks) and the 25 largest at K2.
``--trim`` also measures, after every tenth of the run, what ``malloc_trim(0)`` gives
back (RSS before and after: the heap's free memory glibc had kept).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")
BASE = "http://127.0.0.1:8000"


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 1e6


def smaps() -> dict[str, float]:
    """This process's RSS by kind of mapping: the C heap (``[heap]``), anonymous mappings
    (thread arenas, pymalloc's arenas, large blocks), files (shared libraries' pages)."""
    kinds: dict[str, float] = {}
    kind = "anonymous"
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(maxsplit=6)
            if "-" in first[0] and len(first) >= 5 and ":" in first[3]:
                path = first[5].strip() if len(first) > 5 else ""
                kind = (
                    "heap"
                    if path == "[heap]"
                    else ("file" if path.startswith("/") else "anonymous")
                )
                if path.startswith("["):
                    kind = path if path == "[heap]" else "other"
            elif first[0] == "Rss:":
                kinds[kind] = kinds.get(kind, 0.0) + int(first[1]) / 1e3
    return {k: round(v, 1) for k, v in kinds.items()}


def build_rows(pages: int, seed: int, batch: int, out: Path) -> None:
    import hashlib
    from datetime import UTC, datetime

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _scalesite

    from search.servers import ServerConfig
    from spidersite.extract import extract_html

    words = _scalesite.Words(seed)
    rng = random.Random(seed + 1)
    weights = ServerConfig(BASE + "/").weights
    with out.open("wb") as f:
        rows: list[Any] = []
        for n in range(pages):
            url = BASE + _scalesite.page_path(n)
            html = _scalesite._page_html(n, pages, words, rng).encode()
            ex = extract_html(url, html, "utf-8")
            rows.append(
                {
                    "url": url,
                    "server": BASE + "/",
                    "values": {
                        "kind": "page",
                        "status": 200,
                        "content_type": "text/html",
                        "charset": "utf-8",
                        "size": len(html),
                        "hops": 1,
                        "language": ex.language,
                        "title": ex.title,
                        "keywords": ex.keywords,
                        "description": ex.description,
                        "text": ex.text,
                        "word_count": None,
                        "link_count": len(ex.links),
                        "noindex": ex.noindex,
                        "nofollow": ex.nofollow,
                        "last_modified": None,
                        "etag": None,
                        "checksum": hashlib.sha1(html).hexdigest(),
                        "crawled_at": datetime.now(UTC),
                        "change_interval": None,
                        "topic_score": None,
                        "warc_file": None,
                        "warc_offset": None,
                    },
                    "links": [(link.url, link.anchor, link.nofollow) for link in ex.links],
                    "weights": weights,
                    "html": html,
                }
            )
            if len(rows) == batch or n == pages - 1:
                pickle.dump(rows, f, protocol=pickle.HIGHEST_PROTOCOL)
                rows = []


def batches(path: Path) -> Any:
    from search.rows import DocumentRow
    from search.worker import WorkBatch

    with path.open("rb") as f:
        while True:
            try:
                rows = pickle.load(f)
            except EOFError:
                return
            yield WorkBatch(docs=[DocumentRow(**r) for r in rows])


def top(stats: list[Any], n: int = 25) -> list[dict[str, Any]]:
    out = []
    for s in stats[:n]:
        frame = s.traceback[0]
        out.append(
            {
                "where": f"{frame.filename}:{frame.lineno}",
                "kb": round(getattr(s, "size_diff", s.size) / 1e3, 1),
                "blocks": getattr(s, "count_diff", s.count),
                "kb_total": round(s.size / 1e3, 1),
            }
        )
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    import tracemalloc

    t0 = time.monotonic()
    import search.workerprocess as wp
    from search.process import _malloc_trim
    from search.worker import IndexConfig, WorkerConfig

    import_s = time.monotonic() - t0
    if args.arena_max:
        import ctypes

        ctypes.CDLL(None).mallopt(-8, args.arena_max)  # M_ARENA_MAX
    trace = [int(k) for k in args.trace.split(",")] if args.trace else []
    if trace:
        tracemalloc.start(1)
    tmp = Path(tempfile.mkdtemp(prefix="workermem-"))
    index = None if args.no_index else IndexConfig(str(tmp / "index"))
    config = WorkerConfig(f"sqlite:///{tmp / 'db.sqlite'}", index=index)
    rss_start = rss_mb()
    cpu0 = sum(os.times()[:2])
    wp.open_worker(config, "site", {}, [], str(tmp))
    worker = wp._worker
    assert worker is not None
    samples: list[dict[str, Any]] = []
    snaps: dict[int, Any] = {}
    trims: list[dict[str, float]] = []
    pages = 0
    total = args.expect
    for k, batch in enumerate(batches(args.rows), 1):
        if args.batches and k > args.batches:
            break
        pages += len(batch)
        worker.write(batch)
        del batch
        rss = rss_mb()
        samples.append(
            {
                "batch": k,
                "pages": pages,
                "rss_mb": round(rss, 1),
                "cpu_s": round(sum(os.times()[:2]) - cpu0, 2),
                "gc_objects": len(gc.get_objects()) if k % 10 == 0 else None,
            }
        )
        if k % 10 == 0:
            print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
        if k in trace:
            gc.collect()
            snaps[k] = tracemalloc.take_snapshot()
        if args.trim and total and k % max(1, total // 10) == 0 and _malloc_trim is not None:
            before = rss_mb()
            _malloc_trim(0)
            trims.append({"batch": k, "before": round(before, 1), "after": round(rss_mb(), 1)})
    stored_s = sum(os.times()[:2]) - cpu0
    by_kind = smaps()
    worker.close_index()
    worker.finish_crawl("finished", {})
    rss = [s["rss_mb"] for s in samples]
    result: dict[str, Any] = {
        "pages": pages,
        "import_s": round(import_s, 2),
        "rss_after_import_mb": round(rss_start, 1),
        "rss_median_mb": round(statistics.median(rss), 1),
        "rss_peak_mb": max(rss),
        "rss_tenths_mb": [rss[min(len(rss) - 1, len(rss) * i // 10)] for i in range(1, 11)],
        "cpu_s_per_page": round(stored_s / pages, 5),
        "gc_objects_last": next(
            (s["gc_objects"] for s in reversed(samples) if s["gc_objects"]), None
        ),
        "trims": trims,
        "modules": len(sys.modules),
        "smaps_mb": by_kind,
        "samples": samples,
    }
    if len(trace) == 2 and trace[0] in snaps and trace[1] in snaps:
        a, b = snaps[trace[0]], snaps[trace[1]]
        result["grew"] = top(b.compare_to(a, "lineno"))
        result["largest"] = top(b.statistics("lineno"))
        result["traced_mb"] = [
            round(sum(s.size for s in x.statistics("filename")) / 1e6, 1) for x in (a, b)
        ]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rows")
    r.add_argument("--pages", type=int, default=10_000)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--batch", type=int, default=100)
    r.add_argument("--out", type=Path, required=True)
    g = sub.add_parser("run")
    g.add_argument("--rows", type=Path, required=True)
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--trace", default="")
    g.add_argument("--trim", action="store_true")
    g.add_argument("--no-index", action="store_true")
    g.add_argument("--arena-max", type=int, default=0, help="mallopt(M_ARENA_MAX) first")
    g.add_argument("--expect", type=int, default=0, help="batches in --rows (for --trim)")
    g.add_argument("--batches", type=int, default=0, help="stop after this many batches")
    args = parser.parse_args()
    if args.cmd == "rows":
        build_rows(args.pages, args.seed, args.batch, args.out)
        return
    result = run(args)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    brief = {k: v for k, v in result.items() if k not in ("samples",)}
    print(json.dumps(brief, indent=1))


if __name__ == "__main__":
    main()
