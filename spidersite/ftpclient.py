"""An FTP client for the crawl: directory listings and file sizes with :mod:`ftplib`.

No Scrapy and no reactor here: each function opens one logged-in connection, runs its
commands and closes it, the whole session bounded by the server's ``read_timeout`` (a
:class:`~spidersite.handlers.SocketGuard` watches the control and data connections).  The
download handler (:mod:`spidersite.ftp`) runs them in threads of the reactor's pool.

- :func:`list_directory`: ``MLSD``; where the server does not know it, ``LIST`` in the Unix
  or DOS format (:func:`parse_list_line`); where that cannot be read, ``NLST``;
- :func:`stat_file`: ``SIZE`` and ``MDTM``.

A command the server refuses is an :class:`FTPReplyError` with the HTTP status its reply
maps to (:data:`CODE_MAPPING`: Scrapy's mapping, plus 530).
"""

from __future__ import annotations

import ftplib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from spidersite.handlers import SocketGuard

#: FTP reply code -> HTTP status of the response (Scrapy's mapping, plus 530).
CODE_MAPPING = {"550": 404, "530": 401, "default": 503}


@dataclass(slots=True)
class Entry:
    """One entry of a directory listing (size and time when the listing gives them)."""

    name: str
    is_dir: bool | None  # None: the listing does not say (NLST)
    size: int | None = None


class FTPReplyError(Exception):
    """A command the server refused: its reply, and the status it maps to."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply)
        code = reply[:3]
        self.status = CODE_MAPPING.get(code, CODE_MAPPING["default"])


_UNIX_RE = re.compile(
    r"^(?P<type>[-dlbcps])[-rwxsStTl+.@]{9}\S*\s+\d+\s+\S+\s+(?:\S+\s+)?(?P<size>\d+)\s+"
    r"(?:\w{3}\s+\d{1,2}\s+(?:\d{1,2}:\d{2}|\d{4})|\d{4}-\d{2}-\d{2}\s+\d{2}:\d{2})\s+(?P<name>.+)$"
)
_DOS_RE = re.compile(
    r"^\d{2}-\d{2}-\d{2,4}\s+\d{1,2}:\d{2}\s*[AaPp]?[Mm]?\s+(?P<size><DIR>|\d+)\s+(?P<name>.+)$"
)


def parse_list_line(line: str) -> Entry | None:
    """An entry of a ``LIST`` answer in the Unix (``ls -l``) or DOS format; None for a
    line in neither (a ``total`` line, another format), ``.`` and ``..``."""
    line = line.rstrip("\r\n")
    m = _UNIX_RE.match(line)
    if m:
        kind, name = m.group("type"), m.group("name")
        if kind == "l":  # a link: "name -> target", followed as a file
            name = name.split(" -> ", 1)[0]
        elif kind not in "-d":
            return None
        if name in (".", ".."):
            return None
        return Entry(name, kind == "d", int(m.group("size")) if kind == "-" else None)
    m = _DOS_RE.match(line)
    if m:
        size = m.group("size")
        if size == "<DIR>":
            return Entry(m.group("name"), True)
        return Entry(m.group("name"), False, int(size))
    return None


def _lines(ftp: ftplib.FTP, command: str, deadline: float) -> list[str]:
    lines: list[str] = []

    def keep(line: str) -> None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{command} took longer than the server's read_timeout")
        lines.append(line)

    ftp.retrlines(command, keep)
    return lines


def read_listing(ftp: ftplib.FTP, deadline: float) -> list[Entry]:
    """The entries of the current directory: ``MLSD``, else ``LIST``, else ``NLST``."""
    try:
        entries = []
        for line in _lines(ftp, "MLSD", deadline):
            facts_text, _, name = line.partition(" ")
            facts = dict(
                fact.split("=", 1) for fact in facts_text.lower().split(";") if "=" in fact
            )
            kind = facts.get("type", "file")
            if kind in ("cdir", "pdir") or not name or name in (".", ".."):
                continue
            size = facts.get("size")
            # A link (type=OS.unix=slink:…) is followed as a file.
            is_dir = kind == "dir"
            entries.append(Entry(name, is_dir, int(size) if size and size.isdigit() else None))
        return entries
    except ftplib.error_perm as exc:
        if not str(exc).startswith(("500", "501", "502", "504")):
            raise
    lines = _lines(ftp, "LIST", deadline)
    parsed = [parse_list_line(line) for line in lines]
    found = [e for e in parsed if e is not None]
    if found or not lines:
        return found
    return [
        Entry(name.rsplit("/", 1)[-1], None)
        for name in _lines(ftp, "NLST", deadline)
        if name.rsplit("/", 1)[-1] not in ("", ".", "..")
    ]


class _GuardedFTP(ftplib.FTP):
    """ftplib's client, its data connections watched by a :class:`SocketGuard` too."""

    guard: SocketGuard | None = None

    def ntransfercmd(self, cmd: str, rest: int | str | None = None) -> tuple[Any, int | None]:
        conn, size = super().ntransfercmd(cmd, rest)
        if self.guard is not None:
            self.guard.watch(conn)
        return conn, size


@dataclass(slots=True)
class Login:
    host: str
    port: int
    user: str
    password: str
    passive: bool
    timeout: float

    def open(self, guard: SocketGuard) -> ftplib.FTP:
        ftp = _GuardedFTP(timeout=self.timeout, encoding="utf-8")
        ftp.guard = guard
        guard.watch(lambda: ftp.sock)
        try:
            ftp.connect(self.host, self.port)
            ftp.login(self.user, self.password)
            ftp.set_pasv(self.passive)
        except BaseException:
            ftp.close()
            raise
        return ftp


#: ftplib's errors for a command the server refused.
_REFUSED = (ftplib.error_perm, ftplib.error_temp, ftplib.error_reply)


def _session(login: Login, work: Callable[[ftplib.FTP, float], Any]) -> Any:
    """Run *work(ftp, deadline)* on a new logged-in connection, the whole session bounded
    by the login's timeout; a refused command is an :class:`FTPReplyError` (other
    errors: OSError, EOFError, ftplib.error_proto …)."""
    deadline = time.monotonic() + login.timeout
    with SocketGuard(login.timeout) as guard:
        ftp: ftplib.FTP | None = None
        try:
            ftp = login.open(guard)
            return work(ftp, deadline)
        except _REFUSED as exc:
            raise FTPReplyError(str(exc)) from None
        except (OSError, EOFError):
            if guard.expired:
                raise _too_slow(login) from None
            raise
        finally:
            if ftp is not None:
                try:
                    ftp.quit()
                except (OSError, EOFError, ftplib.Error):
                    ftp.close()


def _too_slow(login: Login) -> TimeoutError:
    return TimeoutError(
        f"{login.host}:{login.port} took longer than {login.timeout:g} seconds "
        f"(the server's read_timeout)"
    )


def list_directory(login: Login, path: str) -> list[Entry]:
    """The entries of the directory *path*, by name (CWD fails with 550 when it is
    none)."""

    def work(ftp: ftplib.FTP, deadline: float) -> list[Entry]:
        ftp.cwd(path or "/")
        return sorted(read_listing(ftp, deadline), key=lambda e: e.name)

    result: list[Entry] = _session(login, work)
    return result


def stat_file(login: Login, path: str) -> tuple[int | None, datetime | None]:
    """``SIZE`` and ``MDTM`` of a file (None for what the server does not answer); 550
    when there is no such file."""

    def work(ftp: ftplib.FTP, deadline: float) -> tuple[int | None, datetime | None]:
        ftp.voidcmd("TYPE I")
        size = ftp.size(path)  # 550 for a missing file
        modified = None
        try:
            reply = ftp.voidcmd(f"MDTM {path}")
            modified = datetime.strptime(reply[4:18], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
        except (ftplib.error_perm, ValueError):
            pass
        return size, modified

    result: tuple[int | None, datetime | None] = _session(login, work)
    return result
