"""How the admin's crawls run: a :class:`Runner` starts the ``site`` spider, tells its
state, stops it and reads its log: :class:`LocalRunner` as a local ``scrapy crawl``
process, :class:`ScrapydRunner` as a Scrapyd job (``SPIDERSITE_SCRAPYD_URL``).

This module does not import Scrapy: the crawler runs in another process.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode, urljoin
from urllib.request import Request, urlopen

from search.models import Crawl
from search.web.settings import WebSettings

SPIDER = "site"
PENDING, RUNNING, FINISHED = "pending", "running", "finished"


class JobError(Exception):
    """A crawl cannot be started, listed or stopped (the message is meant for users)."""


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


def local_log(data_dir: Path, crawl: Crawl, limit: int = 512 * 1024) -> str:
    """The last *limit* bytes of the log file *crawl* wrote in the data folder's ``logs``
    (a crawl run by the local runner, or from the command line)."""
    if not crawl.log_file:
        raise JobError("this crawl has no log file")
    path = Path(crawl.log_file)
    if not path.resolve().is_relative_to((data_dir / "logs").resolve()):
        # The admin shows only the logs of its data folder: a path in the database never
        # opens another file of the machine.
        raise JobError(f"the log file {path} is not in {data_dir / 'logs'}")
    return _tail(path, limit)


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
        return local_log(self.settings.data_dir, crawl, limit)


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
