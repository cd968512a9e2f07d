"""The store's retry after a rolled-back transaction: the stem and server ids that
transaction inserted are not kept (they were rolled back with it)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from search import db
from search.models import Document, Posting
from search.store import DocumentStore
from tests.test_unit_linkrank import row


def test_a_retried_batch_does_not_reuse_ids_of_the_rolled_back_transaction(
    tmp_path: Path, monkeypatch: Any
) -> None:
    engine = db.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store = DocumentStore(engine, retry_times=2)
    original = store._write_documents
    calls = []

    def fail_once(conn: Any, rows: Any, stems: Any) -> Any:
        written = original(conn, rows, stems)  # stems and the server inserted, then cached
        calls.append(1)
        if len(calls) == 1:  # the database goes away before the commit
            raise OperationalError("COMMIT", {}, Exception("server closed the connection"))
        return written

    monkeypatch.setattr(store, "_write_documents", fail_once)
    monkeypatch.setattr("search.store.time.sleep", lambda seconds: None)
    store.write_batch([row("a", "quagga zebra okapi", []), row("b", "zebra tapir", [])])
    assert len(calls) == 2
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Document)).scalar_one() == 2
        assert conn.execute(select(func.count()).select_from(Posting)).scalar_one() > 0


def test_fingerprints_of_a_rolled_back_transaction_are_forgotten(
    tmp_path: Path, monkeypatch: Any
) -> None:
    engine = db.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store = DocumentStore(engine, retry_times=0)
    words = " ".join(f"word{n}" for n in range(300))
    original = store._write_documents

    def refused(conn: Any, rows: Any, stems: Any) -> Any:
        original(conn, rows, stems)  # fingerprints taken and remembered, then the batch fails
        raise OperationalError("COMMIT", {}, Exception("server closed the connection"))

    monkeypatch.setattr(store, "_write_documents", refused)
    with pytest.raises(OperationalError):
        store.write_batch([row("a", words, [])])
    monkeypatch.setattr(store, "_write_documents", original)
    # "b" takes the id the rolled-back "a" had; "c" is nearly "a": it duplicates nothing
    # that was stored.
    store.write_batch([row("b", "quagga zebra okapi", []), row("c", words + " extra", [])])
    with engine.connect() as conn:
        marks = {
            url: near
            for url, near in conn.execute(select(Document.url, Document.near_duplicate_of_id))
        }
    assert set(marks.values()) == {None}


def _error(cls: Any, orig: BaseException) -> Any:
    return cls("INSERT INTO documents", {}, orig)


@pytest.mark.parametrize(
    ("orig", "retried"),
    [
        # What can pass: the connection or the server comes back, a lock is let go.
        (Exception("server closed the connection unexpectedly"), True),
        (Exception("connection refused"), True),
        (sqlite3.OperationalError("database is locked"), True),
        # What cannot: the disk is full, the database is read-only.
        (sqlite3.OperationalError("database or disk is full"), False),
        (sqlite3.OperationalError("attempt to write a readonly database"), False),
        (psycopg.errors.DiskFull("could not extend file: No space left on device"), False),
        (psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT"), False),
    ],
)
def test_only_what_can_pass_is_retried(orig: BaseException, retried: bool) -> None:
    from sqlalchemy.exc import InternalError

    from search.store import refused, unreachable

    cls = InternalError if isinstance(orig, psycopg.errors.InternalError) else OperationalError
    exc = _error(cls, orig)
    assert unreachable(exc) is retried
    assert (refused(exc) is not None) is (not retried)


def test_a_full_disk_fails_the_batch_at_once_with_its_own_message(
    tmp_path: Path, monkeypatch: Any
) -> None:
    engine = db.connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    retries: list[Exception] = []
    store = DocumentStore(engine, retry_times=5, on_retry=retries.append)

    def full(conn: Any, rows: Any, stems: Any) -> Any:
        raise _error(OperationalError, sqlite3.OperationalError("database or disk is full"))

    monkeypatch.setattr(store, "_write_documents", full)
    monkeypatch.setattr("search.store.time.sleep", lambda seconds: pytest.fail("retried"))
    with pytest.raises(OperationalError) as info:
        store.write_batch([row("a", "quagga zebra okapi", [])])
    assert retries == []
    from search.store import refused

    assert refused(info.value) == "the database's disk is full"


def test_a_database_error_does_not_carry_the_statements_parameters(tmp_path: Path) -> None:
    """A failed statement's message names it, not its parameters: those of a batch are
    the stored pages' texts and postings, megabytes in a log line."""
    from sqlalchemy import text

    engine = db.create(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)"))
    secret = "pangolin-text-of-a-page"  # a short one: SQLAlchemy cuts long ones in the middle
    with pytest.raises(Exception) as raised, engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1, :b), (1, :b)"), {"b": secret})
    engine.dispose()
    assert "UNIQUE" in str(raised.value) and secret not in str(raised.value)


def test_the_indexers_start_survives_an_unreachable_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The indexer's first reads (the catch-up, the removal of what a killed crawl left in
    the index) are retried while the database is unreachable, as its marks are: a
    PostgreSQL restarted as a crawl started failed the crawl's indexer."""
    import queue

    from search import indexer

    calls = []

    def remove_once_unreachable(*args: Any, **kwargs: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("SELECT id FROM documents", {}, Exception("connection is bad"))
        return 0

    monkeypatch.setattr(indexer, "remove_unindexable", remove_once_unreachable)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    db.connect(url).dispose()
    inbox: queue.Queue[Any] = queue.Queue()
    outbox: queue.Queue[Any] = queue.Queue()
    inbox.put(None)  # nothing to index: the crawl ends at once
    indexer._worker(inbox, outbox, str(tmp_path / "index"), url, 10, 64, None, [])
    assert len(calls) == 2
    assert outbox.get_nowait()[0] == "done"
