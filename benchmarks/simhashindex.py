"""The near-duplicate index (:class:`search.simhash.SimhashIndex`) at size, without the
database: N fingerprints added one by one the way the store adds them (``nearest``, then
``add``), then a fraction of those pages stored again with a changed fingerprint (a
re-crawl of changed pages).  Prints, for each phase, the wall and CPU time, the CPU
microseconds a page, the fingerprints the index holds, its arrays' bytes and the process's
peak RSS so far::

    python benchmarks/simhashindex.py --pages 1000000 --readd 0.2

The fingerprints are random 64-bit values (pages of different text are ~32 bits apart, so
the band buckets are as full as random values make them: N / 65,536 a bucket).  One in
--near pages is a near-duplicate (2 bits off) of an earlier page, so the lookups find some.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np
from _measure import machine

from search.simhash import SimhashIndex


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--readd", type=float, default=0.2, help="fraction stored again")
    parser.add_argument("--near", type=int, default=100, help="one page in NEAR is a near copy")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    values = rng.integers(0, 2**64, size=args.pages, dtype=np.uint64, endpoint=False)
    copies = rng.integers(0, args.pages, size=args.pages // args.near)
    for at in copies[copies > 0]:  # a near copy of an earlier page: two bits flipped
        values[at] = values[rng.integers(0, at)] ^ np.uint64(0b101 << int(rng.integers(0, 60)))
    again = rng.choice(args.pages, size=int(args.pages * args.readd), replace=False)
    changed = values[again] ^ np.uint64(1 << 63) ^ np.uint64(1 << 31) ^ np.uint64(1 << 15)
    report: dict[str, object] = {"pages": args.pages, "pages_readded": len(again)}
    report["machine"] = machine()
    index = SimhashIndex()
    base = peak_rss_mb()

    def phase(name: str, ids: np.ndarray, prints: np.ndarray) -> None:
        found = 0
        start, cpu = time.perf_counter(), time.process_time()
        for did, value in zip(ids.tolist(), prints.tolist(), strict=True):
            if index.nearest(value, exclude=did) is not None:
                found += 1
            index.add(did, value)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        figures = {
            "seconds": round(seconds, 1),
            "cpu_seconds": round(cpu, 1),
            "cpu_us_a_page": round(cpu / max(1, len(ids)) * 1e6, 1),
            "found": found,
            "held": len(index),
            "index_mb": round(index.nbytes / 2**20, 1),
            "peak_rss_mb": round(peak_rss_mb(), 1),
        }
        report[name] = figures
        print(name, json.dumps(figures), flush=True)

    print("before", json.dumps({"peak_rss_mb": round(base, 1)}), flush=True)
    phase("add", np.arange(1, args.pages + 1), values)
    phase("readd", again + 1, changed)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
