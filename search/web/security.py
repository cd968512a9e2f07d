"""Login, session and CSRF protection of the web application.

Every POST (the login form included) must carry the session's CSRF token in the form field
``csrf_token``; the admin pages need a logged-in session, and redirect to the login
otherwise.  The admin password is only ever held as a hash.
"""

from __future__ import annotations

import functools
import hmac
import secrets
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import abort, current_app, redirect, request, session, url_for
from werkzeug.security import check_password_hash

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
    """``before_request`` hook: refuse any state-changing request without the token."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    sent = request.form.get(CSRF_FIELD, "")
    token = session.get("csrf")
    if not isinstance(token, str) or not sent or not hmac.compare_digest(sent, token):
        abort(
            400,
            description="The form has expired or was not sent by this site (CSRF "
            "token missing or wrong). Reload the page and try again.",
        )


def logged_in() -> bool:
    return bool(session.get("admin"))


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
    session["csrf"] = secrets.token_urlsafe(32)


def safe_next(target: str | None) -> str:
    """A redirect target on this site only (no scheme, no host, no ``//``)."""
    if not target:
        return url_for("admin.overview")
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return url_for("admin.overview")
    return target


def security_headers(response: Any) -> Any:
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    )
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault("X-Frame-Options", "DENY")
    return response
