"""The web application: search page, document pages and the crawl admin (Flask + Jinja2).

    python -m search serve [--host 127.0.0.1] [--port 8000] [--k1 0.9 --fb-min-words 1 ...]

:func:`create_app` builds it from :class:`~search.web.settings.WebSettings`; it reads the
same database and index as the command line.  This package never imports Scrapy: crawls
run as ``scrapy crawl`` subprocesses or as Scrapyd jobs (:mod:`search.web.jobs`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import Flask, jsonify, render_template, request
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import ServiceUnavailable

from search import db
from search.index import Index
from search.searcher import SearcherPool
from search.urls import has_scheme
from search.web import security
from search.web.ids import DatabaseId
from search.web.settings import WebSettings


def create_app(settings: WebSettings, engine: Any = None) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=settings.secret_key,
        SPIDERSITE=settings,
        SESSION_COOKIE_NAME="spidersite_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.cookie_secure,
        PERMANENT_SESSION_LIFETIME=timedelta(hours=12),
        MAX_CONTENT_LENGTH=1 << 20,
    )
    # The API's keys in the order the CLI's --json prints them (Flask 3 reads this here,
    # not JSON_SORT_KEYS).
    app.json.sort_keys = False  # type: ignore[attr-defined]
    # An id in a URL is a database id: a number past the database's 64-bit integers is a
    # page that does not exist (404), not an error of the database (500).
    app.url_map.converters["int"] = DatabaseId
    app.extensions["spidersite.engine"] = engine or db.connect(settings.database_url)
    app.extensions["spidersite.index"] = Index(settings.index_dir)
    app.extensions["spidersite.searchers"] = SearcherPool(
        app.extensions["spidersite.engine"], app.extensions["spidersite.index"], settings.ranking
    )

    from search.web import admin, runners, views

    app.extensions["spidersite.runner"] = runners.make_runner(settings)
    app.extensions["spidersite.login_limiter"] = security.RateLimiter(settings.login_attempts)
    app.extensions["spidersite.session_epoch"] = security.SessionEpoch(
        settings.data_dir / "web-session-epoch"
    )
    app.register_blueprint(views.bp)
    app.register_blueprint(admin.bp)
    app.before_request(security.check_csrf)
    app.after_request(security.security_headers)
    app.jinja_env.globals.update(
        csrf_token=security.csrf_token,
        logged_in=security.logged_in,
        admin_enabled=lambda: bool(settings.admin_password_hash),
    )
    app.jinja_env.filters["when"] = views.format_time
    app.jinja_env.filters["size"] = views.format_size
    app.jinja_env.filters["linkable"] = has_scheme

    def error(exc: Any) -> Any:
        code = getattr(exc, "code", 500) or 500
        name = getattr(exc, "name", "Error")
        text = getattr(exc, "description", "")
        if request.path.startswith("/api/"):  # a program reads it: JSON, as the API's own
            return jsonify(error=f"{name}: {text}" if text else name), code
        return render_template("error.html", code=code, name=name, text=text), code

    for code in (400, 403, 404, 405, 413, 500):
        app.register_error_handler(code, error)

    def read_only(exc: OperationalError) -> Any:
        """A write the database refuses because it cannot be written (a read-only
        deployment's SQLite file): said so, 503, not an internal error."""
        if not any(m in str(exc.orig).lower() for m in ("readonly", "read-only")):
            raise exc  # any other failure of the database: an internal error, as before
        return error(
            ServiceUnavailable(
                "The database cannot be written here (a read-only copy): the admin cannot "
                "change servers and seeds, or record crawls, on this server."
            )
        )

    app.register_error_handler(OperationalError, read_only)
    return app
