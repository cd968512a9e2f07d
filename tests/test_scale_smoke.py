"""benchmarks/scale.py end to end on a small synthetic site: correctness, never timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import PG_ADMIN_URL, ROOT

PAGES = 300


def run_scale(tmp_path: Path, *args: str) -> dict[str, Any]:
    """``benchmarks/scale.py`` with *args* (and ``--recrawl``): its figures, once it has
    exited with status 0."""
    figures_file = tmp_path / "scale.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "scale.py"),
            *args,
            "--recrawl",
            "--json",
            str(figures_file),
            "--timeout",
            "900",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures: dict[str, Any] = json.loads(figures_file.read_text(encoding="utf-8"))
    return figures


@pytest.mark.slow
def test_scale_benchmark_stores_every_page_and_finds_every_marker(tmp_path: Path) -> None:
    figures = run_scale(tmp_path, "--pages", str(PAGES), "--queries", "30")

    assert figures["problems"] == []
    baseline, product = figures["runs"]["baseline"], figures["runs"]["product"]
    assert baseline["ok"] and product["ok"]
    assert baseline["responses"] >= PAGES
    assert product["documents"] == PAGES
    assert figures["markers"]["checked"] == min(100, PAGES)
    assert figures["markers"]["found"] == figures["markers"]["checked"]

    for run in (baseline, product):
        for key in ("pages_per_s", "tree_peak_rss_mb", "growth_second_half", "growth_of_peaks"):
            assert run[key] is not None, key
        assert set(run["rss_at_mb"]) == {"25%", "50%", "75%", "100%"}
    for key in ("stored_per_s", "searchable_per_s"):
        assert product[key] is not None, key
    for key in ("first_ms", "p50_ms", "p95_ms", "cli_query_ms"):
        assert figures["latency"][key] is not None, key
    assert figures["latency"]["queries"] == 30
    assert figures["reindex"]["docs_per_s"] is not None
    assert figures["disk"]["database_mb"] > 0 and figures["disk"]["index_mb"] > 0
    # The unchanged re-crawl asks for every page conditionally and downloads no body.
    recrawl = figures["recrawl"]
    assert figures["runs"]["recrawl"]["ok"]
    assert recrawl["page_bodies"] == 0 and recrawl["changed"] == 0
    assert recrawl["status_304"] == PAGES
    assert {entry["met"] for entry in figures["targets"].values()} <= {True, False}


@pytest.mark.slow
def test_scale_benchmark_on_postgresql(tmp_path: Path) -> None:
    """``--postgres``: the product crawls, serves, reindexes and re-crawls on a fresh
    PostgreSQL database, reports its size and the server's memory, and drops it."""
    pages = 150
    figures = run_scale(
        tmp_path,
        *("--pages", str(pages), "--skip-baseline", "--queries", "10"),
        *("--postgres", PG_ADMIN_URL),
    )

    assert figures["problems"] == [] and figures["database"] == "postgresql"
    assert figures["runs"]["product"]["documents"] == pages
    assert figures["markers"]["found"] == figures["markers"]["checked"] == min(100, pages)
    assert figures["reindex"]["docs_per_s"] is not None
    assert figures["recrawl"]["page_bodies"] == 0 and figures["recrawl"]["status_304"] == pages
    # The database's size is PostgreSQL's; the data folder holds no SQLite file.
    assert figures["disk"]["database_mb"] > 0 and figures["disk"]["index_mb"] > 0
    assert figures["postgres_memory"]["peak_mb"] > 0
    # The run's database is dropped at the end.
    admin = create_engine(PG_ADMIN_URL)
    with admin.connect() as conn:
        left = conn.execute(
            text("SELECT count(*) FROM pg_database WHERE datname = :name"),
            {"name": figures["database_name"]},
        ).scalar_one()
    admin.dispose()
    assert figures["database_name"].startswith("spidersite_bench_scale_") and left == 0


def test_rss_profile_of_a_run_too_short_for_a_sample_between_25_and_50_percent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The peaks' growth of a run of a few seconds (no sample from 25 to 50 %) is taken
    against the sample at 50 %, not left out."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import scale

    short = scale.rss_profile([(0.0, 100.0, 0.0), (3.0, 130.0, 0.0)])
    assert short["growth_second_half"] == short["growth_of_peaks"] == pytest.approx(0.3)
    longer = [(float(t), 100.0 + (20.0 if t == 3 else 0.0), 0.0) for t in range(11)]
    assert scale.rss_profile(longer)["growth_of_peaks"] == pytest.approx(100 / 120 - 1)
