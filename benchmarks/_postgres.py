"""PostgreSQL for the benchmarks that store into it (``scale.py --postgres``,
``scaleout.py``): a fresh database per run, created beside an admin URL and dropped after,
the figures read from it, its size, and the memory of the server's processes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from sqlalchemy import text

from search import db

#: The admin URL the benchmarks default to: the local server's ``postgres`` database.
DEFAULT_ADMIN_URL = "postgresql+psycopg://127.0.0.1:5432/postgres"


def fresh_database(admin_url: str, name: str) -> str:
    """Create the empty database *name* next to *admin_url*'s; its URL."""
    admin = db.create(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return admin_url.rsplit("/", 1)[0] + "/" + name


def drop_database(admin_url: str, name: str) -> None:
    """Drop the database *name* beside *admin_url*'s, its connections closed first."""
    admin = db.create(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def last_crawl(url: str) -> tuple[Any, Any, Any, int]:
    """The last ``crawls`` row of the database at *url* (started_at, finished_at, stats)
    and its document count, for ``crawl.crawl_figures``."""
    engine = db.create(url)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text("SELECT started_at, finished_at, stats FROM crawls ORDER BY id DESC LIMIT 1")
            ).first()
            if row is None:
                raise LookupError("the crawls table is empty")
            documents = conn.execute(text("SELECT count(*) FROM documents")).scalar_one()
    finally:
        engine.dispose()
    return row[0], row[1], row[2], int(documents)


def database_bytes(url: str) -> int:
    """``pg_database_size`` of the database at *url*: its tables, indexes and TOAST."""
    engine = db.create(url)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
            )
    finally:
        engine.dispose()


def server_pss_mb() -> float | None:
    """The proportional set size of the PostgreSQL server's processes (``postgres`` in
    ``/proc/*/comm``), MB: shared buffers counted once over the processes that map them,
    unlike their RSS.  None where it cannot be read (no such process, no permission)."""
    total_kib = 0
    found = False
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() != "postgres":
                continue
            for line in (proc / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kib += int(line.split()[1])
                    found = True
                    break
        except OSError:
            continue
    return total_kib / 1024 if found else None


class ServerMemory:
    """:func:`server_pss_mb` sampled every *interval* seconds in a thread, from ``start()``
    to ``stop()``: its first, largest and last figures."""

    def __init__(self, interval: float = 5.0) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="postgres-pss", daemon=True)

    def _run(self) -> None:
        while True:
            pss = server_pss_mb()
            if pss is not None:
                self.samples.append(pss)
            if self._stop.wait(self.interval):
                return

    def start(self) -> ServerMemory:
        self._thread.start()
        return self

    def stop(self) -> dict[str, float] | None:
        self._stop.set()
        self._thread.join()
        if not self.samples:
            return None
        return {
            "first_mb": self.samples[0],
            "peak_mb": max(self.samples),
            "last_mb": self.samples[-1],
        }
