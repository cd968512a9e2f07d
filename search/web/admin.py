"""The crawl admin, behind a login: servers, seeds, crawls, the crawl log, an overview."""

from __future__ import annotations

import logging
import math
import time
from datetime import UTC, datetime
from typing import Any

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from sqlalchemy import Date, cast, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from search import crawlargs
from search.models import Crawl, CrawlError, Document, Seed, Server
from search.servers import ConfigError
from search.urls import check_url, origin
from search.web import jobs, runners, security
from search.web.forms import FIELDS, ServerForm
from search.web.views import engine

logger = logging.getLogger(__name__)

bp = Blueprint("admin", __name__, url_prefix="/admin")

#: Stats shown in the crawl list (all of them on a crawl's page).
MAIN_STATS = (
    ("pages", "site/pages"),
    ("files", "site/files"),
    ("stored", "store/documents"),
    ("indexed", "index/documents"),
    ("errors", "log_count/ERROR"),
)
LOG_PAGE = 100


def runner() -> runners.Runner:
    return current_app.extensions["spidersite.runner"]


def settings() -> Any:
    return current_app.config["SPIDERSITE"]


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
            "admin_login.html", enabled=enabled, error=error, next=request.args.get("next", "")
        ),
        401 if error else 200,
    )


@bp.post("/logout")
def logout() -> Any:
    security.session.clear()
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


# -- servers and seeds ----------------------------------------------------------------


@bp.get("/servers")
@security.login_required
def servers() -> Any:
    with Session(engine()) as s:
        rows = s.scalars(select(Server).order_by(Server.url)).all()
        seeds = dict(s.execute(select(Seed.server_id, func.count()).group_by(Seed.server_id)).all())
    return render_template("admin_servers.html", servers=rows, seeds=seeds)


def _save_server(form: ServerForm, server_id: int | None) -> int | None:
    """Store the form; on a URL conflict, record the error in the form and return None."""
    now = datetime.now(UTC)
    try:
        with Session(engine()) as s, s.begin():
            found = Server(url=form.url, settings={}, net_errors=0, disabled=False)
            if server_id is None:
                s.add(found)
            else:
                existing = s.get(Server, server_id)
                if existing is None:
                    abort(404)
                found = existing
            server = found
            server.url = form.url
            server.admin_config = form.config
            server.updated_at = now
            s.flush()
            return server.id
    except IntegrityError:
        form.errors["url"] = f"the server {form.url} exists already"
        return None


@bp.route("/servers/new", methods=["GET", "POST"])
@security.login_required
def server_new() -> Any:
    form = ServerForm.from_config("", {})
    if request.method == "POST":
        form = ServerForm.from_request(request.form)
        if not form.errors:
            server_id = _save_server(form, None)
            if server_id is not None:
                flash(f"Server {form.url} added.")
                return redirect(url_for("admin.server_edit", server_id=server_id))
    status = 400 if form.errors else 200
    return render_template("admin_server.html", form=form, fields=FIELDS, server=None), status


@bp.route("/servers/<int:server_id>", methods=["GET", "POST"])
@security.login_required
def server_edit(server_id: int) -> Any:
    with Session(engine()) as s:
        server = s.get(Server, server_id)
        if server is None:
            abort(404, description=f"No server #{server_id}.")
        seeds = s.scalars(select(Seed).where(Seed.server_id == server_id).order_by(Seed.id)).all()
        s.expunge_all()
    stored = server.admin_config
    if stored is None:  # a server the crawler found: start from its effective settings
        stored = {k: v for k, v in (server.settings or {}).items() if k not in ("basic_auth",)}
    form = ServerForm.from_config(server.url, stored)
    if request.method == "POST":
        form = ServerForm.from_request(request.form, server.admin_config)
        if not form.errors and _save_server(form, server_id) is not None:
            flash(f"Server {form.url} saved.")
            return redirect(url_for("admin.server_edit", server_id=server_id))
    status = 400 if form.errors else 200
    return (
        render_template(
            "admin_server.html",
            form=form,
            fields=FIELDS,
            server=server,
            seeds=seeds,
            seed_error=None,
            seed_value="",
        ),
        status,
    )


@bp.post("/servers/<int:server_id>/seeds")
@security.login_required
def seed_add(server_id: int) -> Any:
    raw = (request.form.get("url") or "").strip()
    error = None
    with Session(engine()) as s:
        server = s.get(Server, server_id)
        if server is None:
            abort(404, description=f"No server #{server_id}.")
        try:
            url = check_url(raw)
        except ValueError as exc:
            error = f"invalid seed: {exc}"
        else:
            if origin(url) != server.url:
                error = f"invalid seed: {url} is not on the server {server.url}"
        if error is None:
            try:
                with Session(engine()) as writer, writer.begin():
                    writer.add(Seed(url=url, server_id=server_id, created_at=datetime.now(UTC)))
            except IntegrityError:
                error = f"{url} is a seed already"
        if error is None:
            flash(f"Seed {url} added.")
            return redirect(url_for("admin.server_edit", server_id=server_id))
        seeds = s.scalars(select(Seed).where(Seed.server_id == server_id).order_by(Seed.id)).all()
        stored = server.admin_config or {
            k: v for k, v in (server.settings or {}).items() if k != "basic_auth"
        }
        return (
            render_template(
                "admin_server.html",
                form=ServerForm.from_config(server.url, stored),
                fields=FIELDS,
                server=server,
                seeds=seeds,
                seed_error=error,
                seed_value=raw,
            ),
            400,
        )


@bp.post("/seeds/<int:seed_id>/delete")
@security.login_required
def seed_delete(seed_id: int) -> Any:
    with Session(engine()) as s, s.begin():
        seed = s.get(Seed, seed_id)
        if seed is None:
            abort(404, description=f"No seed #{seed_id}.")
        server_id = seed.server_id
        url = seed.url
        s.delete(seed)
    flash(f"Seed {url} removed.")
    if server_id is None:
        return redirect(url_for("admin.servers"))
    return redirect(url_for("admin.server_edit", server_id=server_id))


# -- crawls ---------------------------------------------------------------------------


def _stat(crawl: Crawl, key: str) -> Any:
    return (crawl.stats or {}).get(key, "")


@bp.get("/crawls")
@security.login_required
def crawls() -> Any:
    run = runner()
    jobs.reconcile(engine(), run)
    with Session(engine()) as s:
        rows = s.scalars(select(Crawl).order_by(Crawl.id.desc()).limit(100)).all()
        managed = s.scalars(
            select(Server).where(Server.admin_config.is_not(None)).order_by(Server.url)
        ).all()
        s.expunge_all()
    states = {c.id: jobs.crawl_state(c, run) for c in rows}
    running = [c for c in rows if states[c.id] != runners.FINISHED]
    finished = [c for c in rows if states[c.id] == runners.FINISHED]
    return render_template(
        "admin_crawls.html",
        running=running,
        finished=finished,
        states=states,
        servers=managed,
        main_stats=MAIN_STATS,
        stat=_stat,
        runner_name=run.name,
        error=None,
    )


@bp.post("/crawls/start")
@security.login_required
def crawl_start() -> Any:
    ids = [int(v) for v in request.form.getlist("server") if v.isdigit()]
    mode = request.form.get("mode", "normal")
    topic = (request.form.get("topic") or "").strip() or None
    threshold = None
    error = None
    if mode == "topic":
        if not topic:
            error = "topic: give one or more words for a topic crawl"
        raw = (request.form.get("topic_threshold") or "").strip()
        if raw:
            try:
                threshold = crawlargs.parse_threshold(raw)
            except ConfigError as exc:
                error = str(exc)
    else:
        topic = None
    recrawl = None
    if mode.startswith("recrawl-") and mode[len("recrawl-") :] in crawlargs.RECRAWL_MODES:
        recrawl = mode[len("recrawl-") :]
    elif mode not in ("normal", "topic"):
        error = f"unknown crawl mode {mode!r}"
    if error is None:
        try:
            crawl = jobs.start_crawl(
                engine(), runner(), settings(), ids or None, topic, threshold, recrawl
            )
        except runners.JobError as exc:
            error = str(exc)
        else:
            flash(f"Crawl started (job {crawl.job_id}).")
            return redirect(url_for("admin.crawls"))
    flash(error, "error")
    return redirect(url_for("admin.crawls"))


@bp.get("/crawls/<int:crawl_id>")
@security.login_required
def crawl_detail(crawl_id: int) -> Any:
    jobs.reconcile(engine(), runner())
    with Session(engine()) as s:
        crawl = s.get(Crawl, crawl_id)
        if crawl is None:
            abort(404, description=f"No crawl #{crawl_id} (it may have been merged).")
        errors = s.execute(
            select(CrawlError.kind, func.count())
            .where(CrawlError.crawl_id == crawl_id)
            .group_by(CrawlError.kind)
        ).all()
        s.expunge_all()
    return render_template(
        "admin_crawl.html",
        crawl=crawl,
        state=jobs.crawl_state(crawl, runner()),
        errors=errors,
        stats=sorted((crawl.stats or {}).items()),
    )


@bp.post("/crawls/<int:crawl_id>/stop")
@security.login_required
def crawl_stop(crawl_id: int) -> Any:
    with Session(engine()) as s:
        crawl = s.get(Crawl, crawl_id)
        if crawl is None:
            abort(404, description=f"No crawl #{crawl_id}.")
        s.expunge_all()
    if crawl.job_id is None:
        flash("This crawl was not started from the admin; it cannot be stopped here.", "error")
    else:
        try:
            runner().stop(crawl)
        except runners.JobError as exc:
            flash(str(exc), "error")
        else:
            flash(f"Stopping crawl #{crawl_id}.")
    return redirect(url_for("admin.crawls"))


@bp.get("/crawls/<int:crawl_id>/log")
@security.login_required
def crawl_log(crawl_id: int) -> Any:
    with Session(engine()) as s:
        crawl = s.get(Crawl, crawl_id)
        if crawl is None:
            abort(404, description=f"No crawl #{crawl_id}.")
        s.expunge_all()
    text = None
    error = None
    if crawl.job_id is None and not crawl.log_file:
        error = "This crawl was not started from the admin: its log is where it was written."
    else:
        try:
            text = runner().log(crawl, 512 * 1024) if crawl.job_id else None
        except runners.JobError as exc:
            error = str(exc)
    return render_template("admin_crawl_log.html", crawl=crawl, text=text, error=error)


# -- the crawl log --------------------------------------------------------------------


@bp.get("/log")
@security.login_required
def log() -> Any:
    server = request.args.get("server", "")
    kind = request.args.get("kind", "")
    try:
        page = max(1, int(request.args.get("page", "1")))
    except ValueError:
        page = 1
    query = select(CrawlError, Server.url.label("server_url")).outerjoin(
        Server, Server.id == CrawlError.server_id
    )
    count = select(func.count()).select_from(CrawlError)
    if server.isdigit():
        query = query.where(CrawlError.server_id == int(server))
        count = count.where(CrawlError.server_id == int(server))
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
