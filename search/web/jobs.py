"""Crawls started from the admin: as Scrapyd jobs, or as local ``scrapy crawl`` processes.

The admin writes a sites file (TOML, the format of ``-a sites=``) from the servers and
seeds it manages, one file per crawl under ``<data dir>/admin/``, and starts the ``site``
spider with it.  It records the crawl in ``crawls`` at once (a *placeholder* row with the
job id); when the spider opens, it writes its own row with the same ``sites`` argument, and
:func:`reconcile` moves the job id and log file onto that row and drops the placeholder.

This module does not import Scrapy: the crawler runs in another process.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode, urljoin
from urllib.request import Request, urlopen

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from search.models import Crawl, Seed, Server
from search.servers import FIELD_NAMES, ServerRegistry
from search.web.settings import WebSettings

logger = logging.getLogger(__name__)

SPIDER = "site"
PENDING, RUNNING, FINISHED = "pending", "running", "finished"


class JobError(Exception):
    """A crawl cannot be started, listed or stopped (the message is meant for users)."""


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
    engine: Engine, path: Path, server_ids: Iterable[int] | None = None
) -> list[str]:
    """Write the sites file of the admin's servers (all, or *server_ids*); validate it.

    Returns the server URLs written.  Raises :class:`JobError` when there is no server, or
    when the file does not validate (which the admin's own checks should prevent).
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
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sites_toml(entries), encoding="utf-8")
    try:
        ServerRegistry().load_file(path)
    except ValueError as exc:
        raise JobError(f"the sites file does not validate: {exc}") from None
    return [url for url, _, _ in entries]


# -- runners --------------------------------------------------------------------------


@dataclass(slots=True)
class Started:
    job_id: str
    log_file: str | None
    runner: str
    pid: int | None = None


class Runner(Protocol):
    name: str

    def start(self, job_id: str, spider_args: Mapping[str, str]) -> Started: ...

    def state(self, crawl: Crawl) -> str: ...

    def stop(self, crawl: Crawl) -> None: ...

    def log(self, crawl: Crawl, limit: int) -> str: ...


def _tail(path: Path, limit: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read()
    except OSError as exc:
        raise JobError(f"cannot read the log file {path}: {exc.strerror}") from None
    text = data.decode("utf-8", "replace")
    return text if size <= limit else "…" + text.split("\n", 1)[-1]


class LocalRunner:
    """``python -m scrapy crawl site ...`` as a child process of the web application."""

    name = "local"

    def __init__(self, settings: WebSettings) -> None:
        self.settings = settings
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, job_id: str, spider_args: Mapping[str, str]) -> Started:
        logs = self.settings.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_file = logs / f"crawl-{job_id}.log"
        cmd = [sys.executable, "-m", "scrapy", "crawl", SPIDER]
        for key, value in spider_args.items():
            cmd += ["-a", f"{key}={value}"]
        cmd += ["-s", f"LOG_FILE={log_file}", "-s", "LOG_LEVEL=INFO"]
        env = dict(os.environ)
        env.update(
            SCRAPY_SETTINGS_MODULE="spidersite.settings",
            SPIDERSITE_DATA_DIR=str(self.settings.data_dir),
            SPIDERSITE_INDEX_DIR=str(self.settings.index_dir),
            DATABASE_URL=self.settings.database_url,
        )
        for key in ("SPIDERSITE_ADMIN_PASSWORD", "SPIDERSITE_SECRET_KEY"):
            env.pop(key, None)
        with log_file.open("ab") as out:
            try:
                proc = subprocess.Popen(
                    cmd,
                    cwd=self.settings.data_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise JobError(f"cannot start scrapy: {exc}") from None
        self.processes[job_id] = proc
        return Started(job_id, str(log_file), self.name, proc.pid)

    def _alive(self, crawl: Crawl) -> bool:
        proc = self.processes.get(crawl.job_id or "")
        if proc is not None:
            return proc.poll() is None
        # Started by an earlier run of the web application: the pid, if it is still ours.
        pid = (crawl.args or {}).get("pid")
        if not isinstance(pid, int):
            return False
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        return str(crawl.log_file or "\0").encode() in cmdline

    def state(self, crawl: Crawl) -> str:
        return RUNNING if self._alive(crawl) else FINISHED

    def exit_code(self, crawl: Crawl) -> int | None:
        proc = self.processes.get(crawl.job_id or "")
        return proc.poll() if proc is not None else None

    def stop(self, crawl: Crawl) -> None:
        if not self._alive(crawl):
            raise JobError("this crawl is not running")
        proc = self.processes.get(crawl.job_id or "")
        pid = proc.pid if proc is not None else int((crawl.args or {})["pid"])
        # SIGINT: Scrapy's graceful shutdown (a second one forces it).
        os.kill(pid, signal.SIGINT)

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the crawls this runner started to exit (tests, shutdown)."""
        for proc in list(self.processes.values()):
            proc.wait(timeout)

    def log(self, crawl: Crawl, limit: int = 512 * 1024) -> str:
        if not crawl.log_file:
            raise JobError("this crawl has no log file")
        path = Path(crawl.log_file)
        if not path.resolve().is_relative_to((self.settings.data_dir / "logs").resolve()):
            # The admin shows only the logs it wrote: a path in the database never opens
            # another file of the machine.
            raise JobError(f"the log file {path} is not in {self.settings.data_dir / 'logs'}")
        return _tail(path, limit)


class ScrapydRunner:
    """Scrapyd's JSON API: schedule.json, listjobs.json, cancel.json and the job logs."""

    name = "scrapyd"

    def __init__(self, settings: WebSettings, timeout: float = 15) -> None:
        assert settings.scrapyd_url
        self.settings = settings
        self.url = settings.scrapyd_url
        self.project = settings.scrapyd_project
        self.timeout = timeout
        self.auth = None
        if settings.scrapyd_username is not None:
            raw = f"{settings.scrapyd_username}:{settings.scrapyd_password or ''}"
            self.auth = "Basic " + base64.b64encode(raw.encode()).decode()

    def _call(
        self,
        path: str,
        data: Mapping[str, Any] | list[tuple[str, str]] | None = None,
        params: Mapping[str, str] | None = None,
        raw: bool = False,
    ) -> Any:
        url = urljoin(self.url, path)
        if params:
            url += "?" + urlencode(params)
        body = urlencode(data).encode() if data is not None else None
        req = Request(url, data=body, method="POST" if body is not None else "GET")
        if self.auth:
            req.add_header("Authorization", self.auth)
        try:
            with urlopen(req, timeout=self.timeout) as resp:
                content = resp.read()
        except HTTPError as exc:
            if exc.code == 401:
                raise JobError(
                    "Scrapyd refused the credentials (set SPIDERSITE_SCRAPYD_USERNAME "
                    "and SPIDERSITE_SCRAPYD_PASSWORD)"
                ) from None
            raise JobError(f"Scrapyd answered HTTP {exc.code} for {path}") from None
        except (URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise JobError(f"cannot reach Scrapyd at {self.url}: {reason}") from None
        if raw:
            return content.decode("utf-8", "replace")
        try:
            answer = json.loads(content)
        except ValueError:
            raise JobError(f"Scrapyd's answer to {path} is not JSON") from None
        if answer.get("status") != "ok":
            raise JobError(f"Scrapyd: {answer.get('message', 'error')}".strip())
        return answer

    def start(self, job_id: str, spider_args: Mapping[str, str]) -> Started:
        data: list[tuple[str, str]] = [
            ("project", self.project),
            ("spider", SPIDER),
            ("jobid", job_id),
            # The job writes where this application reads.
            ("setting", f"STORE_DATABASE_URL={self.settings.database_url}"),
            ("setting", f"INDEX_DIR={self.settings.index_dir}"),
            ("setting", f"SPIDERSITE_DATA_DIR={self.settings.data_dir}"),
        ]
        data += list(spider_args.items())
        answer = self._call("schedule.json", data)
        return Started(str(answer.get("jobid", job_id)), None, self.name)

    def jobs(self) -> dict[str, str]:
        answer = self._call("listjobs.json", params={"project": self.project})
        states: dict[str, str] = {}
        for state in (PENDING, RUNNING, FINISHED):
            for job in answer.get(state, []):
                states[str(job.get("id"))] = state
        return states

    def state(self, crawl: Crawl) -> str:
        return self.jobs().get(crawl.job_id or "", FINISHED)

    def stop(self, crawl: Crawl) -> None:
        self._call("cancel.json", {"project": self.project, "job": crawl.job_id or ""})

    def log_url(self, crawl: Crawl) -> str:
        return urljoin(self.url, f"logs/{self.project}/{SPIDER}/{crawl.job_id}.log")

    def log(self, crawl: Crawl, limit: int = 512 * 1024) -> str:
        text: str = self._call(f"logs/{self.project}/{SPIDER}/{crawl.job_id}.log", raw=True)
        return text if len(text) <= limit else "…" + text[-limit:]


def make_runner(settings: WebSettings) -> Runner:
    return ScrapydRunner(settings) if settings.scrapyd_url else LocalRunner(settings)


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
    sites = settings.data_dir / "admin" / f"sites-{job_id}.toml"
    servers = write_sites_file(engine, sites, server_ids)
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
    """Match admin crawls with the spider's rows, and close crawls whose job is gone."""
    now = datetime.now(UTC)
    with Session(engine) as s, s.begin():
        open_rows = s.scalars(
            select(Crawl).where(Crawl.job_id.is_not(None), Crawl.finished_at.is_(None))
        ).all()
        for row in open_rows:
            args = dict(row.args or {})
            if args.get("placeholder"):
                started = _aware(row.started_at)
                candidates = s.scalars(
                    select(Crawl).where(
                        Crawl.job_id.is_(None),
                        Crawl.spider == SPIDER,
                        Crawl.started_at >= started - timedelta(minutes=5),
                    )
                ).all()
                match = next(
                    (c for c in candidates if (c.args or {}).get("sites") == args.get("sites")),
                    None,
                )
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
                if args.get("placeholder") and _has_spider_row(s, args.get("sites")):
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


def _has_spider_row(s: Session, sites: Any) -> bool:
    rows = s.scalars(select(Crawl).where(Crawl.job_id.is_(None), Crawl.spider == SPIDER)).all()
    return any((c.args or {}).get("sites") == sites for c in rows)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def crawl_state(crawl: Crawl, runner: Runner) -> str:
    if crawl.finished_at is not None:
        return FINISHED
    if crawl.job_id is None:
        return RUNNING  # a crawl started outside the admin, still writing
    if (crawl.args or {}).get("placeholder"):
        return PENDING
    try:
        return runner.state(crawl)
    except JobError:
        return "unknown"
