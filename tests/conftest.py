"""Shared fixtures: local HTTP servers on 127.0.0.1, crawls run as `scrapy crawl` in a
subprocess, and databases on SQLite and on the local PostgreSQL."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile the project once, before the first test (in the controller only, under
    xdist).  The suite starts hundreds of crawls and searches, each in new interpreters
    that import ~100 of its modules: where ``PYTHONDONTWRITEBYTECODE`` is set (as on this
    project's machines and CI) nothing writes ``__pycache__``, and every one of them would
    compile the sources again (0.2 to 0.3 s of CPU per process)."""
    if hasattr(session.config, "workerinput"):
        return
    import compileall

    for package in ("spidersite", "search"):
        compileall.compile_dir(ROOT / package, quiet=1)


#: Admin connection to the local PostgreSQL, where each test gets its own database.
PG_ADMIN_URL = os.environ.get(
    "SPIDERSITE_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


# -- a scriptable HTTP server ---------------------------------------------------------


@dataclass
class Route:
    """What the server answers for one path."""

    body: bytes | str = b""
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering
    auth: str | None = None  # "user:password" required (HTTP Basic)
    reset: bool = False  # close the connection half-way through the body
    head_status: int | None = None  # what a HEAD request gets instead (a server refusing HEAD)
    then: Route | None = None  # what the path answers after this answer, once
    gate: threading.Event | None = None  # answered once the test sets it (60 s at most)


@dataclass
class Hit:
    path: str
    method: str
    time: float
    headers: dict[str, str]
    proxied: bool


class Site:
    """A fixture site: routes by path (and by host for proxied requests), and a log."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.hits: list[Hit] = []
        self.lock = threading.Lock()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def add(self, path: str, body: bytes | str = b"", **kwargs: Any) -> Route:
        route = Route(body=body, **kwargs)
        self.routes[path] = route
        return route

    def page(
        self,
        path: str,
        title: str,
        body: str = "",
        links: list[str] = (),  # type: ignore[assignment]
        head: str = "",
        **kwargs: Any,
    ) -> Route:
        anchors = "".join(f'<a href="{href}">link to {href}</a> ' for href in links)
        html = (
            f"<!DOCTYPE html><html><head><title>{title}</title>{head}</head>"
            f"<body><h1>{title}</h1><p>{body}</p><p>{anchors}</p></body></html>"
        )
        return self.add(path, html, **kwargs)

    def requested(self, path: str) -> list[Hit]:
        with self.lock:
            return [h for h in self.hits if h.path == path]

    def paths(self) -> list[str]:
        with self.lock:
            return [h.path for h in self.hits]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Without this, small writes wait for delayed ACKs and a crawl crawls at 20 pages/s.
    disable_nagle_algorithm = True
    site: Site

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self, send_body: bool) -> None:
        site = self.site
        proxied = self.path.startswith("http://")
        if proxied:
            parts = urlsplit(self.path)
            path = f"//{parts.netloc}{parts.path or '/'}" + (
                f"?{parts.query}" if parts.query else ""
            )
        else:
            path = self.path
        with site.lock:
            site.hits.append(Hit(path, self.command, time.monotonic(), dict(self.headers), proxied))
        with site.lock:
            route = site.routes.get(path)
            if route is not None and route.then is not None:
                site.routes[path] = route.then
        if route is None:
            self._send(404, b"not found", "text/plain", {}, send_body)
            return
        if route.gate is not None:
            route.gate.wait(60)
        if route.delay:
            time.sleep(route.delay)
        if route.head_status is not None and self.command == "HEAD":
            self._send(route.head_status, b"", "text/plain", {}, False)
            return
        if route.auth is not None:
            import base64

            expected = "Basic " + base64.b64encode(route.auth.encode()).decode()
            if self.headers.get("Authorization") != expected:
                self._send(
                    401,
                    b"auth required",
                    "text/plain",
                    {"WWW-Authenticate": 'Basic realm="test"'},
                    send_body,
                )
                return
        body = route.body.encode("utf-8") if isinstance(route.body, str) else route.body
        etag = route.headers.get("ETag")
        if route.status == 200 and etag and self.headers.get("If-None-Match") == etag:
            self._send(304, b"", route.content_type, {"ETag": etag}, False)
            return
        if route.reset:
            self.send_response(route.status)
            self.send_header("Content-Type", route.content_type)
            self.send_header("Content-Length", str(len(body) * 10))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self._send(route.status, body, route.content_type, route.headers, send_body)

    def _send(
        self, status: int, body: bytes, ctype: str, headers: dict[str, str], send_body: bool
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def do_GET(self) -> None:
        self._serve(True)

    def do_HEAD(self) -> None:
        self._serve(False)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


@pytest.fixture
def site() -> Iterator[Site]:
    """A fresh fixture site on 127.0.0.1, on a free port."""
    yield from _serve_site()


@pytest.fixture
def site2() -> Iterator[Site]:
    """A second fixture site (another server)."""
    yield from _serve_site()


def _serve_site() -> Iterator[Site]:
    site = Site()
    handler = type("Handler", (_Handler,), {"site": site})
    server = _Server(("127.0.0.1", 0), handler)
    site.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    """A port on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- databases ------------------------------------------------------------------------


def _pg_available() -> bool:
    try:
        engine = create_engine(PG_ADMIN_URL)
        with engine.connect():
            pass
        engine.dispose()
        return True
    except Exception:
        return False


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new, empty PostgreSQL database for one test, dropped afterwards."""
    if os.environ.get("SPIDERSITE_TEST_PG") == "skip":
        pytest.skip("SPIDERSITE_TEST_PG=skip")
    if not _pg_available():
        pytest.fail(
            f"PostgreSQL is not reachable at {PG_ADMIN_URL} "
            f"(set SPIDERSITE_TEST_PG to its URL, or to 'skip')"
        )
    name = f"spidersite_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each storage test runs on SQLite and on the local PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db' / 'spidersite.db'}"
    return str(request.getfixturevalue("pg_url"))


# -- crawls ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorRow:
    """A ``crawl_errors`` row: its fields by name (not a tuple: no reading by position)."""

    url: str
    kind: str
    message: str


@dataclass(frozen=True)
class PostingRow:
    """A stem of a stored document as the design's WORD record has it: the document's id
    and URL, the stem, its surface form, its counts per section and its weight."""

    document_id: int
    url: str
    stem: str
    surface: str
    body_count: int
    title_count: int
    url_count: int
    desc_count: int
    keywords_count: int
    boilerplate_count: int
    weight: float

    @property
    def counts(self) -> tuple[int, ...]:
        """Its counts per section, in :data:`search.analysis.SECTIONS` order."""
        return (
            self.body_count,
            self.title_count,
            self.url_count,
            self.desc_count,
            self.keywords_count,
            self.boilerplate_count,
        )


def posting_rows(database: Any) -> list[PostingRow]:
    """Every stored posting of the database at *database* (a URL or an engine), a row a
    document and stem, in document then stem order (read through
    :meth:`search.crawldb.CrawlDB.postings`: one row a document in the database)."""
    from search.crawldb import CrawlDB

    engine = create_engine(database) if isinstance(database, str) else database
    try:
        with engine.connect() as conn:
            urls = dict(conn.execute(text("SELECT id, url FROM documents")).all())
        crawldb = CrawlDB(engine)
        postings = crawldb.postings(sorted(urls))
        stems = crawldb.stems(sorted({w for p in postings.values() for w in p.word_ids.tolist()}))
    finally:
        if isinstance(database, str):
            engine.dispose()
    out = []
    for did, p in sorted(postings.items()):
        assert p.surfaces is not None and p.weights is not None
        for wid, surface, counts, weight in zip(
            p.word_ids.tolist(), p.surfaces, p.counts.tolist(), p.weights.tolist(), strict=True
        ):
            out.append(PostingRow(did, urls.get(did, ""), stems[wid], surface, *counts, weight))
    return sorted(out, key=lambda r: (r.document_id, r.stem))


@dataclass
class CrawlResult:
    returncode: int
    stdout: str
    stderr: str
    data_dir: Path
    database_url: str

    @property
    def log(self) -> str:
        path = self.data_dir / "crawl.log"
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def engine(self) -> Any:
        return create_engine(self.database_url)

    def rows(self, sql: str, **params: Any) -> list[Any]:
        engine = self.engine()
        try:
            with engine.connect() as conn:
                return list(conn.execute(text(sql), params))
        finally:
            engine.dispose()

    def scalar(self, sql: str, **params: Any) -> Any:
        """The one column of the first row of *sql* (None without a row)."""
        engine = self.engine()
        try:
            with engine.connect() as conn:
                return conn.execute(text(sql), params).scalar()
        finally:
            engine.dispose()

    def postings(self) -> list[PostingRow]:
        """Every stored posting, a row a document and stem (:func:`posting_rows`)."""
        return posting_rows(self.database_url)

    @property
    def stats(self) -> dict[str, Any]:
        raw = self.scalar("SELECT stats FROM crawls ORDER BY id DESC LIMIT 1")
        return json.loads(raw) if isinstance(raw, str) else raw

    def urls(self, kind: str | None = None) -> set[str]:
        sql = "SELECT url FROM documents"
        if kind:
            return {r.url for r in self.rows(sql + " WHERE kind = :k", k=kind)}
        return {r.url for r in self.rows(sql)}

    def errors(self) -> list[ErrorRow]:
        """The crawl's ``crawl_errors`` rows, read by column name."""
        rows = self.rows("SELECT url, kind, message FROM crawl_errors")
        return [ErrorRow(r.url, r.kind, r.message) for r in rows]

    def error_kinds(self) -> set[tuple[str, str]]:
        """(url, kind) of every ``crawl_errors`` row."""
        return {(e.url, e.kind) for e in self.errors()}

    def search(self, *words: str) -> subprocess.CompletedProcess[str]:
        return run_search(*words, data_dir=self.data_dir, database_url=self.database_url)


def count_documents(database_url: str) -> int:
    """The number of stored pages, 0 while the database or its tables do not exist yet."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and not Path(url.database or "").exists():
        return 0  # connecting would create the file under the crawl's feet
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM documents")).scalar_one())
    except Exception:
        return 0
    finally:
        engine.dispose()


def damaged_sqlite(path: Path, damage: str) -> None:
    """A SQLite file at *path* that cannot be used: bytes that are not a database, or a
    database of this project cut to half its size (a copy cut short)."""
    if damage == "not a database":
        path.write_bytes(random.Random(3).randbytes(20_000))
        return
    from search import db

    engine = db.connect(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
    engine.dispose()
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@contextlib.contextmanager
def read_only_tree(path: Path) -> Iterator[None]:
    """The folder *path* and everything in it made read-only, as a deployed copy on a
    read-only file system: ``chattr -R +i`` as root (whom file modes do not stop), else
    ``chmod -R a-w``; skipped where neither can be done."""
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "-R", "+i", str(path)], capture_output=True)
        if made.returncode != 0:
            subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True)
            pytest.skip(f"chattr +i is not available here: {made.stderr!r}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-R", "-i", str(path)], check=True)
    else:
        subprocess.run(["chmod", "-R", "a-w", str(path)], check=True)
        try:
            yield
        finally:
            subprocess.run(["chmod", "-R", "u+w", str(path)], check=True)


def wait_for_documents(database_url: str, at_least: int, timeout: float = 60.0) -> int:
    """Poll a running crawl's database until it stores *at_least* pages (or *timeout*
    seconds pass); the count last seen."""
    deadline = time.monotonic() + timeout
    stored = count_documents(database_url)
    while stored < at_least and time.monotonic() < deadline:
        time.sleep(0.1)
        stored = count_documents(database_url)
    return stored


def _env(data_dir: Path, database_url: str | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SPIDERSITE_", "SCRAPY_")) and k != "DATABASE_URL"
    }
    env["SPIDERSITE_DATA_DIR"] = str(data_dir)
    if database_url:
        env["DATABASE_URL"] = database_url
    env["PYTHONWARNINGS"] = "ignore"
    return env


def crawl_command(data_dir: Path, *args: str, settings: dict[str, Any] | None = None) -> list[str]:
    """``scrapy crawl site ARGS`` with *settings*, logging into ``crawl.log`` of *data_dir*
    (created) at DEBUG level unless *settings* say otherwise."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", *args]
    settings = {"LOG_FILE": str(data_dir / "crawl.log"), "LOG_LEVEL": "DEBUG", **(settings or {})}
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    data_dir.mkdir(parents=True, exist_ok=True)
    return cmd


def _run(
    cmd: list[str], data_dir: Path, database_url: str | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd,
        cwd=ROOT,
        env=_env(data_dir, database_url),
        text=True,
        capture_output=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def run_crawl(
    data_dir: Path,
    *args: str,
    settings: dict[str, Any] | None = None,
    database_url: str | None = None,
    timeout: float = 300,
) -> CrawlResult:
    """Run ``scrapy crawl site ARGS`` in a subprocess, as a user would."""
    cmd = crawl_command(data_dir, *args, settings=settings)
    proc = _run(cmd, data_dir, database_url, timeout)
    url = database_url or f"sqlite:///{data_dir / 'spidersite.db'}"
    return CrawlResult(proc.returncode, proc.stdout, proc.stderr, data_dir, url)


def start_crawl(
    data_dir: Path,
    *args: str,
    settings: dict[str, Any] | None = None,
    database_url: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    """``scrapy crawl site ARGS`` in a subprocess that runs on (as run_crawl, not waited for),
    in a session of its own; *env*: more environment variables."""
    return subprocess.Popen(
        crawl_command(data_dir, *args, settings=settings),
        cwd=ROOT,
        env={**_env(data_dir, database_url), **(env or {})},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # a test may kill the crawl's process group
    )


def run_search(
    *args: str, data_dir: Path, database_url: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m search ARGS`` in a subprocess."""
    return _run([sys.executable, "-m", "search", *args], data_dir, database_url, timeout)


@pytest.fixture
def crawl(tmp_path: Path) -> Callable[..., CrawlResult]:
    """``crawl(*args, settings=..., database_url=...)``: a crawl into this test's data dir."""

    def _crawl(*args: str, **kwargs: Any) -> CrawlResult:
        return run_crawl(tmp_path / "data", *args, **kwargs)

    return _crawl


# -- the real sites of ../shared/corpus -----------------------------------------------

CORPUS = Path(os.environ.get("SPIDERSITE_CORPUS", ROOT.parent / "shared" / "corpus"))


class _StaticHandler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="session")
def corpus_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus archives, unpacked once per test session."""
    import tarfile

    if not CORPUS.is_dir():
        pytest.fail(f"the corpus is not at {CORPUS} (set SPIDERSITE_CORPUS)")
    root = tmp_path_factory.mktemp("corpus")
    for archive in sorted(CORPUS.glob("*.tar.gz")):
        with tarfile.open(archive) as tar:
            tar.extractall(root, filter="data")
    return root


@pytest.fixture(scope="session")
def corpus_url(corpus_root: Path) -> Iterator[str]:
    """The corpus served over HTTP on 127.0.0.1: ``<url>postgresql-15-docs/index.html``."""
    import functools

    handler = functools.partial(_StaticHandler, directory=str(corpus_root))
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
