"""Crawl and search at size: a synthetic site of N pages, the plain CrawlSpider, the product.

    python benchmarks/scale.py [--pages 100000] [--seed 1] [--skip-baseline] [--skip-product]
                               [--skip-queries] [--skip-reindex] [--recrawl] [--queries 300]
                               [--set NAME=VALUE ...] [--postgres [ADMIN_URL]]
                               [--json FILE] [--keep] [--timeout S]

1. A site of ``--pages`` pages is generated once into ``benchmarks/.cache/scale/`` (reused
   while ``--pages`` and ``--seed`` match): each page has a title, a meta description and
   keywords, ~600 words of body text drawn from a Zipf vocabulary (that of
   ``benchmarks/query.py``), ~30 links, and one marker word found on that page only. Page
   0 is ``/index.html``, page *n* is ``/p/<n // 1000>/<n>.html``; page *n* links to its
   parent ``(n - 1) // 8``, its children ``8n + 1 … 8n + 8`` (so every page is reachable
   from page 0 in at most log₈ N hops), page *n + 1*, and random pages up to 30 links.
2. The site is served on 127.0.0.1 by nginx (``apt-get install nginx-light`` when it is
   missing and we may; otherwise Python's ``http.server``, with a warning).
3. The baseline (``_plain_spider.py``) and the product (``scrapy crawl site``) crawl it
   from page 0, each in its own subprocess whose whole process tree's RSS is sampled every
   second: pages/s (downloaded; for the product also stored and searchable, read from its
   database as ``crawl.py`` does), peak RSS, RSS at 25/50/75/100 % of the run and the
   growth over its second half.
4. The product's index is served (``python -m search serve``): a sample of marker words
   must each find their own page first; then ``/api/search`` latency, the first query of
   the fresh server and p50/p95 of ``--queries`` warm ones (1-5 vocabulary words), and the
   first query of a fresh CLI process (``python -m search query --json``).
5. ``python -m search reindex`` rebuilds the index from the database: documents/s.
6. With ``--recrawl``, the product re-crawls the unchanged site (``-a recrawl=all``:
   conditional GET with each page's ETag and Last-Modified): the bodies it downloaded
   (target 0), its time against the first crawl's (target at most a third), its RSS.

With ``--postgres``, the product stores into a fresh PostgreSQL database created beside
*ADMIN_URL* (default ``postgresql+psycopg://127.0.0.1:5432/postgres``; dropped at the end
unless ``--keep``) instead of the data folder's SQLite file, and every step above uses it
(``DATABASE_URL``); the disk use is then ``pg_database_size`` and the index folder, and the
PostgreSQL server's own memory (the proportional set size of its processes, sampled every
5 s) is reported beside the process tree's, which does not include the server.

It prints every figure and issue 13's targets, met or not. The exit status is 1 when a run
fails or a check of correctness does (a page not stored, a marker not found), never
because a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import urllib.parse
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _corpus
import _measure
import _postgres
import _synthetic
import crawl
from _recrawl import run_recrawl
from _scalesite import MARKERS, Words, generate_site, marker, page_path
from _searchapi import (
    Api,
    cli_first_query,
    describe_page_cache,
    index_generation,
    measure_queries,
    page_cache,
    search_server,
)

SAMPLE_INTERVAL = 1.0

# Issue 13's targets.
PEAK_TARGET_MB = 500.0
GROWTH_TARGET = 0.10
SEARCHABLE_TARGET = 1.0
P95_TARGET_MS = 20.0
FIRST_QUERY_EXTRA_MS = 200.0
REINDEX_TARGET = 1000.0
RECRAWL_TIME_TARGET = 1 / 3

# -- memory over time ------------------------------------------------------------------


def rss_profile(timeline: list[tuple[float, float, float]]) -> dict[str, Any]:
    """RSS of the whole tree at 25/50/75/100 % of the run, and its growth over the second
    half: (the largest RSS after 50 %) / (RSS at 50 %) - 1, the target's figure; and the
    growth of its peaks, (the largest RSS after 50 %) / (the largest from 25 to 50 %) - 1,
    which does not depend on where in its rise and fall between two batches the one
    sample at 50 % lands (the tree's RSS swings by 10 % within seconds)."""
    if not timeline:
        return {}
    end = timeline[-1][0]

    def at(fraction: float) -> float:
        moment = fraction * end
        return min(timeline, key=lambda s: abs(s[0] - moment))[1]

    at_half = at(0.5)
    second_half = max(s[1] for s in timeline if s[0] >= 0.5 * end)
    # (A run of a few seconds, sampled once a second, may have no sample from 25 to 50 %:
    # then the one at 50 %.)
    second_quarter = max(
        (s[1] for s in timeline if 0.25 * end <= s[0] < 0.5 * end), default=at_half
    )
    return {
        "rss_at_mb": {f"{p}%": round(at(p / 100), 1) for p in (25, 50, 75, 100)},
        "growth_second_half": (second_half / at_half - 1) if at_half else None,
        "growth_of_peaks": (second_half / second_quarter - 1) if second_quarter else None,
        "samples": len(timeline),
    }


# -- the index served ------------------------------------------------------------------


def check_markers(api: Api, base_url: str, pages: int, seed: int) -> dict[str, Any]:
    """Search a sample of markers; each must find its own page first."""
    sample = random.Random(seed + 2).sample(range(pages), min(MARKERS, pages))
    missed = []
    for n in sample:
        _, answer = api.search(marker(n), n=3)
        hits = answer.get("hits") or []
        expected = urllib.parse.urljoin(base_url, page_path(n))
        if not hits or hits[0].get("url") != expected:
            missed.append({"page": n, "marker": marker(n), "got": [h.get("url") for h in hits]})
    return {"checked": len(sample), "found": len(sample) - len(missed), "missed": missed[:10]}


def run_reindex(
    data: Path, work: Path, documents: int, timeout: float, database_url: str | None = None
) -> dict[str, Any]:
    measured = _measure.run_measured(
        [sys.executable, "-m", "search", "reindex", "--quiet", "--data-dir", str(data)],
        cwd=_corpus.REPO_ROOT,
        env=crawl.clean_env(database_url),
        stdout_path=work / "reindex-stdout.txt",
        stderr_path=work / "reindex-stderr.txt",
        timeout=timeout,
        interval=SAMPLE_INTERVAL,
    )
    if measured.returncode != 0 or measured.timed_out:
        raise RuntimeError(
            f"python -m search reindex failed (code {measured.returncode}, timed out: "
            f"{measured.timed_out}):\n" + crawl.tail(work / "reindex-stderr.txt")
        )
    return {
        "seconds": measured.wall_s,
        "docs_per_s": documents / measured.wall_s,
        "peak_rss_mb": measured.tree_peak_rss_mb,
    }


def disk_use(data: Path, documents: int, database_url: str | None = None) -> dict[str, Any]:
    """The database's size (the SQLite file with its journal, or ``pg_database_size``) and
    the index folder's, in MB, and their sum a page in kB."""

    def size(path: Path) -> int:
        if path.is_file():
            return path.stat().st_size
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())

    if database_url:
        db = _postgres.database_bytes(database_url)
    else:
        db = sum(size(p) for p in data.glob("spidersite.db*"))
    index = size(data / "index") if (data / "index").exists() else 0
    return {
        "database_mb": db / 1e6,
        "index_mb": index / 1e6,
        "kb_per_page": (db + index) / 1e3 / documents if documents else None,
    }


# -- report ----------------------------------------------------------------------------


@dataclass
class Report:
    pages: int
    seed: int
    server: str
    load_start: tuple[float, float, float]
    #: ``sqlite`` (the data folder's file) or ``postgresql`` (``--postgres``) ...
    database: str = "sqlite"
    #: ... and then the name of the run's database.
    database_name: str | None = None
    load_end: tuple[float, float, float] | None = None
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    markers: dict[str, Any] | None = None
    latency: dict[str, Any] | None = None
    #: The data folder's files in the page cache when the server started.
    page_cache: dict[str, Any] | None = None
    reindex: dict[str, Any] | None = None
    disk: dict[str, Any] | None = None
    #: What the unchanged re-crawl downloaded (responses by status, bytes, changed pages).
    recrawl: dict[str, Any] | None = None
    #: With ``--postgres``: the server's memory (PSS of its processes, MB) over the run.
    postgres_memory: dict[str, float] | None = None
    targets: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def run_figures(result: crawl.RunResult) -> dict[str, Any]:
    figures = asdict(result)
    timeline = figures.pop("rss_timeline")
    figures.pop("stats")
    figures.update(rss_profile(timeline))
    figures["rss_timeline"] = [[round(t, 1), round(tree, 1)] for t, tree, _ in timeline]
    return figures


def targets(report: Report) -> dict[str, Any]:
    """Issue 13's targets, each ``{value, target, met}`` (``met`` None when not measured)."""
    product = report.runs.get("product", {})
    baseline = report.runs.get("baseline", {})
    latency = report.latency or {}
    out: dict[str, Any] = {}

    def put(name: str, value: float | None, target: float, at_most: bool) -> None:
        met = None if value is None else (value <= target if at_most else value >= target)
        out[name] = {"value": value, "target": target, "met": met}

    put("peak RSS MB (whole tree)", product.get("tree_peak_rss_mb"), PEAK_TARGET_MB, True)
    put("RSS growth, second half", product.get("growth_second_half"), GROWTH_TARGET, True)
    base, searchable = baseline.get("pages_per_s"), product.get("searchable_per_s")
    ratio = searchable / base if base and searchable else None
    put("searchable pages/s / baseline pages/s", ratio, SEARCHABLE_TARGET, False)
    put("/api/search p95 ms (warm)", latency.get("p95_ms"), P95_TARGET_MS, True)
    first_extra = (
        latency["first_ms"] - latency["p50_ms"]
        if "first_ms" in latency and "p50_ms" in latency
        else None
    )
    put("first query - warm p50, ms (web)", first_extra, FIRST_QUERY_EXTRA_MS, True)
    cli_extra = (
        latency["cli_query_ms"] - latency["p50_ms"]
        if "cli_query_ms" in latency and "p50_ms" in latency
        else None
    )
    put("first query - warm p50, ms (CLI)", cli_extra, FIRST_QUERY_EXTRA_MS, True)
    put("reindex documents/s", (report.reindex or {}).get("docs_per_s"), REINDEX_TARGET, False)
    again = report.runs.get("recrawl", {})
    put("re-crawl page bodies downloaded", (report.recrawl or {}).get("page_bodies"), 0, True)
    first, second = product.get("elapsed_s"), again.get("elapsed_s")
    time_ratio = second / first if first and second else None
    put("re-crawl time / first crawl time", time_ratio, RECRAWL_TIME_TARGET, True)
    return out


def fmt(value: Any, pattern: str = "{:,.1f}") -> str:
    return "-" if value is None else pattern.format(value)


def print_report(report: Report) -> None:
    print()
    print(
        f"{report.pages:,} pages, served by {report.server}, stored in {report.database}; "
        f"load {report.load_start} -> {report.load_end}"
    )
    for name, run in report.runs.items():
        print(f"\n{name}: {run['run']}")
        print(
            f"  responses {fmt(run['responses'], '{:,}')}, documents "
            f"{fmt(run['documents'], '{:,}')}, elapsed {fmt(run['elapsed_s'])} s, wall "
            f"{fmt(run['wall_s'])} s"
        )
        print(
            f"  pages/s downloaded {fmt(run['pages_per_s'])}, stored {fmt(run['stored_per_s'])}, "
            f"searchable {fmt(run['searchable_per_s'])}"
        )
        print(
            f"  peak RSS {fmt(run['tree_peak_rss_mb'], '{:,.0f}')} MB whole tree, "
            f"{fmt(run['main_peak_rss_mb'], '{:,.0f}')} MB main process; RSS at "
            + ", ".join(f"{k} {v:,.0f}" for k, v in run.get("rss_at_mb", {}).items())
            + f" MB; growth over the second half {fmt(run.get('growth_second_half'), '{:+.0%}')}"
            + f" (of its peaks {fmt(run.get('growth_of_peaks'), '{:+.0%}')})"
        )
        if run["message"]:
            print(f"  {run['message']}")
    if report.markers:
        print(f"\nmarkers: {report.markers['found']}/{report.markers['checked']} found their page")
    if report.latency:
        lat = report.latency
        print(
            f"/api/search: first {fmt(lat.get('first_ms'))} ms, warm p50 {fmt(lat.get('p50_ms'))}"
            f" / p95 {fmt(lat.get('p95_ms'))} ms over {lat.get('queries')} queries; CLI first "
            f"query {fmt(lat.get('cli_query_ms'))} ms (process {fmt(lat.get('cli_wall_s'))} s)"
        )
        print(f"  {describe_page_cache(report.page_cache)}, when the server started")
        after = lat.get("index_generation_after")
        if report.page_cache and after != report.page_cache.get("generation"):
            print(f"  the index changed while the queries ran: generation {after} after them")
    if report.reindex:
        r = report.reindex
        print(
            f"reindex: {fmt(r['seconds'])} s, {fmt(r['docs_per_s'])} documents/s, peak RSS "
            f"{fmt(r['peak_rss_mb'], '{:,.0f}')} MB"
        )
    if report.recrawl:
        r = report.recrawl
        print(
            f"re-crawl: {r['page_bodies']:,} page bodies ({r['status_200']:,} responses 200 with "
            f"robots.txt), {r['status_304']:,} not modified "
            f"(304), {r['response_bytes']:,} bytes received, {r['changed']:,} pages changed"
        )
    if report.postgres_memory:
        m = report.postgres_memory
        print(
            f"PostgreSQL server (not in the process tree): PSS of its processes "
            f"{fmt(m['first_mb'], '{:,.0f}')} MB at the start, peak "
            f"{fmt(m['peak_mb'], '{:,.0f}')} MB, {fmt(m['last_mb'], '{:,.0f}')} MB at the end"
        )
    if report.disk:
        d = report.disk
        print(
            f"disk: database {fmt(d['database_mb'])} MB, index {fmt(d['index_mb'])} MB, "
            f"{fmt(d['kb_per_page'])} kB a page"
        )
    print("\nissue 13's targets:")
    for name, entry in report.targets.items():
        verdict = {None: "not measured", True: "met", False: "NOT met"}[entry["met"]]
        value = "-" if entry["value"] is None else f"{entry['value']:,.3g}"
        print(f"  {name}: {value} (target {entry['target']:g}): {verdict}")
    for problem in report.problems:
        print(f"\nproblem: {problem}")


# -- main ------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=100_000, help="pages of the site (100000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the site's text (1)")
    parser.add_argument("--skip-baseline", action="store_true", help="no plain CrawlSpider")
    parser.add_argument("--skip-product", action="store_true", help="no product crawl")
    parser.add_argument("--skip-queries", action="store_true", help="no latency measurement")
    parser.add_argument("--skip-reindex", action="store_true", help="no reindex")
    parser.add_argument(
        "--recrawl", action="store_true", help="then re-crawl the unchanged site (recrawl=all)"
    )
    parser.add_argument("--queries", type=int, default=300, help="warm queries timed (300)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Scrapy setting for the product's crawl (repeatable)",
    )
    parser.add_argument(
        "--postgres",
        nargs="?",
        const=_postgres.DEFAULT_ADMIN_URL,
        metavar="ADMIN_URL",
        help="store into a fresh PostgreSQL database created beside ADMIN_URL's (default "
        f"{_postgres.DEFAULT_ADMIN_URL}) instead of SQLite",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    parser.add_argument(
        "--keep", action="store_true", help="keep the logs, the data folder and the database"
    )
    parser.add_argument(
        "--timeout", type=float, default=7200, help="seconds allowed per crawl (7200)"
    )
    args = parser.parse_args(argv)
    if args.pages < 2:
        parser.error("--pages must be at least 2")
    return args


def run_all(
    args: argparse.Namespace, report: Report, root: Path, work: Path, database_url: str | None
) -> None:
    """Serve the site, crawl it, search, reindex and re-crawl, as *args* say, into
    *report*; the product's data folder is ``work/product`` (its database *database_url*
    when given)."""
    product: crawl.RunResult | None = None
    with _corpus.serve(root, report.server) as base_url:
        seeds = [urllib.parse.urljoin(base_url, page_path(0))]
        print(f"serving {root} at {base_url} ({report.server})", flush=True)
        if not args.skip_baseline:
            print("crawling with the baseline ...", flush=True)
            baseline = crawl.run_baseline(seeds, work, args.timeout, SAMPLE_INTERVAL)
            report.runs["baseline"] = run_figures(baseline)
            if not baseline.ok:
                report.problems.append(f"baseline: {baseline.message}")
            elif baseline.responses is None or baseline.responses < args.pages:
                report.problems.append(f"baseline: {baseline.responses} responses")
        if not args.skip_product:
            print("crawling with the product ...", flush=True)
            product = crawl.run_product(
                seeds, work, args.timeout, SAMPLE_INTERVAL, args.set, database_url
            )
            report.runs["product"] = run_figures(product)
            if not product.ok:
                report.problems.append(f"product: {product.message}")
            elif product.documents != args.pages:
                report.problems.append(
                    f"product: {product.documents} documents stored of {args.pages} pages"
                )
        data = work / "product"
        if product is not None and product.documents:
            report.disk = disk_use(data, product.documents, database_url)
            print("searching ...", flush=True)
            vocab = Words(args.seed).vocab
            report.page_cache = page_cache(data)
            try:
                with search_server(data, work / "serve.log", database_url) as port:
                    api = Api(port)
                    try:
                        if not args.skip_queries:
                            report.latency = measure_queries(api, vocab, args.queries, args.seed)
                        report.markers = check_markers(api, base_url, args.pages, args.seed)
                    finally:
                        api.close()
                if report.latency is not None:
                    report.latency["index_generation_after"] = index_generation(data)
                    query = _synthetic.make_queries(vocab, 1, args.seed + 7)[0]
                    report.latency.update(cli_first_query(data, query, database_url))
            except (RuntimeError, TimeoutError, OSError, ValueError) as exc:
                report.problems.append(f"search: {exc}")
            if report.markers and report.markers["found"] != report.markers["checked"]:
                report.problems.append(f"markers not found: {report.markers['missed']}")
            if not args.skip_reindex:
                print("reindexing ...", flush=True)
                try:
                    report.reindex = run_reindex(
                        data, work, product.documents, args.timeout, database_url
                    )
                except RuntimeError as exc:
                    report.problems.append(f"reindex: {exc}")
            if args.recrawl:
                print("re-crawling the unchanged site ...", flush=True)
                again, report.recrawl = run_recrawl(
                    data, work, args.timeout, SAMPLE_INTERVAL, args.set, database_url
                )
                report.runs["recrawl"] = run_figures(again)
                if not again.ok:
                    report.problems.append(f"re-crawl: {again.message}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = Report(args.pages, args.seed, "", os.getloadavg())
    root = generate_site(args.pages, args.seed)
    report.server = _corpus.ensure_server_kind()
    work = Path(tempfile.mkdtemp(prefix="spidersite-bench-scale-"))
    database_url = None
    memory = None
    if args.postgres:
        report.database = "postgresql"
        report.database_name = database_name = f"spidersite_bench_scale_{os.getpid()}"
        database_url = _postgres.fresh_database(args.postgres, database_name)
        memory = _postgres.ServerMemory().start()
    try:
        run_all(args, report, root, work, database_url)
    finally:
        if memory is not None:
            report.postgres_memory = memory.stop()
        if args.postgres and not args.keep:
            _postgres.drop_database(args.postgres, database_name)
    report.load_end = os.getloadavg()
    report.targets = targets(report)
    print_report(report)
    if args.json:
        figures = {
            "benchmark": "scale",
            "measured_at": datetime.now(tz=UTC).isoformat(timespec="seconds"),
            "machine": _measure.machine(),
            **asdict(report),
        }
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.json}")
    if args.keep or report.problems:
        print(f"\nlogs and data kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
