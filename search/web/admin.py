"""The crawl admin, behind a login: the login itself, the overview, the crawl log.

Its views are routes of one blueprint (:data:`search.web.adminbase.bp`, ``/admin``); this
module imports the others, so that importing it registers them all: servers and seeds
(:mod:`search.web.adminservers`), crawls (:mod:`search.web.admincrawls`).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from flask import abort, current_app, redirect, render_template, request, url_for
from sqlalchemy import Date, cast, func, select
from sqlalchemy.orm import Session

from search.models import Crawl, CrawlError, Document, Server
from search.web import admincrawls, adminservers, security  # noqa: F401 (their routes)
from search.web.adminbase import bp, settings
from search.web.ids import MAX_ID, database_id
from search.web.views import engine

__all__ = ["bp"]

logger = logging.getLogger(__name__)

LOG_PAGE = 100
#: The last page of the crawl log a request may ask for (its offset a database integer).
MAX_LOG_PAGE = MAX_ID // LOG_PAGE

# -- login ----------------------------------------------------------------------------


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    enabled = bool(settings().admin_password_hash)
    error = None
    if request.method == "POST":
        if not enabled:
            abort(403, description="The admin is disabled: no admin password is configured.")
        address = request.remote_addr
        limiter: security.RateLimiter = current_app.extensions["spidersite.login_limiter"]
        count, wait = limiter.hit(address)
        if wait:
            seconds = security.retry_after(wait)
            if count == limiter.limit + 1:  # once per window, not once per attempt
                logger.warning(
                    "admin login attempts from %s over the limit (%d a minute): refused for %s s",
                    address,
                    limiter.limit,
                    seconds,
                )
            page = render_template(
                "error.html",
                code=429,
                name="Too Many Requests",
                text=f"Too many login attempts from your address: wait {seconds} s and try again.",
            )
            return page, 429, {"Retry-After": seconds}
        if security.check_password(request.form.get("password", "")):
            security.log_in()
            logger.info("admin login from %s", address)
            return redirect(security.safe_next(request.form.get("next")))
        logger.warning("admin login from %s failed: wrong password", address)
        time.sleep(0.5)  # slows down guessing
        error = "Wrong password."
    return (
        render_template(
            "admin_login.html", enabled=enabled, error=error, next=request.values.get("next", "")
        ),
        401 if error else 200,
    )


@bp.post("/logout")
def logout() -> Any:
    security.log_out()
    return redirect(url_for("search.home"))


# -- overview -------------------------------------------------------------------------


def _bucket(column: Any, hourly: bool) -> Any:
    if engine().dialect.name == "sqlite":
        return func.strftime("%Y-%m-%d %H:00" if hourly else "%Y-%m-%d", column)
    if hourly:
        return func.to_char(func.date_trunc("hour", column), "YYYY-MM-DD HH24:00")
    return func.to_char(cast(column, Date), "YYYY-MM-DD")


def chart(points: list[tuple[str, int]], width: int = 640, height: int = 160) -> dict[str, Any]:
    """Bar geometry for an inline SVG: documents crawled per period, and the running total."""
    top = max((n for _, n in points), default=0) or 1
    n = max(len(points), 1)
    slot = min(width / n, 48.0)
    bars = []
    total = 0
    line = []
    grand = sum(c for _, c in points) or 1
    for i, (label, count) in enumerate(points):
        h = round((height - 20) * count / top, 1)
        total += count
        x = round(i * slot + slot * 0.1, 1)
        bars.append(
            {
                "x": x,
                "y": round(height - 16 - h, 1),
                "w": round(slot * 0.8, 1),
                "h": h,
                "label": label,
                "count": count,
            }
        )
        cx = round(i * slot + slot / 2, 1)
        cy = round(height - 16 - (height - 20) * total / grand, 1)
        line.append(f"{cx},{cy}")
    return {"width": width, "height": height, "bars": bars, "line": " ".join(line), "top": top}


@bp.get("/")
@security.login_required
def overview() -> Any:
    with Session(engine()) as s:
        by_status = s.execute(
            select(Document.kind, Document.status, func.count())
            .group_by(Document.kind, Document.status)
            .order_by(Document.kind, Document.status)
        ).all()
        by_type = s.execute(
            select(Document.content_type, func.count())
            .group_by(Document.content_type)
            .order_by(func.count().desc())
            .limit(20)
        ).all()
        per_server = s.execute(
            select(
                Server.id,
                Server.url,
                func.count(Document.id),
                func.sum(func.coalesce(Document.size, 0)),
                func.max(Document.crawled_at),
            )
            .outerjoin(Document, Document.server_id == Server.id)
            .group_by(Server.id, Server.url)
            .order_by(Server.url)
        ).all()
        errors_per_server = dict(
            s.execute(
                select(CrawlError.server_id, func.count()).group_by(CrawlError.server_id)
            ).all()
        )
        first, last = s.execute(
            select(func.min(Document.crawled_at), func.max(Document.crawled_at))
        ).one()
        hourly = bool(first and last and (last - first).total_seconds() < 3 * 86400)
        bucket = _bucket(Document.crawled_at, hourly)
        points = [
            (str(label), int(count))
            for label, count in s.execute(
                select(bucket, func.count())
                .where(Document.crawled_at.is_not(None))
                .group_by(bucket)
                .order_by(bucket)
            ).all()
        ][-60:]
        totals = {
            "documents": s.scalar(select(func.count()).select_from(Document)),
            "indexed": s.scalar(select(func.count()).where(Document.indexed.is_(True))),
            "errors": s.scalar(select(func.count()).select_from(CrawlError)),
            "crawls": s.scalar(select(func.count()).select_from(Crawl)),
        }
    return render_template(
        "admin_overview.html",
        by_status=by_status,
        by_type=by_type,
        per_server=per_server,
        errors_per_server=errors_per_server,
        chart=chart(points),
        hourly=hourly,
        totals=totals,
    )


# -- the crawl log --------------------------------------------------------------------


@bp.get("/log")
@security.login_required
def log() -> Any:
    server = request.args.get("server", "")
    server_id = database_id(server)
    kind = request.args.get("kind", "")
    page = max(1, min(database_id(request.args.get("page")) or 1, MAX_LOG_PAGE))
    query = select(CrawlError, Server.url.label("server_url")).outerjoin(
        Server, Server.id == CrawlError.server_id
    )
    count = select(func.count()).select_from(CrawlError)
    if server_id is not None:
        query = query.where(CrawlError.server_id == server_id)
        count = count.where(CrawlError.server_id == server_id)
    if kind:
        query = query.where(CrawlError.kind == kind)
        count = count.where(CrawlError.kind == kind)
    with Session(engine()) as s:
        total = s.scalar(count) or 0
        rows = s.execute(
            query.order_by(CrawlError.time.desc(), CrawlError.id.desc())
            .limit(LOG_PAGE)
            .offset((page - 1) * LOG_PAGE)
        ).all()
        kinds = s.scalars(select(CrawlError.kind).distinct().order_by(CrawlError.kind)).all()
        all_servers = s.execute(select(Server.id, Server.url).order_by(Server.url)).all()
    last = max(1, math.ceil(total / LOG_PAGE))
    return render_template(
        "admin_log.html",
        rows=rows,
        total=total,
        kinds=kinds,
        servers=all_servers,
        server=server,
        kind=kind,
        page=page,
        last=last,
    )
