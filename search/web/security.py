"""Login, session and CSRF protection of the web application.

Every POST (the login form included) must carry the session's CSRF token in the form field
``csrf_token``; the admin pages need a logged-in session, and redirect to the login
otherwise.  A logged-in session holds the session epoch of its login (:class:`SessionEpoch`,
a file in the data folder); a logout draws a new one, so that every session cookie issued
before it, a copy kept by anyone included, is refused.  The admin password is only ever held
as a hash.  Login attempts are counted per
client address (:class:`RateLimiter`); every response carries the security headers of
:func:`security_headers`.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import ipaddress
import logging
import math
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import abort, current_app, redirect, request, session, url_for
from werkzeug.security import check_password_hash

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

CSRF_FIELD = "csrf_token"


def csrf_token() -> str:
    """The session's CSRF token (created on first use)."""
    token = session.get("csrf")
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        session["csrf"] = token
    return token


def check_csrf() -> None:
    """``before_request`` hook: refuse any state-changing request without the token.

    A request that no route takes (a path that is not there, a method its route does not
    take) is left to routing, which answers 404 or 405."""
    if request.method in ("GET", "HEAD", "OPTIONS") or request.url_rule is None:
        return
    sent = request.form.get(CSRF_FIELD, "")
    token = session.get("csrf")
    if not isinstance(token, str) or not sent or not hmac.compare_digest(sent, token):
        abort(
            400,
            description="The form has expired or was not sent by this site (CSRF "
            "token missing or wrong). Reload the page and try again.",
        )


class SessionEpoch:
    """The session epoch: a random token in a file of the data folder, which every
    logged-in session carries (``session["epoch"]``) and a logout replaces.

    It is read from the file at each check (a read of 64 bytes, and only for a session
    that says it is logged in), so that every process and thread serving the same data
    folder sees a logout at once; the file is created and replaced whole (a temporary
    file linked or renamed into place), so that a reader never sees it half-written.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        #: The epoch of this process alone, once the file could not be written (a
        #: read-only data folder): a logout then ends the sessions of this process only.
        self.own: str | None = None

    def current(self) -> str:
        if self.own is not None:
            return self.own
        try:
            return self.path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            pass
        try:
            self._write(replace=False)  # another process may have created it meanwhile
        except OSError:
            return self._own()
        return self.path.read_text(encoding="ascii").strip()

    def rotate(self) -> None:
        """A new epoch: every session logged in before now is refused (by this process
        only, when the file cannot be replaced)."""
        try:
            self._write(replace=True)
        except OSError:
            self.own = None
            self._own()

    def _own(self) -> str:
        if self.own is None:
            logger.warning(
                "Cannot write the session epoch %s: a logout ends the sessions of this "
                "process only",
                self.path,
            )
            self.own = secrets.token_urlsafe(32)
        return self.own

    def _write(self, replace: bool) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(8)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_urlsafe(32) + "\n")
            if replace:
                os.replace(tmp, self.path)
            else:
                with contextlib.suppress(FileExistsError):  # another process's won
                    os.link(tmp, self.path)
        finally:
            if tmp.exists():
                tmp.unlink()


def session_epoch() -> SessionEpoch:
    epoch: SessionEpoch = current_app.extensions["spidersite.session_epoch"]
    return epoch


def logged_in() -> bool:
    """The session is the admin's, and logged in since the last logout."""
    if not session.get("admin"):
        return False
    epoch = session.get("epoch")
    return isinstance(epoch, str) and hmac.compare_digest(epoch, session_epoch().current())


def login_required(view: F) -> F:
    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not logged_in():
            return redirect(url_for("admin.login", next=request.full_path.rstrip("?")))
        return view(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


def check_password(password: str) -> bool:
    hashed = current_app.config["SPIDERSITE"].admin_password_hash
    return bool(hashed) and bool(password) and check_password_hash(hashed, password)


def log_in() -> None:
    """Start a fresh session (a new CSRF token too), marked as the admin's."""
    session.clear()
    session["admin"] = True
    session["epoch"] = session_epoch().current()
    session["csrf"] = secrets.token_urlsafe(32)


def log_out() -> None:
    """End this session and, when it is logged in, every other one (a new session epoch):
    a copy of the cookie kept from before is refused too.  A session that is not logged in
    changes nothing for the others (anyone can get a CSRF token, the login form's)."""
    if logged_in():
        session_epoch().rotate()
    session.clear()


def safe_next(target: str | None) -> str:
    """A redirect target on this site only: a path that starts with one ``/``.

    Refused (the overview instead): a scheme (``https:``, ``javascript:``), a host
    (``//evil``), and backslashes, spaces or control characters anywhere, since browsers
    read ``/\\evil`` and ``/<tab>/evil`` as ``//evil``.
    """
    default = url_for("admin.overview")
    if not target or not target.startswith("/") or target.startswith("//"):
        return default
    if "\\" in target or any(ord(c) <= 32 or c == "\x7f" for c in target):
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return default
    return target


class RateLimiter:
    """At most *limit* hits per client in each window of *window* seconds.

    The table holds at most *max_clients* clients, in the order their window started:
    expired windows are dropped from its front at each hit, and when it is full the oldest
    window goes.  IPv6 clients are counted per /64 (one host usually owns a whole one).
    """

    def __init__(
        self,
        limit: int,
        window: float = 60.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window = window
        self.max_clients = max_clients
        self.clock = clock
        self._table: OrderedDict[str, list[float]] = OrderedDict()  # key -> [start, count]
        self._lock = threading.Lock()

    @staticmethod
    def key(address: str | None) -> str:
        try:
            ip = ipaddress.ip_address(address or "")
        except ValueError:
            return address or "-"
        if isinstance(ip, ipaddress.IPv6Address):
            if ip.ipv4_mapped is not None:
                return str(ip.ipv4_mapped)
            return str(ipaddress.ip_network(f"{ip}/64", strict=False))
        return str(ip)

    def hit(self, address: str | None) -> tuple[int, float]:
        """Count one hit; return (hits in the window so far, seconds to wait or 0)."""
        key = self.key(address)
        now = self.clock()
        with self._lock:
            table = self._table
            while table:
                first = next(iter(table.values()))
                if first[0] + self.window > now:
                    break
                table.popitem(last=False)
            entry = table.get(key)
            if entry is None:
                while len(table) >= self.max_clients:
                    table.popitem(last=False)
                entry = table[key] = [now, 0]
            entry[1] += 1
            count = int(entry[1])
            if count <= self.limit:
                return count, 0.0
            return count, max(entry[0] + self.window - now, 0.0)

    def __len__(self) -> int:
        return len(self._table)


def retry_after(seconds: float) -> str:
    """The Retry-After header value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))


#: The Content-Security-Policy of every page: nothing from elsewhere, no inline script,
#: never in a frame, forms post only here.
CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "object-src 'none'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
)


def security_headers(response: Any) -> Any:
    """``after_request`` hook, run for every response: pages, errors, static files."""
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Frame-Options", "DENY")
    return response
