"""The product's index served and queried, for ``benchmarks/scale.py`` and
``benchmarks/apisearch.py``: ``python -m search serve`` on a free port, ``/api/search`` over
one kept-alive connection, its latency, and the first query of a fresh CLI process.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _corpus
import _synthetic
import crawl

from search.index import Index


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"python -m search serve exited (code {proc.returncode})")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"python -m search serve did not listen on {port}")
        time.sleep(0.05)


@contextlib.contextmanager
def search_server(data: Path, log: Path, database_url: str | None = None) -> Iterator[int]:
    """``python -m search serve`` on ``data`` (and the database at *database_url*, when
    given), on a free port; yield the port."""
    port = _corpus.free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "search", "serve", "--port", str(port), "--data-dir", str(data)],
            cwd=_corpus.REPO_ROOT,
            env=crawl.clean_env(database_url),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait_for_port(port, proc, timeout=60)
            yield port
        finally:
            _corpus.stop(proc)


class Api:
    """``GET /api/search`` over one kept-alive HTTP connection."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def search(self, query: str, n: int = 10) -> tuple[float, dict[str, Any]]:
        """Seconds the answer took, and the answer."""
        path = "/api/search?" + urllib.parse.urlencode({"q": query, "n": n})
        for attempt in (1, 2):
            started = time.perf_counter()
            try:
                self.conn.request("GET", path)
                response = self.conn.getresponse()
                body = response.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()  # the server closed a kept-alive connection: once more
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt == 2:
                    raise
                continue
            seconds = time.perf_counter() - started
            if response.status != 200:
                raise RuntimeError(
                    f"/api/search?q={query!r}: HTTP {response.status}: {body!r:.200}"
                )
            return seconds, json.loads(body)
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.conn.close()


def page_cache(data: Path) -> dict[str, Any] | None:
    """How much of the data folder's database and index files is in the OS's page cache
    (MB resident and MB in all, by util-linux's ``fincore``; None without it).  A query
    that reads a page not in it waits for the disk; on a machine that pages out what has
    not been read for a while (benchmarks/README.md, "Counts per section by section, and
    queries against the page cache"), the
    same index answers slower after a pause."""
    groups = {"database": sorted(data.glob("*.db")), "index": sorted(data.glob("index/*"))}
    files = [f for group in groups.values() for f in group if f.is_file()]
    if not files or shutil.which("fincore") is None:
        return None
    proc = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE,FILE"]
        + [str(f) for f in files],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return None
    rows = {}
    for line in proc.stdout.splitlines():
        res, size, name = line.split(" ", 2)
        rows[name] = (int(res), int(size))
    out: dict[str, Any] = {"generation": index_generation(data), **write_back_mb()}
    for group, paths in groups.items():
        got = [rows[str(f)] for f in paths if str(f) in rows]
        out[f"{group}_resident_mb"] = sum(r for r, _ in got) / 2**20
        out[f"{group}_mb"] = sum(size for _, size in got) / 2**20
    return out


def index_generation(data: Path) -> int | None:
    """The generation of the data folder's index (None without one): a commit between two
    readings means the queries between them were answered by two index generations, the
    first of the new one reading its arrays."""
    return Index(data / "index").generation()


def write_back_mb() -> dict[str, float]:
    """The machine's dirty pages and pages being written back (``/proc/meminfo``, MB): a
    read waits behind a large write-back."""
    out = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in ("Dirty", "Writeback"):
                out[name.lower() + "_mb"] = int(rest.split()[0]) / 1024
    return out


def describe_page_cache(cache: dict[str, Any] | None) -> str:
    if not cache:
        return "page cache: not measured (no fincore)"
    # A PostgreSQL database's files are the server's, not the data folder's.
    database = (
        f"database {cache['database_resident_mb']:,.0f} of {cache['database_mb']:,.0f} MB, "
        if cache["database_mb"]
        else ""
    )
    text = (
        f"page cache: {database}index {cache['index_resident_mb']:,.0f} of "
        f"{cache['index_mb']:,.0f} MB"
    )
    if "dirty_mb" in cache:
        text += f"; dirty {cache['dirty_mb']:,.0f} MB, write-back {cache['writeback_mb']:,.0f} MB"
    if "generation" in cache:
        text += f"; index generation {cache['generation']}"
    return text


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def measure_queries(api: Api, vocab: list[str], count: int, seed: int) -> dict[str, Any]:
    """The first query of the fresh server, then p50/p95 of ``count`` warm queries."""
    queries = _synthetic.make_queries(vocab, count + 21, seed)
    first_s, _ = api.search(queries[0])
    for query in queries[1:21]:  # warm-up
        api.search(query)
    times = [api.search(query)[0] * 1000 for query in queries[21:]]
    p50 = statistics.median(times)
    return {
        "queries": len(times),
        "first_ms": first_s * 1000,
        "p50_ms": p50,
        "p95_ms": percentile(times, 95),
        "max_ms": max(times),
    }


def cli_first_query(data: Path, query: str, database_url: str | None = None) -> dict[str, Any]:
    """``python -m search query --json`` in a fresh process (on *data*, and the database
    at *database_url* when given): its own reported seconds, and the wall time of the
    whole process."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "search", "query", "--json", "--data-dir", str(data), query],
        cwd=_corpus.REPO_ROOT,
        env=crawl.clean_env(database_url),
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"python -m search query failed ({proc.returncode}): {proc.stderr}")
    return {"cli_query_ms": json.loads(proc.stdout)["seconds"] * 1000, "cli_wall_s": wall}
