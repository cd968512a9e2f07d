"""Public pages: search, the JSON search endpoint and document pages."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Any

from flask import (
    Blueprint,
    abort,
    current_app,
    jsonify,
    make_response,
    render_template,
    request,
    url_for,
)
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from search.crawldb import CrawlDB
from search.index import Index, IndexMissing, SearchIndexError
from search.models import Crawl, Document, Link, Server
from search.query import QueryError, parse_query
from search.results import ResultPage
from search.searcher import SearcherPool
from search.web.security import CSP

bp = Blueprint("search", __name__)

MAX_PER_PAGE = 100
#: The last page a search may ask for.
MAX_PAGE = 10_000
MODES = ("any", "all")


def engine() -> Engine:
    return current_app.extensions["spidersite.engine"]


def index() -> Index:
    return current_app.extensions["spidersite.index"]


def searchers() -> SearcherPool:
    """The application's searchers, kept open between requests."""
    return current_app.extensions["spidersite.searchers"]


def format_time(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.strftime("%Y-%m-%d %H:%M:%S")


def format_size(value: int | None) -> str:
    if value is None:
        return "—"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)


class SearchRequest:
    """The search parameters of a request: q, mode, page, n, language."""

    def __init__(self, args: Any) -> None:
        self.q = (args.get("q") or "").strip()
        self.mode = args.get("mode", "any")
        self.language = (args.get("language") or "").strip() or None
        self.errors: list[str] = []
        if self.mode not in MODES:
            self.errors.append(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
            self.mode = "any"
        self.page = self._int(args, "page", 1, 1, MAX_PAGE)
        self.n = self._int(args, "n", current_app.config["SPIDERSITE"].per_page, 1, MAX_PER_PAGE)

    def _int(self, args: Any, name: str, default: int, low: int, high: int) -> int:
        raw = args.get(name)
        if raw in (None, ""):
            return default
        try:
            value = int(raw)
        except ValueError:
            self.errors.append(f"{name} must be a whole number, not {raw!r}")
            return default
        if not low <= value <= high:
            self.errors.append(f"{name} must be between {low} and {high}, not {value}")
            return default
        return value

    def run(self) -> ResultPage:
        """Search; raise QueryError or SearchIndexError with a message for the user."""
        parsed = parse_query(self.q, require_all=self.mode == "all", language=self.language)
        idx = index()
        if not idx.exists():
            raise IndexMissing(
                "there is no search index yet: crawl a site first, or rebuild it "
                "(python -m search reindex)"
            )
        with searchers().searcher() as searcher:
            return searcher.search(parsed, page=self.page, per_page=self.n)

    def answer(self) -> tuple[ResultPage | None, str | None, int]:
        """The results, or the message for the user and its status: 400 for a bad
        parameter or query, 503 without an index (the API's and the search page's)."""
        if self.errors:
            return None, "; ".join(self.errors), 400
        try:
            return self.run(), None, 200
        except QueryError as exc:
            return None, str(exc), 400
        except SearchIndexError as exc:
            return None, str(exc), 503

    def url(self, page: int, q: str | None = None) -> str:
        """This search's URL at *page* (with query *q* instead of this one's)."""
        params: dict[str, Any] = {"q": self.q if q is None else q, "page": page}
        if self.mode != "any":
            params["mode"] = self.mode
        if self.n != current_app.config["SPIDERSITE"].per_page:
            params["n"] = self.n
        if self.language:
            params["language"] = self.language
        return url_for("search.home", **params)


def page_numbers(current: int, last: int, width: int = 4) -> list[int]:
    return list(range(max(1, current - width), min(last, current + width) + 1))


@bp.get("/")
def home() -> Any:
    req = SearchRequest(request.args)
    # The empty page asks for nothing; a query or a bad parameter is answered as the API.
    result, error, status = req.answer() if req.q or req.errors else (None, None, 200)
    pages: list[int] = []
    last = 1
    if result is not None and result.total:
        last = math.ceil(result.total / result.per_page)
        pages = page_numbers(result.page, last)
    return (
        render_template("search.html", req=req, result=result, error=error, pages=pages, last=last),
        status,
    )


@bp.get("/api/search")
def api_search() -> Any:
    req = SearchRequest(request.args)
    result, error, status = req.answer()
    if result is None:
        return jsonify(error=error), status
    data = result.as_dict()
    data["mode"] = req.mode
    for hit in data["hits"]:
        hit["document"] = url_for("search.document", doc_id=hit["docid"], _external=True)
    return jsonify(data)


@bp.get("/api/openapi.json")
def openapi() -> Any:
    return jsonify(OPENAPI)


@bp.get("/doc/<int:doc_id>")
def document(doc_id: int) -> Any:
    with Session(engine()) as s:
        doc = s.get(Document, doc_id)
        if doc is None:
            abort(404, description=f"No document #{doc_id}.")
        server = s.get(Server, doc.server_id) if doc.server_id else None
        words, word_total = CrawlDB(engine()).top_words(doc_id)
        target = Document.__table__.alias("target")
        outgoing = s.execute(
            select(Link.to_url, Link.anchor, Link.nofollow, target.c.id)
            .outerjoin(target, target.c.url == Link.to_url)
            .where(Link.from_id == doc_id)
            .order_by(Link.id)
            .limit(500)
        ).all()
        # As of the last link analysis (a crawl's end, a reindex): links by target are
        # rebuilt then, not kept up as pages are stored.
        incoming = CrawlDB(engine()).inbound(doc_id)
        clone = s.get(Document, doc.clone_of_id) if doc.clone_of_id else None
        has_text = bool(s.scalar(select(func.length(Document.text)).where(Document.id == doc_id)))
    return render_template(
        "document.html",
        doc=doc,
        server=server,
        words=words,
        word_total=word_total,
        outgoing=outgoing,
        incoming=incoming,
        clone=clone,
        has_text=has_text,
    )


@bp.get("/doc/<int:doc_id>/text")
def document_text(doc_id: int) -> Any:
    with Session(engine()) as s:
        row = s.execute(
            select(Document.id, Document.url, Document.title, Document.text).where(
                Document.id == doc_id
            )
        ).first()
    if row is None:
        abort(404, description=f"No document #{doc_id}.")
    return render_template("document_text.html", doc=row)


@bp.get("/doc/<int:doc_id>/cached")
def document_cached(doc_id: int) -> Any:
    """The page as it was fetched, from the page store, served as plain text: a stored
    page is never rendered as HTML here (its scripts would run on this site)."""
    from search.pagestore import PageStoreError, read_response

    with Session(engine()) as s:
        row = s.execute(
            select(Document.warc_file, Document.warc_offset).where(Document.id == doc_id)
        ).first()
    if row is None:
        abort(404, description=f"No document #{doc_id}.")
    if row.warc_file is None or row.warc_offset is None:
        abort(404, description=f"Document #{doc_id} has no stored copy.")
    data_dir = current_app.config["SPIDERSITE"].data_dir
    if not Path(row.warc_file).resolve().is_relative_to(data_dir.resolve()):
        # Only the data folder is served: a path in the database never opens another file.
        abort(
            404,
            description=f"The stored copy of document #{doc_id} is outside the data "
            "folder; read it with python -m search cached.",
        )
    try:
        stored = read_response(row.warc_file, row.warc_offset)
    except PageStoreError as exc:
        abort(404, description=str(exc))
    response = make_response(stored.body)
    response.headers["Content-Type"] = "text/plain; charset=utf-8"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Disposition"] = "inline"
    # Even a browser that renders it anyway runs no script of it, on no origin.
    response.headers["Content-Security-Policy"] = CSP + "; sandbox"
    return response


@bp.get("/healthz")
def healthz() -> Any:
    with engine().connect() as conn:
        crawls = conn.execute(select(func.count()).select_from(Crawl)).scalar_one()
    return jsonify(status="ok", crawls=crawls, index=index().exists())


_HIT_SCHEMA = {
    "type": "object",
    "properties": {
        "rank": {"type": "integer"},
        "score": {"type": "number"},
        "docid": {"type": "integer"},
        "url": {"type": "string"},
        "title": {"type": "string", "nullable": True},
        "description": {"type": "string", "nullable": True},
        "content_type": {"type": "string", "nullable": True},
        "snippet": {"type": "string", "description": "plain text around the query words"},
        "snippet_html": {
            "type": "string",
            "description": "HTML-escaped snippet, query words in <b>",
        },
        "matches": {"type": "array", "items": {"type": "string"}},
        "document": {"type": "string", "description": "URL of the document page"},
    },
}

OPENAPI: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "spidersite search", "version": "1"},
    "paths": {
        "/api/search": {
            "get": {
                "summary": "Ranked search (the same results as the search page)",
                "parameters": [
                    {
                        "name": "q",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": 'words, "phrases", -excluded, site:host',
                    },
                    {
                        "name": "mode",
                        "in": "query",
                        "schema": {"type": "string", "enum": list(MODES), "default": "any"},
                    },
                    {
                        "name": "page",
                        "in": "query",
                        "schema": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_PAGE,
                            "default": 1,
                        },
                        "description": "page × n may not pass the first 10,000 results",
                    },
                    {
                        "name": "n",
                        "in": "query",
                        "schema": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_PER_PAGE,
                            "default": 10,
                        },
                    },
                    {"name": "language", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {
                        "description": "a page of results",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "query": {"type": "string"},
                                        "mode": {"type": "string"},
                                        "suggestion": {
                                            "type": "string",
                                            "nullable": True,
                                            "description": "did you mean: the query with "
                                            "its misspelt words corrected, or null",
                                        },
                                        "total": {"type": "integer"},
                                        "total_exact": {
                                            "type": "boolean",
                                            "description": "false: total is an estimate",
                                        },
                                        "page": {"type": "integer"},
                                        "per_page": {"type": "integer"},
                                        "seconds": {"type": "number"},
                                        "hits": {"type": "array", "items": _HIT_SCHEMA},
                                    },
                                }
                            }
                        },
                    },
                    "400": {"description": 'bad query or parameter: {"error": message}'},
                    "503": {"description": 'no index yet: {"error": message}'},
                },
            }
        }
    },
}
