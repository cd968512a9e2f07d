"""FTP: files through Scrapy's FTP handler, directory listings through :mod:`ftplib`.

Registered for the ``ftp`` scheme in ``DOWNLOAD_HANDLERS`` (``spidersite/settings.py``).
Scrapy's FTP handler fetches files but cannot list a directory (scrapy/scrapy#1478); this
handler adds what a crawl of an FTP server needs, every download bounded by the request's
``download_timeout`` (the server's ``read_timeout``, :class:`~spidersite.handlers.BoundedDownload`):

- a URL ending in ``/`` is a directory: it is listed with :mod:`ftplib` in a thread of the
  reactor's pool (``MLSD``; where the server does not know it, ``LIST`` in the Unix or DOS
  format; where that cannot be read, ``NLST``), and answered as an HTML page linking to
  its entries (sub-folders with a ``/``), at most ``FTP_MAX_ENTRIES`` of them, so the
  spider follows them like any page's links (allow/deny, ``maxhops``, ``max_pages``);
- a ``GET`` of a file is Scrapy's (``RETR``); a file that turns out to be a directory
  (``550`` and ``CWD`` works) is listed instead, as ``<url>/``;
- a ``HEAD`` (the spider's request for a file it records without reading: images,
  archives, …) asks ``SIZE`` and ``MDTM`` in a thread, and downloads nothing;
- responses get a ``Content-Type`` from the file name (:mod:`mimetypes`; a name it does
  not know is ``text/plain`` when its bytes are UTF-8 text without NUL bytes, else
  ``application/octet-stream``), a ``Content-Length`` and, from ``MDTM``, a
  ``Last-Modified``;
- FTP replies become statuses as Scrapy maps them: ``550`` (no such file) 404, ``530``
  (login refused) 401, any other failed command 503.

Credentials: the request's ``ftp_user`` / ``ftp_password`` meta keys (the server-config
middleware sets them from the server's ``basic_auth``), else Scrapy's ``FTP_USER`` and
``FTP_PASSWORD`` (anonymous); ``FTP_PASSIVE_MODE`` applies to listings too.

Stats: ``ftp/files`` (files fetched or sized), ``ftp/listings`` (directories listed),
``ftp/entries_dropped`` (entries past ``FTP_MAX_ENTRIES``), ``ftp/errors`` (failed FTP
downloads: an error status or an exception; a missing ``/robots.txt`` is not one).
"""

from __future__ import annotations

import ftplib
import html
import logging
import mimetypes
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote, unquote, urlsplit

from scrapy.core.downloader.handlers.ftp import FTPDownloadHandler as ScrapyFTPHandler
from scrapy.http import HtmlResponse, Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from search.urls import DEFAULT_PORTS
from spidersite.crawlsettings import crawl_settings
from spidersite.handlers import BoundedDownload, SocketGuard, download_timeout

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

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


# -- listings (pure functions, and ftplib in a thread) -----------------------------------

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


def listing_html(url: str, entries: list[Entry]) -> bytes:
    """The HTML page of a directory listing: a title, and a link per entry."""
    path = unquote(urlsplit(url).path) or "/"
    title = html.escape(f"Index of {path}")
    items = []
    for entry in entries:
        href = url + quote(entry.name) + ("/" if entry.is_dir else "")
        label = html.escape(entry.name + ("/" if entry.is_dir else ""))
        size = f" ({entry.size} bytes)" if entry.size is not None else ""
        items.append(f'<li><a href="{html.escape(href)}">{label}</a>{size}</li>')
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body><h1>{title}</h1><ul>{''.join(items)}</ul></body></html>"
    ).encode()


def content_type(path: str, body: bytes | None = None) -> str:
    """The type of a file by its name; by its bytes when the name says nothing."""
    guessed = mimetypes.guess_type(path.rsplit("/", 1)[-1], strict=False)[0]
    if guessed:
        return guessed
    if body:
        head = body[:8192]
        if b"\x00" not in head:
            try:
                head.decode("utf-8")
                return "text/plain"
            except UnicodeDecodeError as exc:
                if exc.start >= len(head) - 3:  # a character cut at the end of the sample
                    return "text/plain"
    return "application/octet-stream"


# -- the download handler --------------------------------------------------------------


class _FTPHandler(ScrapyFTPHandler):
    CODE_MAPPING: ClassVar[dict[str, int]] = CODE_MAPPING

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.crawler = crawler
        self.max_entries = crawl_settings(crawler).ftp_max_entries

    def _login(self, request: Request) -> Login:
        parts = urlsplit(request.url)
        timeout = download_timeout(request, self.crawler)
        return Login(
            host=parts.hostname or "",
            port=parts.port or DEFAULT_PORTS["ftp"],
            user=request.meta.get("ftp_user", self.default_user),
            password=request.meta.get("ftp_password", self.default_password),
            passive=bool(request.meta.get("ftp_passive", self.passive_mode)),
            timeout=timeout,
        )

    def _inc(self, name: str, count: int = 1) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(name, count)

    async def download_request(self, request: Request) -> Response:
        try:
            response = await self._download(request)
        except Exception:
            self._inc("ftp/errors")
            raise
        if response.status >= 400 and not (
            response.status == 404 and urlsplit(request.url).path == "/robots.txt"
        ):
            self._inc("ftp/errors")
        return response

    async def _download(self, request: Request) -> Response:
        path = unquote(urlsplit(request.url).path) or "/"
        if path.endswith("/"):
            return await self._listing(request, request.url, path)
        if request.method == "HEAD":
            return await self._stat(request, path)
        response = await super().download_request(request)
        if response.status == 404:  # perhaps a directory named without its "/"
            listing = await self._listing(request, request.url + "/", path, quiet=True)
            if listing.status == 200:
                return listing
            return response
        if response.status != 200:
            return response
        self._inc("ftp/files")
        limit = request.meta.get("download_maxsize")
        if limit and len(response.body) > limit:
            from scrapy.exceptions import DownloadCancelledError

            raise DownloadCancelledError(
                f"{request.url}: {len(response.body)} bytes, more than max_size ({limit})"
            )
        headers = {
            "Content-Type": content_type(path, response.body),
            "Content-Length": str(len(response.body)),
        }
        return Response(request.url, status=200, headers=headers, body=response.body)

    async def _listing(
        self, request: Request, url: str, path: str, quiet: bool = False
    ) -> Response:
        login = self._login(request)
        try:
            entries: list[Entry] = await maybe_deferred_to_future(
                deferToThread(list_directory, login, path)
            )
        except FTPReplyError as exc:
            if quiet:
                return Response(url, status=exc.status)
            return Response(url, status=exc.status, body=str(exc).encode())
        if self.max_entries is not None and len(entries) > self.max_entries:
            self._inc("ftp/entries_dropped", len(entries) - self.max_entries)
            logger.info(
                "%s: %d entries, only the first %d are followed (FTP_MAX_ENTRIES)",
                url,
                len(entries),
                self.max_entries,
            )
            entries = entries[: self.max_entries]
        self._inc("ftp/listings")
        return HtmlResponse(
            url,
            status=200,
            headers={"Content-Type": "text/html; charset=utf-8"},
            body=listing_html(url, entries),
        )

    async def _stat(self, request: Request, path: str) -> Response:
        login = self._login(request)
        try:
            size, modified = await maybe_deferred_to_future(deferToThread(stat_file, login, path))
        except FTPReplyError as exc:
            if not str(exc).startswith(("500", "502")):  # SIZE unknown: say what we know
                return Response(request.url, status=exc.status, body=str(exc).encode())
            size, modified = None, None
        self._inc("ftp/files")
        headers = {"Content-Type": content_type(path)}
        if size is not None:
            headers["Content-Length"] = str(size)
        if modified is not None:
            headers["Last-Modified"] = format_datetime(modified, usegmt=True)
        return Response(request.url, status=200, headers=headers)


class FTPDownloadHandler(BoundedDownload, _FTPHandler):
    """The FTP handler, its whole download bounded by ``download_timeout`` (Scrapy's FTP
    handler has no timeout of its own)."""

    grace = 0.0
