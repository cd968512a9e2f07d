"""Shared helpers for the benchmarks: the corpus sites, a local HTTP server, peak memory.

- :func:`corpus_root` extracts the archives of ``../shared/corpus/`` once into a cache
  folder (``benchmarks/.cache/corpus``, git-ignored) and returns that folder.
- :func:`serve` serves a folder on 127.0.0.1 on a free port from a *separate process*
  (nginx when it is installed, else Python's ``http.server``), so the server does not
  compete for the GIL with a crawler measured in this process.
- :func:`run_measured` runs a command and reports its wall time and peak RSS (the
  process and every descendant it spawns), with the RSS of the whole tree over time.

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
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
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


def machine() -> dict[str, object]:
    """What a benchmark's JSON says of the machine it ran on."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


# -- peak memory -----------------------------------------------------------------------


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
    """The main process's peak RSS (kernel ``ru_maxrss`` from ``wait4``, which also
    covers the children it waited for)."""
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
    ``ru_maxrss`` for the process (which also covers the children it waited for). The
    command runs in its own session; on timeout its whole process group is killed.
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
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    kernel_peak = usage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    main_peak = max(main_peak, kernel_peak)
    peak = max([main_peak, *child_peaks.values()])
    return Measured(
        returncode=proc.returncode,
        wall_s=wall,
        peak_rss_mb=peak,
        main_peak_rss_mb=main_peak,
        tree_peak_rss_mb=max(tree_peak, main_peak),
        timed_out=timed_out,
        left_behind=left_behind,
        child_peaks_mb=child_peaks,
        timeline=timeline,
    )
