"""PostgreSQL connections are bounded in time (search.db.PG_CONNECT_DEFAULTS): a connect
that gets no answer fails in seconds, and every connection carries TCP keepalives and
``tcp_user_timeout``, unless the database URL gives its own values.

A server host that vanishes while a connection waits for an answer (no reset, its
packets dropped) cannot be made here without filtering the loopback's packets, which
would disturb every other test: that the parameters reach libpq is checked instead.

A connection service (``pg_service.conf``) named by the URL or ``PGSERVICE`` gives its
own values too, which the defaults leave alone."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import pq
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


def test_the_environment_variables_are_libpqs() -> None:
    """``_PG_ENVIRONMENT`` names, for each default, the variable libpq itself reads."""
    envvars = {
        option.keyword.decode(): option.envvar.decode() if option.envvar else None
        for option in pq.Conninfo.get_defaults()
    }
    assert {key: envvars[key] for key in db.PG_CONNECT_DEFAULTS if envvars[key]} == (
        db._PG_ENVIRONMENT
    )


# -- connection services (pg_service.conf) ----------------------------------------------

#: A service file: the service ``crawl`` gives two of the defaults, another service gives
#: one more (which ``crawl`` must not take).
SERVICES = """\
# the project's databases
[other]
connect_timeout=99
tcp_user_timeout=5000

[crawl]
host=dbhost
connect_timeout=30
keepalives_idle=120
"""

#: The defaults the service ``crawl`` of :data:`SERVICES` leaves.
NOT_IN_CRAWL = set(db.PG_CONNECT_DEFAULTS) - {"connect_timeout", "keepalives_idle"}


@pytest.fixture
def services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The per-user service file's path (not written yet; PGSERVICEFILE names it), with no
    service named, no system-wide file (PGSYSCONFDIR: an empty folder) and no
    PGCONNECT_TIMEOUT: the machine's own files and environment play no part."""
    for variable in ("PGSERVICE", "PGCONNECT_TIMEOUT"):
        monkeypatch.delenv(variable, raising=False)
    (tmp_path / "etc").mkdir()
    monkeypatch.setenv("PGSYSCONFDIR", str(tmp_path / "etc"))
    path = tmp_path / "pg_service.conf"
    monkeypatch.setenv("PGSERVICEFILE", str(path))
    return path


def args_for(url: str) -> set[str]:
    return set(db.pg_connect_args(make_url(url)))


def test_the_services_parameters_win_over_the_defaults(services: Path) -> None:
    services.write_text(SERVICES)
    assert args_for("postgresql+psycopg:///?service=crawl") == NOT_IN_CRAWL
    assert args_for("postgresql+psycopg://u@h/db?service=crawl&tcp_user_timeout=1") == (
        NOT_IN_CRAWL - {"tcp_user_timeout"}
    )
    # No service named: every default.
    assert args_for("postgresql+psycopg://u@h/db") == set(db.PG_CONNECT_DEFAULTS)


def test_the_service_of_pgservice_too(services: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    services.write_text(SERVICES)
    monkeypatch.setenv("PGSERVICE", "crawl")
    assert args_for("postgresql+psycopg://u@h/db") == NOT_IN_CRAWL
    # The URL's service wins over PGSERVICE, as in libpq.
    assert args_for("postgresql+psycopg://u@h/db?service=other") == (
        set(db.PG_CONNECT_DEFAULTS) - {"connect_timeout", "tcp_user_timeout"}
    )


def test_a_service_not_in_the_files_leaves_every_default(services: Path) -> None:
    services.write_text(SERVICES)
    assert args_for("postgresql+psycopg:///?service=elsewhere") == set(db.PG_CONNECT_DEFAULTS)
    # [DEFAULT] is a service like any other (configparser's would be every section's).
    services.write_text("[DEFAULT]\nconnect_timeout=30\n[crawl]\nhost=dbhost\n")
    assert args_for("postgresql+psycopg:///?service=crawl") == set(db.PG_CONNECT_DEFAULTS)
    assert args_for("postgresql+psycopg:///?service=DEFAULT") == (
        set(db.PG_CONNECT_DEFAULTS) - {"connect_timeout"}
    )


@pytest.mark.parametrize(
    "content",
    [
        "connect_timeout=30\n[crawl]\nkeepalives_idle=120\n",  # a line before any section
        "[crawl]\nconnect_timeout=30\n[crawl\n  = 5\n",
        "\x00\xff\xfe garbage\n",
        None,  # a folder where the file should be
    ],
)
def test_a_service_file_that_cannot_be_read_leaves_every_default(
    services: Path, content: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    if content is None:
        services.mkdir()
    else:
        services.write_bytes(content.encode("latin-1"))
    # Nor is the system-wide file read, which would have the service.
    (services.parent / "etc" / "pg_service.conf").write_text(SERVICES)
    with caplog.at_level(logging.DEBUG, logger="search.db"):
        assert args_for("postgresql+psycopg:///?service=crawl") == set(db.PG_CONNECT_DEFAULTS)
    assert f"the connection service file {services} cannot be" in caplog.text


def test_the_users_service_file_wins_over_the_systems(services: Path, tmp_path: Path) -> None:
    system = tmp_path / "etc" / "pg_service.conf"
    system.write_text("[crawl]\nkeepalives_idle=120\n[batch]\ntcp_user_timeout=5000\n")
    # The service in the user's file only: the system's file is not read.
    services.write_text("[crawl]\nconnect_timeout=30\n")
    assert args_for("postgresql+psycopg:///?service=crawl") == (
        set(db.PG_CONNECT_DEFAULTS) - {"connect_timeout"}
    )
    # A service the user's file lacks is looked up in the system's.
    assert args_for("postgresql+psycopg:///?service=batch") == (
        set(db.PG_CONNECT_DEFAULTS) - {"tcp_user_timeout"}
    )
    # And so is every service when the user's file is not there.
    services.unlink()
    assert args_for("postgresql+psycopg:///?service=crawl") == (
        set(db.PG_CONNECT_DEFAULTS) - {"keepalives_idle"}
    )


@pytest.fixture
def sysconfdir_asked() -> Iterator[None]:
    """``pg_config --sysconfdir`` asked anew in the test (its answer is kept)."""
    db._pg_sysconfdir.cache_clear()
    try:
        yield
    finally:
        db._pg_sysconfdir.cache_clear()


def test_without_pgsysconfdir_the_system_file_is_in_pg_configs_folder(
    services: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sysconfdir_asked: None
) -> None:
    folder = tmp_path / "sysconf"
    folder.mkdir()
    (folder / "pg_service.conf").write_text(SERVICES)
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    monkeypatch.delenv("PGSYSCONFDIR")
    monkeypatch.setenv("PATH", str(bin_folder))
    # No pg_config: no system-wide file.
    assert args_for("postgresql+psycopg:///?service=crawl") == set(db.PG_CONNECT_DEFAULTS)
    db._pg_sysconfdir.cache_clear()
    pg_config = bin_folder / "pg_config"
    pg_config.write_text(f'#!/bin/sh\n[ "$1" = --sysconfdir ] && echo "{folder}"\n')
    pg_config.chmod(0o755)
    assert args_for("postgresql+psycopg:///?service=crawl") == NOT_IN_CRAWL


def test_a_connection_through_a_service_gets_its_parameters(
    pg_url: str, services: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = make_url(pg_url)
    lines = [
        "[crawl]",
        f"host={database.host}",
        f"port={database.port or 5432}",
        f"dbname={database.database}",
        f"user={database.username}",
        *([f"password={database.password}"] if database.password else []),
        "connect_timeout=7",
    ]
    services.write_text("\n".join(lines) + "\n")
    params = parameters("postgresql+psycopg:///?service=crawl")
    assert params["tcp"] is not None
    assert params["dbname"] == database.database
    assert params["connect_timeout"] == "7"
    assert params["keepalives_idle"] == "30"  # a default the service does not give
    # Named by PGSERVICE, and checked first as a crawl or a command does.
    monkeypatch.setenv("PGSERVICE", "crawl")
    db.probe("postgresql+psycopg://")
    assert parameters("postgresql+psycopg://")["connect_timeout"] == "7"
