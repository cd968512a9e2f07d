"""benchmarks/treecpu.py's summary of a process's RSS samples."""

from __future__ import annotations

from benchmarks.treecpu import rss_percentiles

MB = 2**20


def test_rss_median_and_90th_percentile_of_one_process() -> None:
    samples = [{"t": float(i), "7": [0.0, (i + 1) * MB], "8": [0.0, 500 * MB]} for i in range(10)]
    samples.append({"t": 10.0, "8": [0.0, 500 * MB]})  # process 7 had ended
    assert rss_percentiles(samples, 7) == (6, 10)
    assert rss_percentiles(samples, 8) == (500, 500)
    assert rss_percentiles(samples, 9) == (0, 0)
