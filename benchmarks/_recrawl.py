"""An unchanged re-crawl of the product's crawl, for ``benchmarks/scale.py --recrawl``:
``scrapy crawl site -a recrawl=all`` on the same data folder and the same site, every
stored page asked for with its ETag and Last-Modified (conditional GET), the process tree's
RSS sampled as the first crawl's was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import _corpus
import _measure
import crawl


def run_recrawl(
    data: Path,
    work: Path,
    timeout: float,
    interval: float,
    settings: list[str],
    database_url: str | None = None,
) -> tuple[crawl.RunResult, dict[str, Any]]:
    """Re-crawl the product's data folder *data* (and its database at *database_url*,
    when given): its run's figures, and what it downloaded (responses by status, bytes,
    pages found changed)."""
    result = crawl.RunResult(run="unchanged re-crawl (scrapy crawl site -a recrawl=all)")
    log = data / "recrawl.log"
    cmd = crawl.product_command(data, log, settings, "-a", "recrawl=all")
    measured = _measure.run_measured(
        cmd,
        cwd=_corpus.REPO_ROOT,
        env=crawl.clean_env(database_url),
        stdout_path=work / "recrawl-stdout.txt",
        stderr_path=work / "recrawl-stderr.txt",
        timeout=timeout,
        interval=interval,
    )
    crawl.apply_memory(result, measured)
    fetched: dict[str, Any] = {}
    if measured.timed_out or measured.returncode != 0:
        result.message = (
            f"timed out after {timeout:.0f} s"
            if measured.timed_out
            else f"exited with code {measured.returncode}"
        ) + f" (log: {log})\n{crawl.tail(log)}"
        return result, fetched
    try:
        stats, started_at, finished_at, documents = crawl.read_store(data, database_url)
    except crawl.READ_ERRORS as exc:
        result.message = f"cannot read figures: {exc}"
        return result, fetched
    crawl.apply_stats(result, stats, documents, started_at, finished_at)
    result.ok = result.elapsed_s is not None
    status_200 = stats.get("downloader/response_status_count/200", 0)
    fetched = {
        # Bodies of pages (robots.txt is fetched again by every crawl, not conditionally).
        "page_bodies": status_200 - stats.get("robotstxt/response_status_count/200", 0),
        "status_200": status_200,
        "status_304": stats.get("downloader/response_status_count/304", 0),
        "response_bytes": stats.get("downloader/response_bytes", 0),
        "changed": stats.get("recrawl/changed", 0),
        "not_modified": stats.get("recrawl/not_modified", 0),
    }
    return result, fetched
