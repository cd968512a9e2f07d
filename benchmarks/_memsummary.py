"""The summary of the snapshots :mod:`_memprofile` wrote: the largest components and
allocation sites at 25/50/75/100 % of the run.

    python benchmarks/_memsummary.py mem.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _short(path: str) -> str:
    """A file name without its site-packages or checkout prefix."""
    for marker in ("site-packages/", "lib/python3.11/"):
        if marker in path:
            return path.split(marker, 1)[1]
    parts = path.split("/")
    for top in ("spidersite", "search", "benchmarks"):
        if top in parts:
            return "/".join(parts[parts.index(top) :])
    return path


def summary(path: Path, rows: int = 12) -> None:
    """The largest components and allocation sites at 25/50/75/100 % of the run."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    if not records:
        print("no snapshot")
        return
    end = records[-1]["t"]
    for pct in (25, 50, 75, 100):
        rec = min(records, key=lambda r: abs(r["t"] - pct / 100 * end))
        print(
            f"\n== {pct} %: t={rec['t']} s, RSS {rec['rss_mb']:.0f} MB, "
            f"{rec['responses']:,} responses, {rec['items']:,} items"
            + (
                f", traced {rec['traced_mb']} MB over {rec['traced_for_s']} s"
                f" and {rec['traced_responses']:,} responses"
                if "traced_mb" in rec
                else ""
            )
        )
        for row in rec.get("components", [])[:rows]:
            print(f"  {row['bytes'] / 2**20:8.1f} MB  len {row['len']!s:>9}  {row['where']}")
        for row in rec.get("components", []):
            if row["where"].endswith("(queued work)"):
                print(f"  queued work: {row['len']} tasks waiting in {row['where'].split()[0]}")
        if "gc_seconds" in rec:
            print(f"  gc collections so far: {rec['gc_runs']} runs, {rec['gc_seconds']} s")
        print("  gc:", ", ".join(f"{name} {n:,}" for name, n in rec.get("gc_types", [])[:8]))
        for chain in rec.get("referrers", [])[:3]:
            print("  held by:", " <- ".join(chain))
    traced = [r for r in records if r.get("by_traceback")]
    if traced:
        rec = traced[-1]
        print(
            f"\n== tracemalloc window: {rec['traced_for_s']} s, {rec['traced_responses']:,} "
            f"responses, {rec['traced_mb']} MB allocated in the window and still held at "
            f"t={rec['t']} s"
        )
        for row in rec["by_traceback"][: rows * 2]:
            trace = " <- ".join(_short(f) for f in reversed(row["trace"][-5:]))
            print(f"  {row['mb']:8.1f} MB  {row['count']:>9,}  {trace}")


if __name__ == "__main__":
    summary(Path(sys.argv[1]))
