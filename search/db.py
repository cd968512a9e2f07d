"""The one module that owns the database: engine and schema migrations.

SQLite (the embedded default) and PostgreSQL (``postgresql+psycopg://``) share one schema,
that of :mod:`search.models`.  :func:`migrate` creates it in a new database at once, from
the models, and stamps it with the last Alembic migration (:data:`SCHEMA_REVISION`); a
database made by an earlier version is upgraded by the Alembic migrations it lacks
(``search/migrations/``); one that is up to date is only read (Alembic is not loaded).
"""

from __future__ import annotations

import configparser
import functools
import logging
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    URL,
    Column,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    create_engine,
    event,
    inspect,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlalchemy.exc import DatabaseError as SADatabaseError

from search import config

#: Rows per ``IN (...)`` list: well under every backend's parameter limit.
IN_LIST_ROWS = 500


def chunks(seq: Sequence[Any] | Any, size: int = IN_LIST_ROWS) -> Iterable[Sequence[Any]]:
    """*seq* in slices of at most *size* (the values of one ``IN (...)`` list); a numpy
    array's or an ``array.array``'s as lists of Python ints, which the drivers take."""
    for i in range(0, len(seq), size):
        part = seq[i : i + size]
        yield part.tolist() if hasattr(part, "tolist") else part


logger = logging.getLogger(__name__)


class DatabaseError(Exception):
    """The database cannot be opened or migrated (the message is meant for users)."""


class EmptyDatabase(DatabaseError):
    """The database holds no table at all: nothing was ever stored in it (an empty SQLite
    file, ``touch data/spidersite.db``; a PostgreSQL database just created).  A crawl
    creates the schema in it, as in a missing file; a command that only reads finds
    nothing crawled yet (:func:`stored_revision`)."""


#: Times a transaction is tried when the database rolls it back to break a deadlock.
DEADLOCK_ATTEMPTS = 5


def cannot_open(exc: DBAPIError) -> bool:
    """Whether *exc* says the database cannot be used at all: not reached (a connection
    refused or lost, a file that cannot be opened: the driver's ``OperationalError``), or a
    SQLite file that is not a database or is damaged (``file is not a database``,
    ``database disk image is malformed``: the driver's generic ``DatabaseError``, which no
    more precise class of it covers).  Not a statement the database refused (a constraint,
    bad SQL)."""
    return isinstance(exc, OperationalError) or type(exc) is SADatabaseError


def driver_error(exc: BaseException) -> BaseException:
    """The database driver's own exception that *exc* wraps (SQLAlchemy's ``orig``), or
    *exc* itself."""
    return getattr(exc, "orig", None) or exc


def driver_message(exc: BaseException, limit: int | None = None) -> str:
    """The message of the driver's exception of *exc* (:func:`driver_error`: without
    SQLAlchemy's statement and its link) in one line, each run of whitespace one space (a
    driver's message may run over several lines); its first *limit* characters.  For a
    line a person reads (an error, a warning); a log's or a failure row's "type: first
    line" is :func:`search.worker.one_line`."""
    return " ".join(str(driver_error(exc)).split())[:limit]


def deadlocked(exc: DBAPIError) -> bool:
    """Whether the database rolled the statement's transaction back to break a deadlock
    (PostgreSQL's SQLSTATE 40P01): the transaction may be run again as it was."""
    return getattr(exc.orig, "sqlstate", None) == "40P01"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the indexer process and the search CLI read while the crawler writes.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=60000")
    cursor.close()


#: The databases the schema is written for (upserts use their dialects' ON CONFLICT).
BACKENDS = ("sqlite", "postgresql")

#: The libpq connection parameters every PostgreSQL connection gets where the database
#: URL's query does not give its own (``postgresql+psycopg://host/db?connect_timeout=3``):
#: without them a server host that vanishes holds the product for hours.
#:
#: - ``connect_timeout``: seconds a connection may take to be made (TCP, TLS, the
#:   login).  A server answers in milliseconds, a loaded one in well under a second; 10 s
#:   leave room for a slow network or a busy server.  Without it a host that stops
#:   answering, or a listener that never speaks, holds a connect for psycopg's own
#:   bound (130 s for each address of the host, psycopg 3.3).  psycopg applies it to
#:   each address it tries, 2 s at least (``PGCONNECT_TIMEOUT``, when set, is used
#:   instead of this default).
#: - ``keepalives`` (on), ``keepalives_idle``, ``keepalives_interval``,
#:   ``keepalives_count``: a connection silent for 30 s (idle in the pool, or waiting
#:   for the answer to a long statement) sends a TCP keepalive probe every 10 s; 3
#:   unanswered ones close it: a dead server host is known in about a minute, instead
#:   of the operating system's 2 hours and more (``tcp_keepalive_time``).  A server
#:   that is alive answers them whatever it is doing, so a long statement is not cut.
#: - ``tcp_user_timeout`` (libpq 12 or later, milliseconds): data sent but not
#:   acknowledged for 60 s closes the connection, where keepalives send nothing (a
#:   statement or a batch on its way when the host vanished: the operating system
#:   would retransmit it for about 15 minutes, ``tcp_retries2``).  It also bounds the
#:   keepalives' wait on Linux, to about the same minute.
#:
#: On a unix socket libpq leaves out the keepalives and ``tcp_user_timeout``.
PG_CONNECT_DEFAULTS: dict[str, int] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 60_000,
}

#: The environment variables of libpq that give one of :data:`PG_CONNECT_DEFAULTS`
#: (libpq's own defaults: they are used instead of ours).  libpq has none for the
#: keepalives or ``tcp_user_timeout`` (its list: ``psycopg.pq.Conninfo.get_defaults()``,
#: each parameter's ``envvar``; tests/test_unit_pgconnect.py checks this against it).
_PG_ENVIRONMENT = {"connect_timeout": "PGCONNECT_TIMEOUT"}


def pg_connect_args(url: URL, **defaults: Any) -> dict[str, Any]:
    """The connection arguments that give a connection to the PostgreSQL database at
    *url* the parameters of :data:`PG_CONNECT_DEFAULTS` (*defaults* replacing some of
    them) that neither its URL's query, nor libpq's environment, nor the connection
    service it names (:func:`pg_service_keys`) gives: SQLAlchemy passes the URL's query
    to the driver too, and a connection argument would override it, and the service's
    values as well.  Nothing for a driver that is not libpq's (psycopg's)."""
    if url.get_backend_name() != "postgresql" or not url.get_driver_name().startswith("psycopg"):
        return {}
    args = {**PG_CONNECT_DEFAULTS, **defaults}
    service = pg_service_keys(url)
    for key in list(args):
        variable = _PG_ENVIRONMENT.get(key)
        if (
            key in url.query
            or (variable is not None and os.environ.get(variable))
            or key in service
        ):
            del args[key]
    return args


def pg_service_keys(url: URL) -> frozenset[str]:
    """The parameters that the connection service named for *url* gives (its query's
    ``service``, else the environment's ``PGSERVICE``; none named: nothing), read from the
    first of :func:`_pg_service_files` whose sections include it, as libpq reads them.  A
    file that exists and cannot be read or parsed gives nothing, and no later file is
    read: libpq says what is wrong with it when it connects."""
    given = url.query.get("service")
    if isinstance(given, tuple):  # given twice: libpq takes the last
        given = given[-1] if given else None
    name = given if given is not None else os.environ.get("PGSERVICE")
    if not name:
        return frozenset()
    for path in _pg_service_files():
        try:
            path.stat()
        except OSError:
            continue  # libpq skips a file it cannot stat (not there)
        try:
            content = path.read_bytes()
        except OSError as exc:
            logger.debug("the connection service file %s cannot be read: %s", path, exc)
            return frozenset()
        # libpq's syntax: [service] sections of key=value lines, # comments.  No section
        # is everyone's ([DEFAULT] is a service like any other), and a value is taken as
        # it is (no interpolation).  configparser lowercases the keys, where libpq
        # compares them as written: libpq's parameter names are all lowercase, and one
        # that is not is an error of the file, which libpq reports when it connects.
        # The two differ on unusual files only: libpq refuses spaces around "=" and a
        # line without "=" in the service, and reads the first of a service's sections
        # where configparser merges them; configparser continues a value with an
        # indented line, and refuses a line before the first section (every default is
        # kept then), which libpq ignores.
        parser = configparser.ConfigParser(
            interpolation=None,
            strict=False,
            allow_no_value=True,
            delimiters=("=",),
            comment_prefixes=("#",),
            default_section="\0",
        )
        try:
            parser.read_string(content.decode("utf-8", "replace"), str(path))
        except Exception as exc:  # configparser.Error, and others on some garbled text
            message = " ".join(str(exc).split())
            logger.debug("the connection service file %s cannot be parsed: %s", path, message)
            return frozenset()
        if parser.has_section(name):
            return frozenset(parser.options(name))
    return frozenset()


def _pg_service_files() -> Iterator[Path]:
    """libpq's connection service files, in the order it looks a service up in them: the
    user's (``PGSERVICEFILE``, else ``~/.pg_service.conf``), then the system's
    ``pg_service.conf`` in ``PGSYSCONFDIR``, else in the folder ``pg_config --sysconfdir``
    names (:func:`_pg_sysconfdir`; none without ``pg_config``)."""
    user = os.environ.get("PGSERVICEFILE")
    if user is None:
        try:
            user = str(Path.home() / ".pg_service.conf")
        except RuntimeError:  # no home folder: libpq skips the file too
            user = ""
    if user:
        yield Path(user)
    folder = os.environ.get("PGSYSCONFDIR")
    if folder is None:
        folder = _pg_sysconfdir()
    if folder is not None:
        yield Path(f"{folder}/pg_service.conf")  # as libpq joins them


@functools.cache
def _pg_sysconfdir() -> str | None:
    """The folder of libpq's system-wide files when ``PGSYSCONFDIR`` is not set, which
    libpq has built in: the one ``pg_config --sysconfdir`` names (asked once), or None
    when there is no ``pg_config`` or it fails.  That is the system's libpq's; psycopg's
    binary package brings its own libpq, built for ``/etc/postgresql-common`` (as
    Debian's and Ubuntu's are), whatever ``pg_config`` says."""
    program = shutil.which("pg_config")
    if program is None:
        return None
    try:
        done = subprocess.run(
            [program, "--sysconfdir"], capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        logger.debug("pg_config --sysconfdir failed: %s", exc)
        return None
    return done.stdout.strip() or None


def check_url(url: str) -> URL:
    """The parsed URL of a database this project can use, else :class:`DatabaseError`
    with a one-line message that never repeats a password."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        scheme = url.split("://", 1)[0] if "://" in url else ""
        raise DatabaseError(
            f"{(scheme + '://…') if scheme else 'the value'!r} is not a database URL "
            f"(sqlite:///PATH or postgresql://user@host/database)"
        ) from None
    if parsed.get_backend_name() not in BACKENDS:
        raise DatabaseError(
            f"{describe(parsed)} is not a SQLite or PostgreSQL URL "
            f"(sqlite:///PATH or postgresql://user@host/database)"
        )
    return parsed


def describe(url: str | URL) -> str:
    """*url* as it may be shown: its password hidden."""
    if isinstance(url, str):
        try:
            url = make_url(url)
        except ArgumentError:
            return "the database URL"
    return url.render_as_string(hide_password=True)


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite database URL (None for other databases and ``:memory:``)."""
    parsed = check_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def probe(url: str, timeout: int | None = None) -> None:
    """Check, writing nothing, that the database at *url* can be opened: a SQLite file's
    folder can be created (or the file written), a PostgreSQL server answers and has the
    database (within *timeout* seconds, default :data:`PG_CONNECT_DEFAULTS`'s, unless the
    URL, ``PGCONNECT_TIMEOUT`` or the connection service gives ``connect_timeout``:
    :func:`pg_connect_args`).  Raises :class:`DatabaseError`, one line naming the
    URL (password hidden)."""
    parsed = check_url(url)
    path = sqlite_path(url)
    if path is not None:
        _probe_sqlite(path)
        return
    if parsed.get_backend_name() != "sqlite":
        try:
            given = {} if timeout is None else {"connect_timeout": timeout}
            engine = create_engine(parsed, connect_args=pg_connect_args(parsed, **given))
        except Exception as exc:  # a missing driver
            raise DatabaseError(f"cannot use the database {describe(parsed)}: {exc}") from None
        try:
            with engine.connect():
                pass
        except Exception as exc:
            reason = driver_message(exc)
            raise DatabaseError(
                f"cannot connect to the database {describe(parsed)}: {reason}"
            ) from None
        finally:
            engine.dispose()


def _probe_sqlite(path: Path) -> None:
    if path.exists():
        if not path.is_file():
            raise DatabaseError(f"cannot use the database sqlite:///{path}: not a file")
        if not os.access(path, os.R_OK | os.W_OK):
            raise DatabaseError(f"cannot use the database sqlite:///{path}: not writable")
        if not os.access(path.parent, os.W_OK | os.X_OK):  # SQLite's journal goes there
            raise DatabaseError(
                f"cannot use the database sqlite:///{path}: its folder {path.parent} is "
                f"not writable"
            )
        return
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise DatabaseError(
            f"cannot create the database sqlite:///{path}: {folder} is not a folder"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DatabaseError(
            f"cannot create the database sqlite:///{path}: {folder} is not writable"
        )


def empty_sqlite(path: Path) -> bool:
    """Whether the SQLite file at *path* has zero bytes (``touch``), with no write-ahead
    log beside it holding more: SQLite opens it as a new database, and writes its header
    into it when it opens it (the journal mode)."""
    try:
        if path.stat().st_size:
            return False
    except FileNotFoundError:
        return False
    wal = Path(f"{path}-wal")
    return not wal.exists() or wal.stat().st_size == 0


def read_only_sqlite(path: Path) -> bool:
    """Whether the SQLite file at *path* is there and its folder cannot be written (a
    read-only file system, a deployed copy): SQLite keeps its journal (the WAL and its
    index) beside the file, and cannot open it for writing, nor as it usually reads it."""
    return path.is_file() and not os.access(path.parent, os.W_OK | os.X_OK)


def _read_only_connect(path: Path) -> Any:
    """How to open the SQLite file at *path* in a folder that cannot be written: read-only
    (``mode=ro``), and, when no WAL is beside it (none can appear while the folder cannot
    be written, and none holds commits not in the file), as SQLite's *immutable* file,
    which it reads without the WAL's shared index it could not create there."""
    import sqlite3
    from urllib.parse import quote

    wal = Path(f"{path}-wal")
    options = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    uri = f"file:{quote(str(path.resolve()))}?{options}"

    def connect() -> Any:
        return sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=60)

    return connect


def create(url: str | None = None, **kwargs: Any) -> Engine:
    """An engine for *url* (default: :func:`search.config.database_url`).

    The SQLite file's folder is created if needed; a PostgreSQL connection gets the
    timeouts and TCP keepalives of :data:`PG_CONNECT_DEFAULTS` that neither its URL, nor
    libpq's environment, nor its connection service gives (:func:`pg_connect_args`).
    Raises :class:`DatabaseError` with a one-line message for malformed URLs and unknown
    drivers.
    """
    url = url or config.database_url()
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseError(f"invalid database URL {describe(url)!r}") from None
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            path = Path(parsed.database)
            if read_only_sqlite(path):
                kwargs.setdefault("creator", _read_only_connect(path))
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
        kwargs.setdefault("connect_args", {"check_same_thread": False, "timeout": 60})
    else:
        kwargs.setdefault("pool_pre_ping", True)
        kwargs["connect_args"] = {**pg_connect_args(parsed), **kwargs.get("connect_args", {})}
    # A statement's error names the statement, not its parameters: a batch's are every
    # stored page's text and postings (megabytes in one log line).
    kwargs.setdefault("hide_parameters", True)
    try:
        engine = create_engine(parsed, **kwargs)
    except Exception as exc:  # unknown dialect or missing driver
        raise DatabaseError(f"cannot use database URL {describe(parsed)!r}: {exc}") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


#: The last Alembic migration (``search/migrations/versions/``), whose schema is that of
#: :mod:`search.models`: a new database is created from the models and stamped with it,
#: and a database already there is up to date when Alembic's version table holds it.  A new
#: migration sets it to its revision (tests/test_unit_schema.py checks both).
SCHEMA_REVISION = "0014"

#: Alembic's version table, as Alembic creates it (``alembic_version``, one row).
_VERSION_TABLE = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


def migrate(engine: Engine) -> None:
    """Bring the schema up to date (idempotent): a new database gets the schema of
    :mod:`search.models` in one step, stamped at :data:`SCHEMA_REVISION`; an older one
    runs the Alembic migrations it lacks; an up-to-date one is left as it is."""
    try:
        with _migration_lock(engine):
            revision = schema_revision(engine)
            if revision == SCHEMA_REVISION:
                return
            path = sqlite_path(engine.url.render_as_string(hide_password=False))
            if path is not None and read_only_sqlite(path):
                raise DatabaseError(
                    f"cannot bring the database {describe(engine.url)} up to date (schema "
                    f"{revision or 'none'}, this version's is {SCHEMA_REVISION}): its folder "
                    f"{path.parent} cannot be written; run the command once where it can"
                )
            if revision is None:
                others = _others(_table_names(engine))
                if others:
                    raise DatabaseError(_not_ours(engine, others))
                try:
                    _create_schema(engine)
                except DBAPIError:
                    # Another process created it meanwhile (SQLite takes no lock for this).
                    if schema_revision(engine) != SCHEMA_REVISION:
                        raise
            else:
                run_migrations(engine)
    except (OperationalError, SADatabaseError) as exc:
        if not cannot_open(exc):
            raise
        raise DatabaseError(f"cannot open database {engine.url!r}: {exc.orig}") from None


def schema_revision(engine: Engine) -> str | None:
    """The Alembic revision the database is at (None: it has no version table, a new
    database)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table(_VERSION_TABLE.name):
            return None
        return conn.execute(_VERSION_TABLE.select()).scalar()


def stored_revision(engine: Engine) -> str:
    """The revision of the schema of a database a command only reads (and creates none
    in).  :class:`EmptyDatabase` when it holds no table at all (nothing was crawled into
    it, as into no database); :class:`DatabaseError` when it holds tables but no revision:
    another application's, or this one's with its creation cut short (a crawl completes
    it); a database that cannot be read raises the driver's error."""
    revision = schema_revision(engine)
    if revision is not None:
        return revision
    tables = _table_names(engine)
    if not tables:
        raise EmptyDatabase(f"the database {describe(engine.url)} holds no table")
    others = _others(tables)
    if others:
        raise DatabaseError(_not_ours(engine, others))
    raise DatabaseError(
        f"cannot use the database {describe(engine.url)}: the creation of its schema was "
        f"cut short (it has {len(tables)} of its {len(_our_tables())} tables and no "
        f"revision); a crawl into it completes it"
    )


def _our_tables() -> set[str]:
    """The tables of this project's schema (the models' and Alembic's version table)."""
    from search.models import Base

    return {*Base.metadata.tables, _VERSION_TABLE.name}


#: The tables of PostgreSQL's default schema that belong to an extension (``pg_depend``,
#: ``deptype = 'e'``): PostGIS's ``spatial_ref_sys``, for one.
_EXTENSION_TABLES = text(
    "SELECT c.relname FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass "
    "AND d.objid = c.oid AND d.deptype = 'e' "
    "WHERE c.relnamespace = to_regnamespace(current_schema())"
)


def _table_names(engine: Engine) -> list[str]:
    """The tables of the database (its default schema's on PostgreSQL; SQLite's own
    ``sqlite_…`` tables are not counted, nor PostgreSQL's tables that belong to an
    extension, which a database's owner installs: a database with only those is new)."""
    with engine.connect() as conn:
        tables = inspect(conn).get_table_names()
        if tables and engine.dialect.name == "postgresql":
            extensions = set(conn.scalars(_EXTENSION_TABLES))
            tables = [t for t in tables if t not in extensions]
        return tables


def _others(tables: list[str]) -> list[str]:
    """Those of *tables* that are not this project's, sorted."""
    return sorted(set(tables) - _our_tables())


def _not_ours(engine: Engine, others: list[str]) -> str:
    """Why a database with tables *others* and no revision is not used, in one line."""
    shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    return (
        f"cannot use the database {describe(engine.url)}: it holds tables that are not "
        f"spidersite's ({shown}) and not its schema; give spidersite a database of its own "
        f"(a new or empty one, whose schema it creates)"
    )


def _create_schema(engine: Engine) -> None:
    """Create the models' tables (those missing: a creation cut short is completed) and
    stamp the database at :data:`SCHEMA_REVISION`, as the migrations would leave it."""
    from search.models import Base

    with engine.begin() as conn:
        Base.metadata.create_all(conn)
        _VERSION_TABLE.create(conn, checkfirst=True)
        conn.execute(_VERSION_TABLE.insert().values(version_num=SCHEMA_REVISION))
    logger.info("Created the database schema (revision %s)", SCHEMA_REVISION)


def run_migrations(engine: Engine, revision: str = "head") -> None:
    """Run the Alembic migrations from the database's revision up to *revision* (what
    :func:`migrate` does for a database made by an earlier version)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.attributes["engine"] = engine
    with _migrations_folder() as folder:
        cfg.set_main_option("script_location", folder)
        command.upgrade(cfg, revision)


#: PostgreSQL advisory lock taken while the schema is migrated (any constant number).
MIGRATION_LOCK = 0x5D1D_E517


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """One migration at a time on a PostgreSQL database: the crawlers of a scaled-out crawl
    open the same (possibly new) database at once, and two concurrent ``CREATE TABLE``s of
    the first migration would fail.  The others wait, then find the schema up to date.
    SQLite serialises writers by itself."""
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK})
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK})
            conn.commit()


@contextmanager
def _migrations_folder() -> Iterator[str]:
    """Alembic's script location: the package folder, or a copy when the project runs from
    a zipped egg (as Scrapyd runs it), where Alembic cannot list the migrations."""
    import importlib.resources
    import shutil
    import tempfile

    package = importlib.resources.files("search.migrations")
    if isinstance(package, Path) or Path(str(package)).is_dir():
        yield "search:migrations"
        return
    tmp = tempfile.mkdtemp(prefix="spidersite-migrations-")
    try:
        target = Path(tmp) / "migrations"
        for folder, dest in ((package, target), (package / "versions", target / "versions")):
            dest.mkdir(parents=True, exist_ok=True)
            for entry in folder.iterdir():
                if entry.is_file() and entry.name.endswith((".py", ".mako")):
                    (dest / entry.name).write_bytes(entry.read_bytes())
        yield str(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def connect(url: str | None = None, *, upgrade: bool = True, **kwargs: Any) -> Engine:
    """An engine with an up-to-date schema."""
    engine = create(url, **kwargs)
    if upgrade:
        migrate(engine)
    return engine
