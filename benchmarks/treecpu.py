"""CPU seconds and RSS of each process of a product crawl's tree, sampled beside a run.

    python benchmarks/treecpu.py --out tree.json [--cwd DIR] [--pid PID] [--interval 0.5]
                                 [--spy [ROLE]] [--idle]

Waits for a ``scrapy crawl site`` process whose parent runs in *--cwd* (``scale.py``'s
product crawl started from that checkout, so one crawl at a time from a folder; or takes
*--pid*), then samples every
*--interval* seconds, until the crawler exits, the CPU time (user + system) and the RSS of
the crawler, its analysis processes, its worker, the worker's indexer child and the
resource trackers (psutil).
Writes the last CPU time and the peak RSS of each process, and every sample, to *--out*,
and prints each process's CPU time and its RSS's median, 90th percentile and peak;
with *--spy*, a profile of the indexer (or of the process of that role: ``worker``,
``analysis``, ``crawler``) for its whole life (``py-spy record``, 20 samples a second, raw collapsed
stacks) to ``<out>.spy.txt``; with *--idle*, waiting stacks too (where the off-CPU
time goes).  A process's CPU after its last
sample is not counted (at most one interval).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import time
from typing import Any

import psutil


def find_crawler(cwd: str | None) -> psutil.Process:
    while True:
        for p in psutil.process_iter(["cmdline"]):
            line = " ".join(p.info["cmdline"] or [])
            if "scrapy" not in line or "crawl site" not in line:
                continue
            try:
                if cwd and p.parent().cwd() != cwd:
                    continue
            except psutil.Error:
                continue
            return p
        time.sleep(0.2)


def alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def role(p: psutil.Process, depth: int) -> str:
    """The crawler (the root), the worker (a child with a child: its indexer), an analysis
    process (a child without children: ``ANALYZE_PROCESSES``), the resource tracker, the
    indexer (a grandchild)."""
    line = " ".join(p.cmdline())
    if "resource_tracker" in line:
        return "tracker"
    if depth == 1:
        return "worker" if p.children() else "analysis"
    return {0: "crawler"}.get(depth, "indexer" if "spawn_main" in line else "other")


def rss_percentiles(samples: list[dict[str, Any]], pid: int) -> tuple[int, int]:
    """The median and the 90th percentile of a process's RSS over its samples, in MB."""
    rss = sorted(row[str(pid)][1] for row in samples if str(pid) in row)
    if not rss:
        return 0, 0
    return rss[len(rss) // 2] >> 20, rss[min(len(rss) - 1, int(0.9 * len(rss)))] >> 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cwd", help="the crawl's parent runs in this folder")
    ap.add_argument("--pid", type=int, help="the crawler's pid")
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument(
        "--spy",
        nargs="?",
        const="indexer",
        metavar="ROLE",
        help="py-spy record the process of this role (indexer when none is named)",
    )
    ap.add_argument(
        "--idle",
        action="store_true",
        help="with --spy, also sample the threads while they wait (off-CPU time)",
    )
    args = ap.parse_args()
    root = psutil.Process(args.pid) if args.pid else find_crawler(args.cwd)
    start = time.time()
    procs: dict[int, dict[str, Any]] = {}
    samples: list[dict[str, Any]] = []
    spy = None
    while alive(root):
        tree = [(root, 0)]
        try:
            for child in root.children():
                tree.append((child, 1))
                with contextlib.suppress(psutil.Error):
                    tree += [(g, 2) for g in child.children(recursive=True)]
        except psutil.Error:
            continue
        row: dict[str, Any] = {"t": time.time() - start}
        for p, depth in tree:
            try:
                cpu = p.cpu_times()
                rss = p.memory_info().rss
                info = procs.setdefault(p.pid, {"role": role(p, depth), "peak_rss": 0})
                if depth == 1 and info["role"] == "analysis":
                    info["role"] = role(p, depth)  # the worker, before its indexer started
            except psutil.Error:
                continue
            info["cpu_s"] = cpu.user + cpu.system
            info["peak_rss"] = max(info["peak_rss"], rss)
            row[str(p.pid)] = [info["cpu_s"], rss]
            if args.spy and spy is None and info["role"] == args.spy:
                command = ["py-spy", "record", "-p", str(p.pid), "-r", "20", "-f", "raw"]
                if args.idle:
                    command.append("--idle")
                spy = subprocess.Popen(
                    [*command, "-o", args.out + ".spy.txt"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
        samples.append(row)
        time.sleep(args.interval)
    with open(args.out, "w") as f:
        json.dump({"procs": procs, "samples": samples}, f)
    for pid, info in procs.items():
        cpu, peak = info["cpu_s"], info["peak_rss"] >> 20
        median, p90 = rss_percentiles(samples, pid)
        print(
            f"{info['role']:8} {pid:>7}  CPU {cpu:7.1f} s  RSS median {median} MB, "
            f"90th percentile {p90} MB, peak {peak} MB"
        )
    if spy is not None:
        spy.wait()


if __name__ == "__main__":
    main()
