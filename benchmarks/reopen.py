"""Queries while commits land: ``python -m search serve`` on an index of N synthetic pages,
answering a stream of queries while another process re-indexes small batches of its pages
and commits them (as a crawl's indexer does every few seconds).

    python benchmarks/reopen.py [--docs 100000] [--batch 100] [--every 2] [--queries 300]

Builds (once; cached under ``benchmarks/.cache/reopen-<docs>-<seed>/``) a data folder: the
product's index of ``query.py``'s synthetic documents (database ids 1..N) and a SQLite
database holding their rows (URL, title, text, a random linkrank), so that ``serve`` shows
hits with titles and snippets and ranks with the link prior as after a crawl.

Then, with ``serve`` on a copy of that folder:

- ``quiet``: the queries (``query.py``'s, typed the way people type them) over one
  kept-alive connection, no commit;
- ``commits``: the same queries while a writer process re-indexes ``--batch`` random pages
  (each with another page's text: changed pages, ``update``) and commits every
  ``--every`` seconds, until ``--commits`` commits have landed.  Each commit's first query
  (the one that opens the new generation) is counted apart: ``after_commit``.

And in this process, the reopen itself: a :class:`search.searcher.Searcher` warmed on the
index, then for each of ``--reopens`` commits the seconds of its next query (which opens
the new generation: the Whoosh searcher, the arrays, the linkranks) and of the same query
asked again, in wall and in CPU seconds (the process's own: what a loaded machine
changes least).

Prints p50/p95 of each, in milliseconds, and the machine's load average.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import query as query_bench  # noqa: E402
from _measure import machine  # noqa: E402
from _searchapi import Api, search_server  # noqa: E402
from _synthetic import make_queries  # noqa: E402
from sqlalchemy import insert  # noqa: E402

from search import db  # noqa: E402
from search.analysis import analyze_document  # noqa: E402
from search.index import Index, IndexDoc  # noqa: E402
from search.models import Document, Server  # noqa: E402

CACHE = ROOT / "benchmarks" / ".cache"


def index_doc(docid: int, title: str, body: str) -> IndexDoc:
    records = analyze_document({"title": title, "body": body})
    return IndexDoc.from_records(
        docid, f"http://bench.example/{docid}", "bench.example", records.values()
    )


def build(folder: Path, docs: list[tuple[str, str]], seed: int) -> None:
    """The data folder: the index (ids 1..N) and the database of *docs*."""
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    engine = db.connect(f"sqlite:///{tmp / 'spidersite.db'}")
    rng = random.Random(seed)
    with engine.begin() as conn:
        server = conn.execute(
            insert(Server).returning(Server.id),
            {"url": "http://bench.example/", "settings": {}, "net_errors": 0, "disabled": False},
        ).scalar_one()
        for start in range(0, len(docs), 5_000):
            conn.execute(
                insert(Document),
                [
                    {
                        "id": i + 1,
                        "url": f"http://bench.example/{i + 1}",
                        "server_id": server,
                        "kind": "page",
                        "status": 200,
                        "content_type": "text/html",
                        "title": title,
                        "text": body,
                        "linkrank": rng.random(),
                        "indexed": True,
                    }
                    for i, (title, body) in enumerate(docs[start : start + 5_000], start)
                ],
            )
    engine.dispose()
    index = Index(tmp / "index")
    for start in range(0, len(docs), query_bench.BATCH):
        with index.writer(limitmb=256) as writer:
            for i in range(start, min(start + query_bench.BATCH, len(docs))):
                writer.add(index_doc(i + 1, *docs[i]), update=False)
        print(f"  index: {min(start + query_bench.BATCH, len(docs)):,} documents", flush=True)
    tmp.rename(folder)


def changed(
    docs: list[tuple[str, str]], batch: int, rng: random.Random
) -> list[tuple[int, tuple[str, str]]]:
    """*batch* random pages, each with a changed text (another page's): re-crawled pages
    whose text changed, so that the index's average lengths change too."""
    return [(i, docs[rng.randrange(len(docs))]) for i in rng.sample(range(len(docs)), batch)]


def committer(
    index_path: str, docs: list[tuple[str, str]], batch: int, every: float, seed: int, log: Any
) -> None:
    """Re-index *batch* random pages and commit, every *every* seconds, until killed."""
    rng = random.Random(seed)
    index = Index(Path(index_path))
    while True:
        started = time.monotonic()
        with index.writer() as writer:
            for i, text in changed(docs, batch, rng):
                writer.add(index_doc(i + 1, *text), update=True)
        log.put((time.time(), time.monotonic() - started))
        time.sleep(max(0.0, every - (time.monotonic() - started)))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50_ms": round(pct(values, 50) * 1000, 1),
        "p95_ms": round(pct(values, 95) * 1000, 1),
        "max_ms": round(max(values) * 1000, 1),
    }


def run_queries(api: Api, queries: list[str]) -> list[tuple[float, float]]:
    """(wall time it ended, seconds) of each query."""
    out = []
    for q in queries:
        seconds, _ = api.search(q)
        out.append((time.time(), seconds))
    return out


def reopens(
    data: Path, docs: list[tuple[str, str]], queries: list[str], batch: int
) -> dict[str, list[float]]:
    """Seconds (wall and this process's CPU) of a warmed Searcher's first query after
    each commit of *batch* changed pages (one commit a query of *queries*), and of the same
    query asked again."""
    from search.query import parse_query
    from search.searcher import Searcher

    engine = db.connect(f"sqlite:///{data / 'spidersite.db'}", upgrade=False)
    index = Index(data / "index")
    searcher = Searcher(engine, index)
    searcher.warm()
    rng = random.Random(7)
    out: dict[str, list[float]] = {"first": [], "first_cpu": [], "again": [], "again_cpu": []}
    for text in queries:
        with index.writer() as writer:
            for i, changed_text in changed(docs, batch, rng):
                writer.add(index_doc(i + 1, *changed_text), update=True)
        q = parse_query(text)
        for name in ("first", "again"):
            wall, cpu = time.perf_counter(), time.process_time()
            searcher.search(q)
            out[name].append(time.perf_counter() - wall)
            out[name + "_cpu"].append(time.process_time() - cpu)
    searcher.close()
    engine.dispose()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=int, default=100, help="pages re-indexed a commit")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between commits")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--commits", type=int, default=30, help="commits queried through")
    parser.add_argument("--reopens", type=int, default=30, help="commits timed in-process")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    vocab, docs = query_bench.documents(args.docs, args.seed)
    cached = CACHE / f"reopen-{args.docs}-{args.seed}"
    if not cached.exists():
        started = time.perf_counter()
        build(cached, docs, args.seed)
        print(f"built in {time.perf_counter() - started:.0f} s", flush=True)
    if args.build_only:
        return 0
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"reopen-{os.getpid()}"
    shutil.copytree(cached, work)
    report: dict[str, Any] = {"docs": args.docs, "batch": args.batch, "every_s": args.every}
    report["machine"] = machine()
    report["load_before"] = os.getloadavg()
    queries = make_queries(vocab, args.queries, args.seed)
    try:
        with search_server(work, work / "serve.log") as port:
            api = Api(port)
            for q in queries[:20]:  # warm
                api.search(q)
            quiet = run_queries(api, queries)
            log: Any = multiprocessing.Queue()
            writer = multiprocessing.Process(
                target=committer,
                args=(str(work / "index"), docs, args.batch, args.every, args.seed, log),
            )
            writer.start()
            commits: list[tuple[float, float]] = []
            busy: list[tuple[float, float]] = []
            try:
                commits.append(log.get(timeout=600))  # the first commit landed
                while len(commits) < args.commits:
                    busy += run_queries(api, queries[len(busy) % len(queries) :][:10])
                    while not log.empty():
                        commits.append(log.get())
            finally:
                writer.terminate()
                writer.join()
        # A query begun after a commit ended opens the new generation (the first such).
        ends = sorted(t for t, _ in commits)
        first, rest = [], []
        seen = ends[0]
        for end, seconds in busy:
            started = end - seconds
            landed = [t for t in ends if seen < t <= started]
            if landed:
                seen = landed[-1]
                first.append(seconds)
            else:
                rest.append(seconds)
        report["quiet"] = summary([s for _, s in quiet])
        report["commits"] = summary([s for _, s in busy])
        report["after_commit"] = summary(first)
        report["between_commits"] = summary(rest)
        report["commit_s"] = summary([s for _, s in commits])
        for name, values in reopens(work, docs, queries[: args.reopens], args.batch).items():
            report[f"reopen_{name}"] = summary(values)
        report["load_after"] = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for key, value in report.items():
        print(f"{key}: {value}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    keys = ("quiet", "commits", "after_commit", "reopen_first_cpu", "reopen_again_cpu")
    print(json.dumps({k: report[k] for k in keys}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
