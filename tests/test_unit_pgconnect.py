"""PostgreSQL connections are bounded in time (search.db.PG_CONNECT_DEFAULTS): a connect
that gets no answer fails in seconds, and every connection carries TCP keepalives and
``tcp_user_timeout``, unless the database URL gives its own values.

A server host that vanishes while a connection waits for an answer (no reset, its
packets dropped) cannot be made here without filtering the loopback's packets, which
would disturb every other test: that the parameters reach libpq is checked instead."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from search import db
from search.store import unreachable


@pytest.fixture
def silent_server() -> Iterator[int]:
    """The port of a TCP listener on 127.0.0.1 that never accepts: the kernel completes
    the handshake, and nothing is ever said (a server host that stopped answering)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()  # resets the connections still waiting


def connect_failure(url: str, within: float) -> tuple[BaseException, float]:
    """The error of a connect to *url* through :func:`search.db.create`, and the seconds
    it took; the test fails when the connect is still waiting after *within* seconds."""
    engine = db.create(url)
    outcome: list[Any] = []

    def connect() -> None:
        started = time.monotonic()
        try:
            engine.connect().close()
            outcome.append(None)
        except Exception as exc:
            outcome.append(exc)
        outcome.append(time.monotonic() - started)

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(within)
    assert not thread.is_alive(), f"the connect still waits after {within} s"
    error, took = outcome
    assert error is not None, "the silent server was connected to"
    engine.dispose()
    return error, took


def test_a_connect_that_gets_no_answer_fails_in_the_default_time(
    silent_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(db.PG_CONNECT_DEFAULTS, "connect_timeout", 2)
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    error, took = connect_failure(f"postgresql+psycopg://u@127.0.0.1:{silent_server}/x", 15)
    assert 1.5 < took < 10
    # Retried by the store, as a server that cannot be reached is.
    assert isinstance(error, OperationalError)
    assert unreachable(error)
    assert "timeout" in db.driver_message(error)


def test_the_urls_connect_timeout_wins_over_the_default(
    silent_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(db.PG_CONNECT_DEFAULTS, "connect_timeout", 60)
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    url = f"postgresql+psycopg://u@127.0.0.1:{silent_server}/x?connect_timeout=2"
    _, took = connect_failure(url, 15)
    assert 1.5 < took < 10
    # The check a crawl or a command makes first, too.
    started = time.monotonic()
    with pytest.raises(db.DatabaseError, match=r"cannot connect to the database .*timeout"):
        db.probe(url)
    assert time.monotonic() - started < 10


def parameters(url: str) -> dict[str, str]:
    """libpq's parameters of a connection of :func:`search.db.create`'s engine for *url*,
    and whether it is over TCP (``tcp``: the server's address, or ``None``)."""
    engine = db.create(url)
    try:
        with engine.connect() as conn:
            driver = conn.connection.driver_connection
            assert driver is not None
            params = dict(driver.info.get_parameters())
            params["tcp"] = conn.scalar(text("SELECT inet_server_addr()::text"))
            return params
    finally:
        engine.dispose()


def test_every_connection_gets_the_timeouts_and_keepalives(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    params = parameters(pg_url)
    assert params["tcp"] is not None
    assert {key: params.get(key) for key in db.PG_CONNECT_DEFAULTS} == {
        "connect_timeout": "10",
        "keepalives": "1",
        "keepalives_idle": "30",
        "keepalives_interval": "10",
        "keepalives_count": "3",
        "tcp_user_timeout": "60000",
    }


def test_the_urls_parameters_win_over_the_defaults(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    params = parameters(f"{pg_url}?keepalives_idle=5&tcp_user_timeout=20000&connect_timeout=7")
    assert (params["keepalives_idle"], params["tcp_user_timeout"]) == ("5", "20000")
    assert params["connect_timeout"] == "7"
    assert (params["keepalives_interval"], params["keepalives_count"]) == ("10", "3")
    # libpq's environment, where it gives one, too.
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "4")
    assert "connect_timeout" not in db.pg_connect_args(make_url(pg_url))
    assert parameters(pg_url)["connect_timeout"] == "4"


def test_a_unix_socket_url_still_connects(pg_url: str) -> None:
    """libpq leaves out the keepalives and ``tcp_user_timeout`` on a unix socket."""
    engine = db.create(pg_url)
    try:
        with engine.connect() as conn:
            folders = conn.scalar(text("SHOW unix_socket_directories"))
    finally:
        engine.dispose()
    folder = (folders or "").split(",")[0].strip()
    if not folder or folder.startswith("@"):
        pytest.skip("the server listens on no unix socket in a folder")
    url = make_url(pg_url).set(host=None, port=None).update_query_dict({"host": folder})
    params = parameters(url.render_as_string(hide_password=False))
    assert params["tcp"] is None  # the socket
    assert params["keepalives_idle"] == "30"


def test_no_libpq_parameters_for_sqlite_or_another_driver() -> None:
    assert db.pg_connect_args(make_url("sqlite:///x.db")) == {}
    assert db.pg_connect_args(make_url("postgresql+pg8000://h/db")) == {}
    assert set(db.pg_connect_args(make_url("postgresql://h/db"))) == set(db.PG_CONNECT_DEFAULTS)
