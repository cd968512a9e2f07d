"""Crawls started from the admin (run by :mod:`search.web.runners`: Scrapyd jobs or local
``scrapy crawl`` processes).

The admin writes a sites file (TOML, the format of ``-a sites=``) from the servers and
seeds it manages under ``<data dir>/admin/``, named by its content (``sites-<hash>.toml``),
and starts the ``site`` spider with it: a crawl of the same servers, seeds and settings
has the same arguments as the last one, and resumes it when it was stopped or killed, as
the same ``scrapy crawl`` command does.  It records the crawl in ``crawls`` at once (a
*placeholder* row with the job id); when the spider opens, it writes its own row with the
same ``sites`` argument, and :func:`reconcile` moves the job id and log file onto that row
(the first such row not claimed by another job, started since) and drops the placeholder.
A crawl run from the command line has no job to ask about: :func:`reconcile` closes its
row when its crawl is dead, as a crawl starting would (:func:`close_dead_cli_crawls`).

This module does not import Scrapy: the crawler runs in another process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from search.crawllocks import CrawlLocks, close_dead_crawls, closed_message
from search.models import Crawl, Seed, Server
from search.servers import FIELD_NAMES
from search.sitesfile import ServerRegistry
from search.web.runners import FINISHED, PENDING, RUNNING, SPIDER, JobError, Runner
from search.web.settings import WebSettings

logger = logging.getLogger(__name__)

#: ``abandoned_found_by`` in the stats of a crawl's row the admin closed as dead (a crawl
#: that finds one gives its own id).
FOUND_BY_ADMIN = "admin"

# -- the sites file -------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # JSON string escapes are TOML basic-string escapes when non-ASCII stays raw.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} to TOML")


def sites_toml(servers: Iterable[tuple[str, Mapping[str, Any], list[str]]]) -> str:
    """A sites file for (url, admin fields, seeds) of each server."""
    lines = ["# Written by the spidersite web admin; edits here are not read back.", ""]
    for url, fields, seeds in servers:
        lines.append("[[server]]")
        lines.append(f"url = {_toml_value(url)}")
        if seeds:
            lines.append(f"seeds = {_toml_value(seeds)}")
        for name in sorted(fields):
            value = fields[name]
            if name in ("url", "seeds") or name not in FIELD_NAMES or value is None:
                continue
            lines.append(f"{name} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def write_sites_file(
    engine: Engine, folder: Path, server_ids: Iterable[int] | None = None
) -> tuple[Path, list[str]]:
    """Write the sites file of the admin's servers (all, or *server_ids*) into *folder*,
    named by its content (the same servers, seeds and fields: the same file, so that a
    crawl of them started again has the arguments of the last one); validate it.

    Returns its path and the server URLs written.  Raises :class:`JobError` when there is
    no server, or when the file does not validate (which the admin's own checks should
    prevent).
    """
    with Session(engine) as s:
        query = select(Server).where(Server.admin_config.is_not(None)).order_by(Server.url)
        if server_ids is not None:
            query = query.where(Server.id.in_(list(server_ids)))
        servers = s.scalars(query).all()
        entries = []
        for server in servers:
            seeds = s.scalars(
                select(Seed.url).where(Seed.server_id == server.id).order_by(Seed.id)
            ).all()
            entries.append((server.url, dict(server.admin_config or {}), list(seeds)))
    if not entries:
        raise JobError("no server to crawl: add a server in the admin first")
    text = sites_toml(entries)
    path = folder / f"sites-{hashlib.sha256(text.encode()).hexdigest()[:16]}.toml"
    # Whole or not at all: a crawl of the same servers may be reading it as it starts.
    part = folder / f".{path.name}.{uuid.uuid4().hex}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        part.write_text(text, encoding="utf-8")
        os.replace(part, path)
    except OSError as exc:  # a read-only data folder (a deployed copy)
        with contextlib.suppress(OSError):
            part.unlink()
        raise JobError(
            f"cannot write the crawl's sites file in {folder}: {exc.strerror}; crawls "
            f"cannot be started from a data folder that cannot be written"
        ) from None
    try:
        ServerRegistry().load_file(path)
    except ValueError as exc:
        raise JobError(f"the sites file does not validate: {exc}") from None
    return path, [url for url, _, _ in entries]


# -- starting and following crawls ----------------------------------------------------


def start_crawl(
    engine: Engine,
    runner: Runner,
    settings: WebSettings,
    server_ids: Iterable[int] | None = None,
    topic: str | None = None,
    topic_threshold: float | None = None,
    recrawl: str | None = None,
) -> Crawl:
    """Write the sites file, start the spider, record the crawl; return its row."""
    job_id = uuid.uuid4().hex
    sites, servers = write_sites_file(engine, settings.data_dir / "admin", server_ids)
    args: dict[str, str] = {"sites": str(sites)}
    if topic:
        args["topic"] = topic
        if topic_threshold is not None:
            args["topic_threshold"] = repr(float(topic_threshold))
    if recrawl:
        args["recrawl"] = recrawl
    started = runner.start(job_id, args)
    row = Crawl(
        spider=SPIDER,
        args={
            **args,
            "servers": servers,
            "runner": started.runner,
            "pid": started.pid,
            "placeholder": True,
        },
        started_at=datetime.now(UTC),
        stats={},
        job_id=started.job_id,
        log_file=started.log_file,
    )
    with Session(engine, expire_on_commit=False) as s, s.begin():
        s.add(row)
    return row


def reconcile(engine: Engine, runner: Runner) -> None:
    """Match admin crawls with the spider's rows, close crawls whose job is gone, then
    the rows of dead crawls run from the command line (:func:`close_dead_cli_crawls`)."""
    now = datetime.now(UTC)
    with Session(engine) as s, s.begin():
        open_rows = s.scalars(
            select(Crawl)
            .where(Crawl.job_id.is_not(None), Crawl.finished_at.is_(None))
            .order_by(Crawl.id)
        ).all()
        for row in open_rows:
            args = dict(row.args or {})
            if args.get("placeholder"):
                # The crawls of the same servers share a sites file: the earliest row not
                # claimed yet is this job's (placeholders are matched in their order).
                match = next(iter(_spider_rows(s, row)), None)
                if match is not None:
                    args.pop("placeholder")
                    match.args = {**args, **(match.args or {})}
                    match.job_id = row.job_id
                    match.log_file = row.log_file
                    s.delete(row)
                    continue
            try:
                state = runner.state(row)
            except JobError:
                continue
            if state == FINISHED:
                # Recheck: the spider may have written its row just before exiting.
                if args.get("placeholder") and _spider_rows(s, row):
                    continue
                row.finished_at = now
                code = getattr(runner, "exit_code", lambda _c: None)(row)
                if args.get("placeholder"):
                    reason = "did not start"
                    if code is not None:
                        reason += f" (exit status {code})"
                else:
                    reason = "process ended without closing"
                row.finish_reason = reason
    close_dead_cli_crawls(engine, now)


def close_dead_cli_crawls(engine: Engine, found_at: datetime) -> list[int]:
    """Close the row of every dead crawl without a job (run from the command line, or a
    spider's row no placeholder claimed yet), as a crawl starting would
    (:func:`search.crawllocks.close_dead_crawls`): unfinished, and its crawl lock free.
    Finish reason :data:`search.crawldb.ABANDONED`, finished at *found_at*,
    ``abandoned_found_by`` :data:`FOUND_BY_ADMIN`.  A crawl running holds its lock, on
    this machine or, on PostgreSQL, another: it is left alone, and so is every crawl of
    a SQLite database in memory (no lock).  The crawls the admin started are its
    runner's to follow (:func:`reconcile`).  Returns the ids of the rows closed; a
    database failure is logged in one line, and closes none."""
    closed = close_dead_crawls(
        CrawlLocks.of(engine), found_at, FOUND_BY_ADMIN, Crawl.job_id.is_(None)
    )
    if closed:
        logger.info("%s, run outside the admin", closed_message(closed))
    return closed


def _spider_rows(s: Session, placeholder: Crawl) -> list[Crawl]:
    """The spider's rows not claimed by a job that may be *placeholder*'s: the same sites
    file, started at most 5 minutes before it (the spider may write its row before the
    admin writes the placeholder) or after; earliest first."""
    started = _aware(placeholder.started_at) - timedelta(minutes=5)
    sites = (placeholder.args or {}).get("sites")
    rows = s.scalars(
        select(Crawl)
        .where(Crawl.job_id.is_(None), Crawl.spider == SPIDER, Crawl.started_at >= started)
        .order_by(Crawl.id)
    ).all()
    return [c for c in rows if (c.args or {}).get("sites") == sites]


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def crawl_state(crawl: Crawl, runner: Runner) -> str:
    if crawl.finished_at is not None:
        return FINISHED
    if crawl.job_id is None:
        return RUNNING  # started outside the admin; its lock held (else reconcile closed it)
    if (crawl.args or {}).get("placeholder"):
        return PENDING
    try:
        return runner.state(crawl)
    except JobError:
        return "unknown"
