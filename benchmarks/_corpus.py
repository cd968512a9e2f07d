"""Shared helpers for the benchmarks: the corpus sites, a local HTTP server.

- :func:`corpus_root` extracts the archives of ``../shared/corpus/`` once into a cache
  folder (``benchmarks/.cache/corpus``, git-ignored) and returns that folder.
- :func:`serve` serves a folder on 127.0.0.1 on a free port from a *separate process*
  (nginx when it is installed, else Python's ``http.server``), so the server does not
  compete for the GIL with a crawler measured in this process.
- Wall time and peak memory of a command are :mod:`_measure`'s.

Environment:

``SPIDERSITE_CORPUS``
    folder holding the ``*.tar.gz`` archives (default: ``shared/corpus`` beside the
    repository).
``SPIDERSITE_BENCH_CACHE``
    folder the archives are extracted into (default: ``benchmarks/.cache/corpus``).
``SPIDERSITE_HTTP_SERVER``
    ``nginx`` or ``python`` to force a server (default: nginx when on ``PATH``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
SITES: tuple[str, ...] = (
    "postgresql-15-docs",
    "python-3.11-docs",
    "debian-reference-zh-cn",
)
"""The three corpus sites; each archive ``<site>.tar.gz`` unpacks to a folder ``<site>/``."""


def corpus_dir() -> Path:
    """The folder holding the corpus archives."""
    env = os.environ.get("SPIDERSITE_CORPUS")
    if env:
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parents[2] / "shared" / "corpus"


def cache_dir() -> Path:
    """The folder the archives are extracted into."""
    env = os.environ.get("SPIDERSITE_BENCH_CACHE")
    if env:
        return Path(env).expanduser().resolve()
    return BENCH_DIR / ".cache" / "corpus"


def corpus_root(sites: Sequence[str] = SITES) -> Path:
    """Extract the archives of ``sites`` (once) and return the folder that holds them.

    Each archive is unpacked into a temporary folder beside its final place and renamed
    when complete, so an interrupted extraction is never mistaken for a finished one.
    """
    source, root = corpus_dir(), cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    for site in sites:
        target = root / site
        if (target / "index.html").is_file():
            continue
        archive = source / f"{site}.tar.gz"
        if not archive.is_file():
            raise FileNotFoundError(
                f"corpus archive not found: {archive} (set SPIDERSITE_CORPUS to its folder)"
            )
        print(f"extracting {archive.name} into {root} ...", file=sys.stderr)
        with tempfile.TemporaryDirectory(dir=root, prefix=f".{site}-") as tmp:
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
            unpacked = Path(tmp) / site
            if not (unpacked / "index.html").is_file():
                raise RuntimeError(f"{archive} did not unpack to {site}/index.html")
            if target.exists():  # a partial folder left by something else
                shutil.rmtree(target)
            unpacked.rename(target)
    return root


def seed_urls(base_url: str, sites: Sequence[str] = SITES) -> list[str]:
    """The entry page of each site, under a server whose root is :func:`corpus_root`."""
    return [f"{base_url}{site}/index.html" for site in sites]


# -- the HTTP server -------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Python's http.server, with what a 32-connection crawler needs: a listen backlog
# larger than socketserver's 5 (a full backlog drops SYNs, which then wait a second to
# be retried), HTTP/1.1 keep-alive, and no per-request log lines on stderr.
_PY_SERVER = """\
import functools, http.server, sys

class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 256

handler = functools.partial(Handler, directory=sys.argv[1])
Server(("127.0.0.1", int(sys.argv[2])), handler).serve_forever()
"""

_NGINX_CONF = """\
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    {mime_types}
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    keepalive_requests 100000;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port};
        server_name 127.0.0.1;
        root {root};
        location / {{ }}
    }}
}}
"""


# Used when nginx's own mime.types is not installed (e.g. nginx-common is missing).
_MIME_TYPES = """types {
        text/html html htm shtml;
        text/css css;
        text/plain txt;
        text/xml xml;
        application/javascript js;
        application/json json;
        image/png png;
        image/gif gif;
        image/jpeg jpeg jpg;
        image/svg+xml svg svgz;
        image/x-icon ico;
        application/pdf pdf;
    }"""


def server_kind() -> str:
    """``nginx`` or ``python``: which server :func:`serve` will start."""
    forced = os.environ.get("SPIDERSITE_HTTP_SERVER", "").strip().lower()
    if forced in {"nginx", "python"}:
        return forced
    if forced:
        raise ValueError(f"SPIDERSITE_HTTP_SERVER must be nginx or python, not {forced!r}")
    return "nginx" if shutil.which("nginx") else "python"


def ensure_server_kind() -> str:
    """As :func:`server_kind`, but install nginx first when it is missing.

    Without nginx on ``PATH`` (and no ``SPIDERSITE_HTTP_SERVER``), runs ``apt-get install
    nginx-light`` when apt-get is there and we are root (or ``sudo -n`` works); if nginx is
    still missing, warns on stderr and returns ``python``.
    """
    if os.environ.get("SPIDERSITE_HTTP_SERVER", "").strip() or shutil.which("nginx"):
        return server_kind()
    apt = shutil.which("apt-get")
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if apt and (not sudo or shutil.which("sudo")):
        print("nginx is missing: apt-get install nginx-light ...", file=sys.stderr, flush=True)
        subprocess.run(
            [*sudo, apt, "install", "-y", "-q", "nginx-light"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            check=False,
        )
    if shutil.which("nginx"):
        return "nginx"
    print(
        "warning: nginx is not installed and could not be; serving with Python's http.server "
        "instead (slower: the figures are not comparable with nginx's)",
        file=sys.stderr,
    )
    return "python"


def _server_command(kind: str, root: Path, port: int, tmp: Path) -> list[str]:
    if kind == "python":
        return [sys.executable, "-c", _PY_SERVER, str(root), str(port)]
    nginx = shutil.which("nginx")
    if nginx is None:
        raise FileNotFoundError("nginx is not on PATH")
    mime = Path(nginx).resolve().parents[1] / "etc" / "nginx" / "mime.types"
    candidates = (Path("/etc/nginx/mime.types"), mime)
    mime_types = next((f"include {p};" for p in candidates if p.is_file()), _MIME_TYPES)
    conf = tmp / "nginx.conf"
    conf.write_text(
        _NGINX_CONF.format(tmp=tmp, root=root, port=port, mime_types=mime_types),
        encoding="utf-8",
    )
    return [nginx, "-p", str(tmp), "-e", str(tmp / "error.log"), "-c", str(conf)]


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the HTTP server exited at start (code {proc.returncode})")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                response.read()
            return
        except urllib.error.HTTPError:
            return  # it answers; a 404 on the root is fine
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the HTTP server did not answer on {url}") from None
            time.sleep(0.05)


@contextlib.contextmanager
def serve(root: Path, kind: str | None = None) -> Iterator[str]:
    """Serve ``root`` over HTTP on 127.0.0.1 from a child process; yield the base URL.

    The base URL ends with ``/``, e.g. ``http://127.0.0.1:41234/``. The server is
    stopped when the ``with`` block ends.
    """
    kind = kind or server_kind()
    root = Path(root).resolve()
    with tempfile.TemporaryDirectory(prefix="spidersite-httpd-") as tmp_name:
        tmp = Path(tmp_name)
        port = free_port()
        errors = (tmp / "stderr.log").open("wb")
        proc = subprocess.Popen(
            _server_command(kind, root, port, tmp),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,
        )
        base_url = f"http://127.0.0.1:{port}/"
        try:
            try:
                _wait_until_up(base_url, proc, timeout=15)
            except (RuntimeError, TimeoutError) as exc:
                errors.flush()
                detail = (tmp / "stderr.log").read_text(errors="replace").strip()
                raise RuntimeError(f"{kind} server on {root}: {exc}\n{detail}") from None
            yield base_url
        finally:
            stop(proc)
            errors.close()


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a child process; kill it if it is still there after 10 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
