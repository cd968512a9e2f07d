"""A crawl's fixed cost: wall time and CPU time of each process of a 1-page crawl.

Runs ``scrapy crawl site`` as the tests do (tests/conftest.py) against a one-page site on
127.0.0.1, polls /proc every 20 ms for the CPU time of the crawler, its worker process, the
worker's indexer process and multiprocessing's resource tracker, and prints the medians of
``--runs`` crawls.  With ``--tree`` (repeatable) it measures other checkouts of the project
too, one crawl of each in turn, so that a loaded machine weighs on all alike::

    python benchmarks/startup.py --runs 5 --tree /tmp/old-checkout --tree .

Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROLES = ("crawler", "worker", "indexer", "tracker", "other")
HERE = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return found


def one_crawl() -> dict[str, float]:
    """In the checkout that is the current directory: one crawl, its figures."""
    sys.path.insert(0, os.getcwd())
    from tests.conftest import ROOT, _env, _serve_site, crawl_command

    site = next(_serve_site())
    site.page("/", "Zebra", "Welcome to the zebra pages.")
    data = Path(tempfile.mkdtemp(prefix="startup-")) / "data"
    started = time.monotonic()
    proc = subprocess.Popen(
        crawl_command(data, "-a", f"seeds={site.url}"),
        cwd=ROOT,
        env=_env(data, None),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    cpu: dict[int, float] = {}
    cmd: dict[int, str] = {}
    parent: dict[int, int] = {}
    while True:
        done = proc.poll() is not None
        stack = [proc.pid]
        while stack:
            pid = stack.pop()
            seconds = _cpu(pid)
            if seconds is not None:
                cpu[pid] = seconds
                cmd[pid] = cmd.get(pid) or _cmdline(pid)
            for child in _children(pid):
                parent[child] = pid
                stack.append(child)
        if done:
            break
        time.sleep(0.02)
    figures = {"rc": float(proc.returncode), "wall": time.monotonic() - started}
    figures.update(dict.fromkeys(ROLES, 0.0))
    for pid, seconds in cpu.items():
        if pid == proc.pid:
            role = "crawler"
        elif "resource_tracker" in cmd[pid]:
            role = "tracker"
        elif "spawn_main" in cmd[pid] and parent.get(pid) == proc.pid:
            role = "worker"
        elif "spawn_main" in cmd[pid] and parent.get(parent.get(pid, 0)) == proc.pid:
            role = "indexer"
        else:
            role = "other"
        figures[role] += seconds
    figures["cpu"] = sum(figures[r] for r in ROLES)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", action="append", help="a checkout (default: this one)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_crawl()))
        os._exit(0)  # the fixture site's server thread is not stopped
    trees = [str(Path(t).resolve()) for t in (args.tree or [HERE])]
    runs: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
    for _ in range(args.runs):
        for tree in trees:
            out = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--one"],
                cwd=tree,
                env={**os.environ, "PYTHONPATH": tree},
                capture_output=True,
                text=True,
                timeout=600,
            )
            figures = json.loads(out.stdout.strip().splitlines()[-1])
            runs[tree].append(figures)
            print(tree, {k: round(v, 2) for k, v in figures.items()}, flush=True)
    keys = ["wall", *ROLES, "cpu"]
    print(f"\nmedians of {args.runs} crawls (seconds): " + ", ".join(keys))
    for tree, rows in runs.items():
        print(tree, " ".join(f"{statistics.median(r[k] for r in rows):.2f}" for k in keys))
    print("load average:", Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main()
