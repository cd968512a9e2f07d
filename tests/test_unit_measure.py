"""benchmarks/_measure.py: the main process's own peak is not its child's."""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks._measure import run_measured

#: The parent stays small; its child holds ~200 MB for a moment, then the parent waits
#: for it (so the kernel's ru_maxrss of the parent covers the child's peak).
_PARENT = """
import subprocess, sys, time
child = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(1)"
subprocess.run([sys.executable, "-c", child], check=True)
time.sleep(0.5)
"""


def test_main_peak_is_the_process_own(tmp_path: Path) -> None:
    measured = run_measured(
        [sys.executable, "-c", _PARENT],
        stdout_path=tmp_path / "out",
        stderr_path=tmp_path / "err",
        timeout=60,
        interval=0.05,
    )
    assert measured.returncode == 0
    assert measured.main_peak_rss_mb < 100
    assert measured.peak_rss_mb > 200
    assert measured.tree_peak_rss_mb > 200
