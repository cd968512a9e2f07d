"""The admin's crawls: the list (running and finished), starting one (the form is
:class:`search.web.forms.CrawlForm`; the sites file and the job are
:mod:`search.web.jobs`'), a crawl's page, stopping it, its log file."""

from __future__ import annotations

from typing import Any

from flask import flash, redirect, render_template, request, url_for
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from search.models import Crawl, CrawlError, Server
from search.web import jobs, runners, security
from search.web.adminbase import bp, get_or_404, runner, settings
from search.web.forms import CrawlForm
from search.web.views import engine

#: Stats shown in the crawl list (all of them on a crawl's page).
MAIN_STATS = (
    ("pages", "site/pages"),
    ("files", "site/files"),
    ("stored", "store/documents"),
    ("indexed", "index/documents"),
    ("errors", "log_count/ERROR"),
)


def _stat(crawl: Crawl, key: str) -> Any:
    return (crawl.stats or {}).get(key, "")


def _crawl(crawl_id: int, description: str) -> Crawl:
    """The crawl *crawl_id*, detached from its session (else 404 saying *description*)."""
    with Session(engine()) as s:
        crawl = get_or_404(s, Crawl, crawl_id, description)
        s.expunge_all()
    return crawl


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
    form = CrawlForm.from_request(request.form)
    error = form.error
    if error is None:
        try:
            crawl = jobs.start_crawl(
                engine(),
                runner(),
                settings(),
                form.server_ids or None,
                form.topic,
                form.threshold,
                form.recrawl,
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
        crawl = get_or_404(s, Crawl, crawl_id, f"No crawl #{crawl_id} (it may have been merged).")
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
    crawl = _crawl(crawl_id, f"No crawl #{crawl_id}.")
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
    crawl = _crawl(crawl_id, f"No crawl #{crawl_id}.")
    text = None
    error = None
    if crawl.job_id is None and not crawl.log_file:
        error = "This crawl was not started from the admin: its log is where it was written."
    else:
        try:
            if crawl.job_id:
                text = runner().log(crawl, 512 * 1024)
            else:  # run from the command line: its log file in the data folder
                text = runners.local_log(settings().data_dir, crawl, 512 * 1024)
        except runners.JobError as exc:
            error = str(exc)
    return render_template("admin_crawl_log.html", crawl=crawl, text=text, error=error)
