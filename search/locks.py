"""Locks on what only one process may write at a time: the Whoosh index, a SQLite file.

A :class:`WriterLock` is an OS-level lock (``fcntl.flock``) on a small file next to the
resource, held for the life of the process that took it.  The operating system releases it
when that process ends, however it ends: a killed crawl never leaves a stale lock behind.
The file keeps the holder's process id, for the message the next process gets.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class Locked(Exception):
    """Another process holds the lock (the message says what, where and who)."""


class WriterLock:
    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        #: The lock file.
        self.path = Path(path)
        #: What it guards, for messages ("the search index at /data/index").
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> WriterLock:
        """Take the lock without waiting; :class:`Locked` when another process has it,
        OSError when the lock file cannot be created."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip()
            os.close(fd)
            pid = f" (process {holder})" if holder.isdigit() else ""
            raise Locked(f"{self.what} is being written by another process{pid}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the file releases the lock
            self._fd = None

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def index_lock(index_dir: str | os.PathLike[str]) -> WriterLock:
    """The lock of a Whoosh index folder, held by a crawl that feeds the index for as long
    as it runs (a second such crawl refuses to start).  ``python -m search reindex`` and
    ``check`` do not take it: they may run during a crawl, and each of their commits goes
    through Whoosh's own lock, as the crawl's indexer's do (the indexer waits for it:
    :data:`search.indexer.LOCK_WAIT`)."""
    return WriterLock(Path(index_dir) / "writer.lock", f"the search index at {index_dir}")


def database_lock(path: str | os.PathLike[str]) -> WriterLock:
    """The lock of a SQLite database file (a PostgreSQL database has many writers)."""
    return WriterLock(f"{path}.lock", f"the database sqlite:///{path}")
