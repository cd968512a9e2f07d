"""Crawl throughput: spidersite against a plain Scrapy ``CrawlSpider``, on the corpus sites.

    python benchmarks/crawl.py [--sites a,b,c] [--skip-baseline] [--skip-product]
                               [--json FILE] [--timeout S] [--keep]

The corpus sites (``../shared/corpus/*.tar.gz``) are extracted once into
``benchmarks/.cache/corpus`` and served on 127.0.0.1 by a separate process (nginx when
installed, else Python's ``http.server``). Then, each in its own subprocess, so that peak
RSS is per run:

baseline
    ``benchmarks/_plain_spider.py``: a ``CrawlSpider`` with one ``Rule(LinkExtractor)``,
    a callback that does nothing, no pipelines, ``CONCURRENT_REQUESTS=32``, robots.txt
    obeyed. pages/s = ``response_received_count`` / ``elapsed_time_seconds``.
product
    ``python -m scrapy crawl site -a seeds=... -s SPIDERSITE_DATA_DIR=<tmp>`` from the
    repository root. Its figures are read afterwards from ``<tmp>/spidersite.db``: the
    last row of ``crawls`` (its ``stats`` JSON) and ``count(*)`` of ``documents``.
    stored pages/s = documents / (``store/flushed_at_last`` - ``start_time``);
    searchable pages/s = documents / (``index/searchable_at`` - ``start_time``).

The product's rates are compared with the baseline's pages/s against the targets (stored
5x, searchable 3x). Peak RSS is the largest of the process's and its children's peaks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _corpus
import _measure
import _postgres
from _crawlreport import fmt, print_ratios, print_table, ratios
from sqlalchemy.exc import SQLAlchemyError


@dataclass
class RunResult:
    """The figures of one run; None where a figure could not be had."""

    run: str
    ok: bool = False
    message: str = ""
    returncode: int | None = None
    responses: int | None = None
    documents: int | None = None
    elapsed_s: float | None = None
    """From the crawl's start (``start_time``) to its end (``finish_time``)."""
    wall_s: float | None = None
    """Of the whole process, interpreter start-up and shutdown included."""
    pages_per_s: float | None = None
    stored_per_s: float | None = None
    searchable_per_s: float | None = None
    store_lag_s: float | None = None
    """Seconds from the crawl's start to the last document committed to the database."""
    searchable_lag_s: float | None = None
    """Seconds from the crawl's start to the last document committed to the index."""
    peak_rss_mb: float | None = None
    """The largest peak RSS of one process: the crawl's, or one of its children's."""
    main_peak_rss_mb: float | None = None
    child_peak_rss_mb: float | None = None
    tree_peak_rss_mb: float | None = None
    """The largest sum of the RSS of the process and its children at one sample."""
    left_behind: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    rss_timeline: list[tuple[float, float, float]] = field(default_factory=list)
    """``(seconds since start, RSS MB of the whole process tree, of the main process)``
    at each sample."""


# -- small helpers ---------------------------------------------------------------------


def to_epoch(value: Any) -> float | None:
    """A time as a Unix timestamp: from a number, a numeric string or an ISO datetime.

    Naive datetimes are taken as UTC (Scrapy records its times in UTC).
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text)
        except ValueError:
            pass
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    return None


def rate(count: int | None, seconds: float | None) -> float | None:
    if count is None or seconds is None or seconds <= 0:
        return None
    return count / seconds


def as_int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def clean_env(database_url: str | None = None) -> dict[str, str]:
    """This environment without Scrapy's and spidersite's own variables.

    Without ``DATABASE_URL`` and ``SPIDERSITE_*``, the product stores into the SQLite file
    and Whoosh index under the ``SPIDERSITE_DATA_DIR`` given on its command line; with
    *database_url*, into that database (``DATABASE_URL``) and the folder's index.
    """
    dropped = ("SCRAPY_", "SPIDERSITE_", "DATABASE_URL")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def apply_memory(result: RunResult, measured: _measure.Measured) -> None:
    result.returncode = measured.returncode
    result.wall_s = measured.wall_s
    result.peak_rss_mb = measured.peak_rss_mb
    result.main_peak_rss_mb = measured.main_peak_rss_mb
    result.child_peak_rss_mb = max(measured.child_peaks_mb.values(), default=None)
    result.tree_peak_rss_mb = measured.tree_peak_rss_mb
    result.left_behind = measured.left_behind
    result.rss_timeline = measured.timeline


# -- the runs --------------------------------------------------------------------------


def run_baseline(seeds: list[str], work: Path, timeout: float, interval: float = 0.2) -> RunResult:
    result = RunResult(run="baseline (plain CrawlSpider)")
    folder = work / "baseline"
    folder.mkdir()
    stdout, stderr = folder / "stdout.txt", folder / "crawl.log"
    script = _corpus.BENCH_DIR / "_plain_spider.py"
    measured = _measure.run_measured(
        [sys.executable, str(script), *seeds],
        cwd=folder,
        env=clean_env(),
        stdout_path=stdout,
        stderr_path=stderr,
        timeout=timeout,
        interval=interval,
    )
    apply_memory(result, measured)
    lines = stdout.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    if measured.timed_out:
        result.message = f"timed out after {timeout:.0f} s (log: {stderr})"
        return result
    try:
        stats = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        result.message = (
            f"exited with code {measured.returncode} without stats (log: {stderr})\n" + tail(stderr)
        )
        return result
    result.stats = stats
    result.responses = as_int(stats.get("response_received_count"))
    elapsed = stats.get("elapsed_time_seconds")
    if elapsed is None:
        start, finish = to_epoch(stats.get("start_time")), to_epoch(stats.get("finish_time"))
        elapsed = finish - start if start is not None and finish is not None else None
    result.elapsed_s = None if elapsed is None else float(elapsed)
    result.pages_per_s = rate(result.responses, result.elapsed_s)
    result.ok = measured.returncode == 0 and result.pages_per_s is not None
    if not result.ok:
        result.message = f"exited with code {measured.returncode} (log: {stderr})"
    return result


def read_product_db(db: Path) -> tuple[dict[str, Any], Any, Any, int]:
    """The last crawl's stats, started_at and finished_at, and the document count."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        try:
            row = conn.execute(
                "SELECT started_at, finished_at, stats FROM crawls ORDER BY rowid DESC LIMIT 1"
            ).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise
            row = conn.execute("SELECT started_at, finished_at, stats FROM crawls").fetchone()
        if row is None:
            raise LookupError("the crawls table is empty")
        (documents,) = conn.execute("SELECT count(*) FROM documents").fetchone()
    return crawl_figures(*row, documents)


def crawl_figures(
    started_at: Any, finished_at: Any, raw_stats: Any, documents: int
) -> tuple[dict[str, Any], Any, Any, int]:
    """A ``crawls`` row's stats (JSON text on SQLite, already parsed on PostgreSQL),
    started_at and finished_at, and the document count, as the readers return them."""
    stats = json.loads(raw_stats) if isinstance(raw_stats, str | bytes) else raw_stats
    if not isinstance(stats, dict):
        raise ValueError(f"crawls.stats is not a JSON object: {raw_stats!r:.80}")
    return stats, started_at, finished_at, int(documents)


#: What reading a product's figures may raise (:func:`read_store`).
READ_ERRORS = (sqlite3.Error, SQLAlchemyError, LookupError, ValueError)


def read_store(data: Path, database_url: str | None = None) -> tuple[dict[str, Any], Any, Any, int]:
    """:func:`read_product_db` of the data folder *data*'s SQLite file, or of the database
    at *database_url* when given."""
    if database_url:
        return crawl_figures(*_postgres.last_crawl(database_url))
    db = data / "spidersite.db"
    if not db.is_file():
        raise LookupError(f"no database at {db}")
    return read_product_db(db)


def apply_stats(
    result: RunResult, stats: dict[str, Any], documents: int, started_at: Any, finished_at: Any
) -> float | None:
    """A product crawl's figures from its stats and ``crawls`` row (:func:`read_product_db`):
    responses, elapsed time, pages/s; returns its start (unix time, None if unknown)."""
    result.stats = stats
    result.documents = documents
    result.responses = as_int(stats.get("response_received_count"))
    start = to_epoch(stats.get("start_time")) or to_epoch(started_at)
    finish = to_epoch(stats.get("finish_time")) or to_epoch(finished_at)
    elapsed = stats.get("elapsed_time_seconds")
    if elapsed is not None:
        result.elapsed_s = float(elapsed)
    elif start is not None and finish is not None:
        result.elapsed_s = finish - start
    result.pages_per_s = rate(result.responses, result.elapsed_s)
    return start


def product_command(data: Path, log: Path, settings: Sequence[str], *args: str) -> list[str]:
    """``scrapy crawl site ARGS`` into the data folder *data*, logging at INFO into *log*,
    with the ``NAME=VALUE`` *settings*."""
    cmd = [
        sys.executable, "-m", "scrapy", "crawl", "site", *args,
        "-s", f"SPIDERSITE_DATA_DIR={data}",
        "-s", "LOG_LEVEL=INFO",
        "-s", f"LOG_FILE={log}",
    ]  # fmt: skip
    for setting in settings:
        cmd += ["-s", setting]
    return cmd


def run_product(
    seeds: list[str],
    work: Path,
    timeout: float,
    interval: float = 0.2,
    settings: Sequence[str] = (),
    database_url: str | None = None,
) -> RunResult:
    """Crawl ``seeds`` with the product into ``work/product`` (and the database at
    *database_url* when given); ``settings`` are more ``NAME=VALUE`` pairs for ``-s``."""
    result = RunResult(run="product (scrapy crawl site)")
    data = work / "product"
    data.mkdir()
    log = data / "crawl.log"
    cmd = product_command(data, log, settings, "-a", "seeds=" + ",".join(seeds))
    stdout, stderr = work / "product-stdout.txt", work / "product-stderr.txt"
    try:
        measured = _measure.run_measured(
            cmd,
            cwd=_corpus.REPO_ROOT,
            env=clean_env(database_url),
            stdout_path=stdout,
            stderr_path=stderr,
            timeout=timeout,
            interval=interval,
        )
    except OSError as exc:
        result.message = f"could not start {cmd[0]}: {exc}"
        return result
    apply_memory(result, measured)
    if measured.timed_out:
        result.message += f"timed out after {timeout:.0f} s (log: {log})"
        return result
    if measured.returncode != 0:
        result.message += (
            f"exited with code {measured.returncode} (log: {log}, stderr: {stderr})\n"
            + (tail(stderr) or tail(log) or tail(stdout))
        )
        return result
    try:
        stats, started_at, finished_at, documents = read_store(data, database_url)
    except READ_ERRORS as exc:
        result.message += f"cannot read the crawl's figures: {exc} (log: {log})\n" + (
            tail(log) or tail(stderr)
        )
        return result
    start = apply_stats(result, stats, documents, started_at, finished_at)
    missing = []
    if start is None:
        missing.append("start_time")
    for key, attr in (
        ("store/flushed_at_last", "store_lag_s"),
        ("index/searchable_at", "searchable_lag_s"),
    ):
        moment = to_epoch(stats.get(key))
        if moment is None or start is None:
            missing.append(key)
        else:
            setattr(result, attr, moment - start)
    result.stored_per_s = rate(documents, result.store_lag_s)
    result.searchable_per_s = rate(documents, result.searchable_lag_s)
    if missing:
        result.message += "stats lack " + ", ".join(missing)
    result.ok = not missing and result.stored_per_s is not None
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--sites",
        default=",".join(_corpus.SITES),
        help="comma-separated corpus sites to crawl (default: all three)",
    )
    parser.add_argument("--skip-baseline", action="store_true", help="do not run the baseline")
    parser.add_argument("--skip-product", action="store_true", help="do not run the product")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    parser.add_argument(
        "--timeout", type=float, default=3600, help="seconds allowed per run (default 3600)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the logs and the product's data folder"
    )
    args = parser.parse_args(argv)
    args.sites = [s.strip() for s in args.sites.split(",") if s.strip()]
    unknown = sorted(set(args.sites) - set(_corpus.SITES))
    if unknown or not args.sites:
        parser.error(
            f"--sites: unknown {', '.join(unknown) or '(none)'}; "
            f"choose from {', '.join(_corpus.SITES)}"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        root = _corpus.corpus_root(args.sites)
        kind = _corpus.server_kind()
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="spidersite-bench-crawl-"))
    baseline: RunResult | None = None
    product: RunResult | None = None
    with _corpus.serve(root, kind) as base_url:
        seeds = _corpus.seed_urls(base_url, args.sites)
        print(f"serving {root} at {base_url} ({kind}); seeds: {' '.join(seeds)}")
        if not args.skip_baseline:
            print("running the baseline ...", flush=True)
            baseline = run_baseline(seeds, work, args.timeout)
        if not args.skip_product:
            print("running the product ...", flush=True)
            product = run_product(seeds, work, args.timeout)

    results = [r for r in (baseline, product) if r is not None]
    print()
    print_table(results)
    print()
    for r in results:
        print(
            f"{r.run}: peak RSS {fmt(r.main_peak_rss_mb, '{:.0f}')} MB (process), "
            f"{fmt(r.child_peak_rss_mb, '{:.0f}')} MB (largest child), "
            f"{fmt(r.tree_peak_rss_mb, '{:.0f}')} MB (all together); "
            f"wall time {fmt(r.wall_s, '{:.1f}')} s"
        )
    for r in results:
        if r.left_behind:
            print(f"\n{r.run}: still running 5 s after it exited, then terminated:")
            print("\n".join("    " + line for line in r.left_behind))
        if r.message:
            print(f"\n{r.run}: {r.message}")
    found = ratios(baseline, product)
    print_ratios(found)

    if args.json:
        report = {
            "benchmark": "crawl",
            "measured_at": datetime.now(tz=UTC).isoformat(timespec="seconds"),
            "machine": _measure.machine(),
            "server": kind,
            "sites": args.sites,
            "runs": [asdict(r) for r in results],
            "ratios": found,
        }
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.json}")

    failed = any(not r.ok for r in results)
    if args.keep or failed:
        print(f"\nlogs and data kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
