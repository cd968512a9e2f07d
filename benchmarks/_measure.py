"""Wall time and peak memory of a benchmark's command, and the machine it ran on.

- :func:`run_measured` runs a command and reports its wall time and peak RSS (the
  process and every descendant it spawns), with the RSS of the whole tree over time
  (:class:`Measured`).
- :func:`machine` is what a benchmark's JSON says of the machine.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


def machine() -> dict[str, object]:
    """What a benchmark's JSON says of the machine it ran on."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _status_kib(pid: int, key: str) -> int | None:
    """A ``kB`` field (``VmHWM``, ``VmRSS``) of ``/proc/<pid>/status``, or None."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def vm_hwm_mb(pid: int) -> float | None:
    """Peak RSS so far (``VmHWM``) of a live process, in MB, or None if unavailable."""
    kib = _status_kib(pid, "VmHWM")
    return None if kib is None else kib / 1024


def tree_rss_mb(pid: int) -> float:
    """The current RSS of ``pid`` and of every live descendant, summed, in MB."""
    return sum(_status_kib(p, "VmRSS") or 0 for p in [pid, *descendants(pid)]) / 1024


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (psutil when installed, else ``/proc``)."""
    try:
        import psutil  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            return [child.pid for child in psutil.Process(pid).children(recursive=True)]
        except psutil.Error:
            return []
    found: list[int] = []
    stack = [pid]
    while stack:
        parent = stack.pop()
        for children in Path(f"/proc/{parent}/task").glob("*/children"):
            try:
                kids = [int(p) for p in children.read_text().split()]
            except (OSError, ValueError):
                continue
            found.extend(kids)
            stack.extend(kids)
    return found


@dataclass
class Measured:
    """What :func:`run_measured` saw of one command."""

    returncode: int
    wall_s: float
    peak_rss_mb: float
    """The largest single-process peak RSS in the tree (main process or a child)."""
    main_peak_rss_mb: float
    """The main process's own peak RSS (its ``VmHWM``, last read before it exited; the
    kernel's ``ru_maxrss`` from ``wait4`` only when it was never read)."""
    tree_peak_rss_mb: float
    """The largest sum of current RSS over the whole tree at one sample (every 0.2 s)."""
    timed_out: bool = False
    left_behind: list[str] = field(default_factory=list)
    """Processes of the command's group still running 5 s after it exited (then ended)."""
    child_peaks_mb: dict[int, float] = field(default_factory=dict)
    timeline: list[tuple[float, float, float]] = field(default_factory=list)
    """One ``(seconds since start, RSS of the whole tree MB, RSS of the main process MB)``
    per sample."""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _group_members(pgid: int) -> list[str]:
    """``pid: command line`` of each process in group ``pgid`` (Linux ``/proc``)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # state, ppid, pgrp, ...
                continue
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError, IndexError):
            continue
        members.append(f"{stat.parent.name}: {cmdline.decode(errors='replace').strip()}")
    return members


def _end_group(pgid: int, grace: float = 5.0) -> list[str]:
    """Wait up to ``grace`` s for process group ``pgid`` to end, then terminate it.

    Returns the processes that were still there after the grace period (empty if none).
    """
    deadline = time.monotonic() + grace
    while _group_alive(pgid):
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    else:
        return []
    left = _group_members(pgid) or [f"process group {pgid}"]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return left


def run_measured(
    cmd: Sequence[str],
    *,
    cwd: Path | None = None,
    stdout_path: Path,
    stderr_path: Path,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    interval: float = 0.2,
) -> Measured:
    """Run ``cmd`` to the end, sampling the memory of it and its descendants.

    Every ``interval`` seconds the ``VmHWM`` (peak RSS) of the process and of each
    descendant is read from ``/proc``, and the sum of their current RSS is added to the
    result's ``timeline``; at the end, ``wait4`` adds the kernel's own
    ``ru_maxrss`` for the process, which also covers the children it waited for: it
    counts in the largest process's peak (``peak_rss_mb``), not in the process's own
    (``main_peak_rss_mb``, its last ``VmHWM``). The command runs in its own session; on
    timeout its whole process group is killed.
    """
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        start = time.monotonic()
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        main_peak = 0.0
        tree_peak = 0.0
        child_peaks: dict[int, float] = {}
        timeline: list[tuple[float, float, float]] = []
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            hwm = vm_hwm_mb(proc.pid)
            if hwm is not None:
                main_peak = max(main_peak, hwm)
            main_kib = _status_kib(proc.pid, "VmRSS") or 0
            total_kib = main_kib
            for child in descendants(proc.pid):
                child_hwm = vm_hwm_mb(child)
                if child_hwm is not None:
                    child_peaks[child] = max(child_peaks.get(child, 0.0), child_hwm)
                total_kib += _status_kib(child, "VmRSS") or 0
            tree_peak = max(tree_peak, total_kib / 1024)
            timeline.append((time.monotonic() - start, total_kib / 1024, main_kib / 1024))
            if timeout is not None and time.monotonic() - start > timeout and not timed_out:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(interval)
        wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    left_behind = _end_group(proc.pid)
    # ru_maxrss is in KiB on Linux (bytes on macOS), and it is the largest of the process
    # and of the children it waited for: a child's peak (a crawl's worker, say) may be it.
    # The process's own peak is its VmHWM, read until it exited; the kernel's figure
    # stands for it only when the process ended before the first read.
    kernel_peak = usage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    if main_peak == 0.0:
        main_peak = kernel_peak
    peak = max([main_peak, kernel_peak, *child_peaks.values()])
    return Measured(
        returncode=proc.returncode,
        wall_s=wall,
        peak_rss_mb=peak,
        main_peak_rss_mb=main_peak,
        tree_peak_rss_mb=max(tree_peak, peak),
        timed_out=timed_out,
        left_behind=left_behind,
        child_peaks_mb=child_peaks,
        timeline=timeline,
    )
