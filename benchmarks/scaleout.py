"""Scale-out at size: one crawl process against several on one shared frontier.

    python benchmarks/scaleout.py [--pages 20000] [--seed 1] [--nodes 2]
                                  [--redis redis://127.0.0.1:6379/15]
                                  [--postgres postgresql+psycopg://127.0.0.1:5432/postgres]
                                  [--node-cpus C] [--json FILE] [--keep] [--timeout S]

``scale.py``'s synthetic site (generated once, served by nginx) is crawled twice, each time
into a fresh PostgreSQL database and on a fresh crawl key in Redis, as README's "Scaling
out" runs it: first by one ``scrapy crawl site`` process, then by ``--nodes`` processes
started together (``SCALEOUT_REDIS_URL``, ``INDEX_ENABLED=False``), each time with one
``python -m search reindex --follow --interval 1`` beside them feeding the index.  The
database is polled every half second: the time until every page is stored, and until
every page is indexed (searchable), from the start of the crawl processes.  It prints
stored and searchable pages/s of each run, their ratio (issue 13's target: ≥ 1.6 with two
processes), the pages fetched by all processes together against the site's (each page
must be fetched and stored exactly once), the peak RSS of everything started, and the
machine's cores busy over each run.  At each poll it also samples what the database's
other backends are doing (``pg_stat_activity``: on the CPU or the event they wait on, and
the first words of their statement) and prints the most frequent of each run.

On one machine the nodes share its cores with each other, the database and the indexer:
where one crawl process already keeps every core busy, a second cannot add pages/s.
``--node-cpus C`` holds each crawl process (with its helper processes) to C CPUs in a
cgroup of its own, as if each node ran on a machine of C CPUs, to measure what the shared
parts (Redis's frontier, one PostgreSQL, one indexer) allow: e.g. ``--node-cpus 0.6`` on
2 cores leaves 0.8 CPU to them with two nodes.

The exit status is 1 when a run fails or a page is missing or stored twice, never because
the ratio is missed.  Needs PostgreSQL and Redis (as the test suite does).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _corpus
import _measure
import crawl
from _postgres import DEFAULT_ADMIN_URL, drop_database, fresh_database
from _scalesite import generate_site, page_path
from sqlalchemy import text

from search import db

RATIO_TARGET = 1.6
POLL = 0.5
#: The database's active backends at one poll: on the CPU or the event waited on, and
#: the first words of the statement.
ACTIVITY = text(
    "SELECT coalesce(wait_event_type || '/' || wait_event, 'CPU'), "
    "left(regexp_replace(query, '\\s+', ' ', 'g'), 40) FROM pg_stat_activity "
    "WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()"
)
#: How many of the most frequent are reported.
ACTIVITY_TOP = 8
CGROUP_V1 = Path("/sys/fs/cgroup/cpu")
CGROUP_V2 = Path("/sys/fs/cgroup")


def cpu_times() -> tuple[int, int]:
    """The machine's (busy, total) CPU time so far, in clock ticks (``/proc/stat``)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


class CpuLimit:
    """A cgroup that holds a crawl process and its helpers to *cpus* CPUs (CFS quota, as
    a container's ``--cpus`` does): one node of a scaled-out crawl as if on a machine of
    its own that size.  cgroup v2 or v1's ``cpu`` controller; needs root."""

    def __init__(self, name: str, cpus: float) -> None:
        period = 100_000
        quota = max(1000, int(cpus * period))
        if (CGROUP_V2 / "cgroup.controllers").exists():
            self.path = CGROUP_V2 / name
            self.path.mkdir()
            (self.path / "cpu.max").write_text(f"{quota} {period}")
        elif CGROUP_V1.is_dir():
            self.path = CGROUP_V1 / name
            self.path.mkdir()
            (self.path / "cpu.cfs_period_us").write_text(str(period))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            raise SystemExit("--node-cpus needs a cgroup cpu controller (/sys/fs/cgroup)")

    def enter(self) -> None:
        """Move the calling process into the group (a child's ``preexec_fn``)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        with contextlib.suppress(OSError):  # a process still in it: left for the system
            self.path.rmdir()


def run_nodes(
    nodes: int, seeds: list[str], args: argparse.Namespace, work: Path, tag: str
) -> dict[str, Any]:
    """Crawl the site with *nodes* processes on one shared frontier; the figures."""
    name = f"spidersite_scaleout_{tag}_{os.getpid()}"
    db_url = fresh_database(args.postgres, name)
    db.connect(db_url).dispose()  # the schema, before anything polls it
    key = f"bench-scaleout-{tag}-{os.getpid()}"
    settings = [
        f"SCALEOUT_REDIS_URL={args.redis}",
        "SCALEOUT_IDLE_TIMEOUT=10",
        "INDEX_ENABLED=False",
        f"STORE_DATABASE_URL={db_url}",
    ]
    env = crawl.clean_env()
    procs: list[subprocess.Popen[bytes]] = []
    limits: list[CpuLimit] = []
    figures: dict[str, Any] = {"nodes": nodes, "pages": args.pages, "node_cpus": args.node_cpus}
    engine = db.create(db_url)
    start = time.monotonic()
    busy0, total0 = cpu_times()
    try:
        for n in range(nodes):
            data = work / f"{tag}-node{n}"
            data.mkdir()
            cmd = crawl.product_command(
                data, data / "crawl.log", settings, "-a", "seeds=" + ",".join(seeds),
                "-a", f"crawl_key={key}",
            )  # fmt: skip
            enter = None
            if args.node_cpus:
                limits.append(
                    CpuLimit(f"spidersite-scaleout-{os.getpid()}-{tag}{n}", args.node_cpus)
                )
                enter = limits[-1].enter
            with (data / "stderr.txt").open("wb") as err:
                procs.append(
                    subprocess.Popen(
                        cmd, cwd=_corpus.REPO_ROOT, env=env, stderr=err, preexec_fn=enter
                    )
                )
            if n == 0:
                time.sleep(1.0)  # the first pushes the seeds; the others find the crawl
        index_dir = work / f"{tag}-index"
        follower = subprocess.Popen(
            [sys.executable, "-m", "search", "reindex", "--follow", "--interval", "1",
             "--no-linkrank", "--database-url", db_url, "--index-dir", str(index_dir)],
            cwd=_corpus.REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
            stderr=(work / f"{tag}-follow.txt").open("wb"),
        )  # fmt: skip
        peak = 0.0
        stored_at = searchable_at = None
        activity: Counter[tuple[str, str]] = Counter()
        polls = 0
        while time.monotonic() - start < args.timeout:
            peak = max(peak, sum(_measure.tree_rss_mb(p.pid) for p in [*procs, follower]))
            with engine.connect() as conn:
                stored, indexed = conn.execute(
                    text("SELECT count(*), count(*) FILTER (WHERE indexed) FROM documents")
                ).one()
                activity.update((str(w), str(q)) for w, q in conn.execute(ACTIVITY))
            polls += 1
            now = time.monotonic() - start
            if stored_at is None and stored >= args.pages:
                stored_at = now
            if searchable_at is None and indexed >= args.pages:
                searchable_at = now
            crawling = any(p.poll() is None for p in procs)
            if searchable_at is not None and not crawling:
                break
            if not crawling and follower.poll() is not None:
                break
            time.sleep(POLL)
        busy1, total1 = cpu_times()
        follower.send_signal(signal.SIGTERM)  # SIGINT is ignored when run in the background
        follower.wait(60)
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        with engine.connect() as conn:
            count, distinct = conn.execute(
                text("SELECT count(*), count(DISTINCT url) FROM documents")
            ).one()
            stats = [row[0] for row in conn.execute(text("SELECT stats FROM crawls"))]
        fetched = sum(int(s.get("response_received_count") or 0) for s in stats)
        robots = sum(int(s.get("robotstxt/response_count") or 0) for s in stats)
        figures.update(
            exit_codes=[p.returncode for p in procs],
            documents=count,
            distinct_urls=distinct,
            fetched=fetched - robots,
            stored_s=stored_at,
            searchable_s=searchable_at,
            stored_per_s=crawl.rate(args.pages, stored_at),
            searchable_per_s=crawl.rate(args.pages, searchable_at),
            peak_rss_mb=round(peak, 1),
            popped=[s.get("scaleout/popped") for s in stats],
            # The machine's cores busy over the run (every process, the database's too).
            cores_busy=round((busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1), 2),
            polls=polls,
            db_activity=[[n, w, q] for (w, q), n in activity.most_common(ACTIVITY_TOP)],
        )
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for limit in limits:
            limit.remove()
        engine.dispose()
        if not args.keep:
            drop_database(args.postgres, name)
    return figures


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=20_000, help="pages of the site (20000)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the site's text (1)")
    ap.add_argument("--nodes", type=int, default=2, help="processes of the shared crawl (2)")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/15", help="Redis URL")
    ap.add_argument(
        "--postgres",
        default=DEFAULT_ADMIN_URL,
        help="a PostgreSQL database URL; the runs' databases are created beside it",
    )
    ap.add_argument(
        "--node-cpus",
        type=float,
        default=0.0,
        metavar="C",
        help="hold each crawl process and its helpers to C CPUs (a cgroup's CFS quota; "
        "root): each node as if on a machine of its own, the database, Redis, nginx and "
        "the indexer sharing what is left (default: no limit)",
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep the data folders and databases")
    ap.add_argument("--timeout", type=float, default=7200, help="seconds allowed per run")
    args = ap.parse_args(argv)
    if args.pages < 1 or args.nodes < 2:
        ap.error("--pages must be at least 1 and --nodes at least 2")
    if args.node_cpus < 0:
        ap.error("--node-cpus must be 0 (no limit) or more")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = generate_site(args.pages, args.seed)
    server = _corpus.ensure_server_kind()
    work = Path(tempfile.mkdtemp(prefix="spidersite-bench-scaleout-"))
    load = os.getloadavg()
    runs: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    with _corpus.serve(root, server) as base_url:
        seeds = [urllib.parse.urljoin(base_url, page_path(0))]
        print(f"serving {root} at {base_url} ({server})", flush=True)
        for tag, nodes in (("one", 1), ("many", args.nodes)):
            print(f"crawling with {nodes} process(es) ...", flush=True)
            run = runs[tag] = run_nodes(nodes, seeds, args, work, tag)
            if run["documents"] != args.pages or run["distinct_urls"] != run["documents"]:
                problems.append(f"{tag}: {run['documents']} documents of {args.pages} pages")
            if run["searchable_s"] is None:
                problems.append(f"{tag}: not every page became searchable")
            if any(code != 0 for code in run["exit_codes"]):
                problems.append(f"{tag}: exit codes {run['exit_codes']}")
    one, many = runs["one"], runs["many"]
    ratio = (
        many["searchable_per_s"] / one["searchable_per_s"]
        if many["searchable_per_s"] and one["searchable_per_s"]
        else None
    )
    print(f"\n{args.pages:,} pages ({server}); load {load} -> {os.getloadavg()}")
    for tag in ("one", "many"):
        r = runs[tag]
        print(
            f"  {r['nodes']} process(es): stored {r['stored_per_s'] or 0:.1f} pages/s, "
            f"searchable {r['searchable_per_s'] or 0:.1f} pages/s; fetched {r['fetched']:,}, "
            f"stored {r['documents']:,} ({r['distinct_urls']:,} distinct); "
            f"peak RSS {r['peak_rss_mb']:.0f} MB; taken from the queue {r['popped']}; "
            f"cores busy {r['cores_busy']} of {os.cpu_count()}"
        )
        print(f"    the database's active backends over {r['polls']} polls, most frequent:")
        for n, wait, statement in r["db_activity"]:
            print(f"    {n:6d}  {wait:<28} {statement}")
    verdict = "-" if ratio is None else ("met" if ratio >= RATIO_TARGET else "NOT met")
    shown = "-" if ratio is None else f"{ratio:.2f}"
    print(f"  searchable ratio {shown} (target {RATIO_TARGET}): {verdict}")
    if args.json:
        figures = {
            "benchmark": "scaleout",
            "measured_at": datetime.now(tz=UTC).isoformat(timespec="seconds"),
            "machine": _measure.machine(),
            "load": load,
            "runs": runs,
            "ratio": ratio,
            "problems": problems,
        }
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
    for problem in problems:
        print(f"problem: {problem}")
    if args.keep or problems:
        print(f"\nlogs and data kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
