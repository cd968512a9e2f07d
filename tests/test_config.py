"""Bad configuration: every bad setting, seeds file or database is refused before the
crawl starts with one line naming it, exit status 2, no traceback, nothing written."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from search.mergepolicy import MAX_MERGE_DOCS
from search.servers import ConfigError
from spidersite.crawlsettings import CrawlSettings, crawl_settings
from spidersite.librarysettings import check_library_settings
from spidersite.pipelines import index_config
from tests.conftest import PG_ADMIN_URL, CrawlResult, free_port

SEED = "http://127.0.0.1:1/"


def refused(result: CrawlResult, needle: str) -> list[str]:
    """The lines of a crawl refused at start that mention *needle* (asserting the rest)."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.log
    written = {p.name for p in result.data_dir.iterdir()} - {"crawl.log"}
    assert written == set(), written  # no database, index, logs or lock
    return [line for line in result.stderr.splitlines() if needle in line]


# -- CrawlSettings ------------------------------------------------------------------------


def test_defaults_are_the_fields_defaults() -> None:
    config = CrawlSettings.from_settings(Settings())
    assert config.store_batch_size == 100 and config.site_canonical_cache == 4 * 1024 * 1024
    assert config.analyze_max_words == 50_000 and config.index_max_terms == 20_000
    assert config.pagestore_enabled is False and config.scaleout_redis_url is None
    # The project's settings module repeats none of them.
    import spidersite.settings as project

    for f in dataclasses.fields(CrawlSettings):
        assert not hasattr(project, f.name.upper()), f.name.upper()


def test_analysis_processes_default_to_two_fewer_than_the_cores_at_least_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from spidersite.crawlsettings import analysis_processes_default

    for cores, expected in ((1, 0), (2, 1), (3, 1), (4, 2), (6, 4), (16, 4)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=cores: set(range(n)))
        assert analysis_processes_default() == expected
    assert CrawlSettings.from_settings(Settings({"ANALYZE_PROCESSES": "1"})).analyze_processes == 1


def test_values_are_typed_and_zero_means_no_limit() -> None:
    config = CrawlSettings.from_settings(
        Settings(
            {
                "STORE_BATCH_SIZE": "7",
                "SITE_MAX_LINKS": "0",
                "INDEX_ENABLED": "False",
                "PAGESTORE_MAX_BYTES": "10MB",
                "SCALEOUT_IDLE_TIMEOUT": "2.5",
                "SERVER_DEFAULTS": '{"maxhops": 3}',
                "INDEX_MAX_MERGE_DOCS": "0",
            }
        )
    )
    assert config.store_batch_size == 7 and config.site_max_links is None
    assert config.index_enabled is False and not config.writes_index
    assert config.pagestore_max_bytes == 10 * 1024**2
    assert config.scaleout_idle_timeout == 2.5
    assert config.server_defaults == {"maxhops": 3}
    assert config.index_max_merge_docs is None  # 0: no cap
    assert CrawlSettings.from_settings(Settings()).index_max_merge_docs == MAX_MERGE_DOCS
    capped = CrawlSettings.from_settings(Settings({"INDEX_MAX_MERGE_DOCS": "5000"}))
    assert index_config(capped).max_merge_docs == 5000


BAD_VALUES = [
    ("STORE_BATCH_SIZE", "0", "STORE_BATCH_SIZE: must be a whole number ≥ 1, not '0'"),
    ("INDEX_BATCH_SIZE", "-5", "INDEX_BATCH_SIZE: must be a whole number ≥ 1, not '-5'"),
    ("INDEX_MAX_MERGE_DOCS", "-1", "INDEX_MAX_MERGE_DOCS: must be a whole number ≥ 0"),
    ("FRONTIER_MEMORY_REQUESTS", "x", "FRONTIER_MEMORY_REQUESTS: must be a whole number ≥ 0"),
    ("SITE_CANONICAL_CACHE", "lots", "SITE_CANONICAL_CACHE: must be a size in bytes ≥ 1"),
    ("ANALYZE_MAX_WORDS", "1.5", "ANALYZE_MAX_WORDS: must be a whole number ≥ 0"),
    ("ANALYZE_PROCESSES", "-1", "ANALYZE_PROCESSES: must be a whole number ≥ 0, not '-1'"),
    ("ANALYZE_PROCESSES", "all", "ANALYZE_PROCESSES: must be a whole number ≥ 0, not 'all'"),
    ("STORE_ENABLED", "maybe", "STORE_ENABLED: must be true or false"),
    ("CRAWLDELAY_MAX", "nan", "CRAWLDELAY_MAX: must be a number of seconds ≥ 0, not 'nan'"),
    ("WATCHDOG_GRACE", "-1", "WATCHDOG_GRACE: must be a number of seconds ≥ 0"),
    ("PAGESTORE_MAX_BYTES", "big", "PAGESTORE_MAX_BYTES: must be a size in bytes ≥ 1"),
    ("SERVER_DEFAULTS", '{"maxhops": -1}', "SERVER_DEFAULTS: field 'maxhops': must be ≥ 0"),
    ("SCALEOUT_REDIS_URL", "http://u:secret@h/", "SCALEOUT_REDIS_URL: 'http://…' is not a Redis"),
    (
        "STORE_DATABASE_URL",
        "mysql://u:secret@h/db",
        "STORE_DATABASE_URL: mysql://u:***@h/db is not a SQLite or",
    ),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD_VALUES)
def test_a_bad_value_is_one_line_naming_the_setting(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        CrawlSettings.from_settings(Settings({name: value}))
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value) and "secret" not in str(info.value)


def test_every_bad_value_is_listed() -> None:
    with pytest.raises(ConfigError) as info:
        CrawlSettings.from_settings(Settings({"STORE_BATCH_SIZE": 0, "INDEX_LIMITMB": "x"}))
    lines = str(info.value).splitlines()
    assert [line.split(":")[0] for line in lines] == ["STORE_BATCH_SIZE", "INDEX_LIMITMB"]


def test_the_environment_is_named_when_a_value_comes_from_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "oracle://scott:tiger@db/x")
    with pytest.raises(ConfigError, match=r"^STORE_DATABASE_URL \(from \$DATABASE_URL\): "):
        CrawlSettings.from_settings(Settings())


def test_parsed_once_per_crawler() -> None:
    crawler = get_crawler(settings_dict={"STORE_BATCH_SIZE": 5})
    crawler.settings.freeze()
    assert crawl_settings(crawler) is crawl_settings(crawler)
    assert crawl_settings(crawler).store_batch_size == 5


# -- Scrapy's and scrapy-playwright's settings ---------------------------------------------

#: Bad values of Scrapy's own settings the project sets or reads.
SCRAPY_BAD_VALUES = [
    ("DOWNLOAD_TIMEOUT", "abc", "DOWNLOAD_TIMEOUT: must be a number of seconds > 0, not 'abc'"),
    ("DOWNLOAD_TIMEOUT", "0", "DOWNLOAD_TIMEOUT: must be a number of seconds > 0, not '0'"),
    ("CONCURRENT_REQUESTS", "abc", "CONCURRENT_REQUESTS: must be a whole number ≥ 1, not 'abc'"),
    ("CONCURRENT_REQUESTS_PER_DOMAIN", "0", "CONCURRENT_REQUESTS_PER_DOMAIN: must be a whole"),
    ("RETRY_TIMES", "many", "RETRY_TIMES: must be a whole number ≥ 0, not 'many'"),
    (
        "SCRAPER_SLOT_MAX_ACTIVE_SIZE",
        "5MB",
        "SCRAPER_SLOT_MAX_ACTIVE_SIZE: must be a whole number ≥ 1, not '5MB'",
    ),
    ("DOWNLOAD_MAXSIZE", "32MB", "DOWNLOAD_MAXSIZE: must be a whole number ≥ 0 (0: no limit)"),
    ("DEPTH_PRIORITY", "first", "DEPTH_PRIORITY: must be a whole number, not 'first'"),
    ("COOKIES_ENABLED", "maybe", "COOKIES_ENABLED: must be true or false"),
    ("SCHEDULER_DISK_QUEUE", "no.such.Queue", "SCHEDULER_DISK_QUEUE: must be the import path"),
    (
        "DOWNLOAD_HANDLERS",
        '{"ftp": "no.such.Handler"}',
        "DOWNLOAD_HANDLERS: 'ftp': 'no.such.Handler' cannot be imported",
    ),
]

#: Bad values of scrapy-playwright's settings, checked when some server renders.
PLAYWRIGHT_BAD_VALUES = [
    ("PLAYWRIGHT_MAX_CONTEXTS", "x", "PLAYWRIGHT_MAX_CONTEXTS: must be a whole number ≥ 0"),
    ("PLAYWRIGHT_LAUNCH_OPTIONS", "notjson", "PLAYWRIGHT_LAUNCH_OPTIONS: must be a JSON object"),
    (
        "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT",
        "x",
        "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT: must be a whole number ≥ 1, not 'x'",
    ),
    (
        "PLAYWRIGHT_ABORT_REQUEST",
        "spidersite.render.no_such_function",
        "PLAYWRIGHT_ABORT_REQUEST: must be the import path of an object",
    ),
    ("PLAYWRIGHT_ABORT_REQUEST", "spidersite.render.HANDLER", "PLAYWRIGHT_ABORT_REQUEST: must be"),
]


def project_settings(**values: str) -> Settings:
    from scrapy.utils.project import get_project_settings

    settings = get_project_settings()
    settings.setdict(values, priority="cmdline")
    return settings


def test_the_projects_scrapy_and_playwright_settings_pass() -> None:
    check_library_settings(project_settings(), rendering=True)


@pytest.mark.parametrize(("name", "value", "message"), SCRAPY_BAD_VALUES + PLAYWRIGHT_BAD_VALUES)
def test_a_bad_scrapy_or_playwright_value_is_one_line(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_library_settings(project_settings(**{name: value}), rendering=True)
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("name", "value", "message"), PLAYWRIGHT_BAD_VALUES)
def test_playwright_settings_are_read_only_when_pages_are_rendered(
    name: str, value: str, message: str
) -> None:
    check_library_settings(project_settings(**{name: value}), rendering=False)


# -- the crawl command --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [BAD_VALUES[0], BAD_VALUES[3], BAD_VALUES[4], BAD_VALUES[9]],
)
def test_a_crawl_with_a_bad_setting_does_not_start(
    crawl: Any, name: str, value: str, message: str
) -> None:
    result = crawl("-a", f"seeds={SEED}", settings={name: value})
    assert len(refused(result, message)) == 1


@pytest.mark.parametrize(("name", "value", "message"), SCRAPY_BAD_VALUES[::2])
def test_a_crawl_with_a_bad_scrapy_setting_does_not_start(
    crawl: Any, name: str, value: str, message: str
) -> None:
    result = crawl("-a", f"seeds={SEED}", settings={name: value})
    assert len(refused(result, message)) == 1


@pytest.mark.parametrize(("name", "value", "message"), PLAYWRIGHT_BAD_VALUES)
def test_a_rendering_crawl_with_a_bad_playwright_setting_does_not_start(
    crawl: Any, tmp_path: Path, name: str, value: str, message: str
) -> None:
    sites = tmp_path / "sites.toml"
    sites.write_text(f'[[server]]\nurl = "{SEED}"\nrender_js = true\n', encoding="utf-8")
    result = crawl("-a", f"sites={sites}", settings={name: value})
    assert len(refused(result, message)) == 1


def test_an_unreadable_seeds_file_is_refused(crawl: Any, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "seeds.txt"
    result = crawl("-a", f"seeds_file={missing}")
    assert len(refused(result, f"{missing}: cannot read the seeds file")) == 1


@pytest.mark.postgres
@pytest.mark.parametrize("where", ["no such database", "nothing listens"])
def test_an_unreachable_database_is_refused(crawl: Any, where: str) -> None:
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgres@", "postgres:secret@")
    if where == "no such database":
        url = f"{base}/spidersite_no_such_database"
        reason = 'database "spidersite_no_such_database" does not exist'
    else:
        url = f"postgresql+psycopg://postgres:secret@127.0.0.1:{free_port()}/x"
        reason = "Connection refused"
    result = crawl("-a", f"seeds={SEED}", settings={"STORE_DATABASE_URL": url})
    (line,) = refused(result, "cannot connect to the database")
    assert reason in line and "postgres:***@" in line
    assert "secret" not in result.stderr + result.log


def test_a_sqlite_folder_that_cannot_be_created_is_refused(crawl: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    url = f"sqlite:///{blocker / 'db' / 'spidersite.db'}"
    result = crawl("-a", f"seeds={SEED}", settings={"STORE_DATABASE_URL": url})
    (line,) = refused(result, "cannot create the database")
    assert f"{blocker} is not a folder" in line


# -- Scrapy's cookies middleware: only with COOKIES_ENABLED ---------------------------------


def _downloader_middlewares(**values: object) -> list[str]:
    """The downloader middlewares of a crawl with the project's settings and *values*
    (at the command line's priority), after the project's add-ons."""
    from scrapy.utils.conf import build_component_list

    from spidersite.librarysettings import CookiesAddon

    settings = Settings()
    settings.setmodule("spidersite.settings", priority="project")
    settings.setdict(values, priority="cmdline")
    CookiesAddon().update_settings(settings)
    return [
        c if isinstance(c, str) else f"{c.__module__}.{c.__name__}"
        for c in build_component_list(settings.getwithbase("DOWNLOADER_MIDDLEWARES"))
    ]


COOKIES = "scrapy.downloadermiddlewares.cookies.CookiesMiddleware"


def test_cookies_middleware_only_when_cookies_are_on() -> None:
    off = _downloader_middlewares()
    assert COOKIES not in off
    assert "scrapy.downloadermiddlewares.retry.RetryMiddleware" in off
    on = _downloader_middlewares(COOKIES_ENABLED="true")
    assert COOKIES in on
    # At Scrapy's place: after the redirects (600), before the proxy (750).
    assert (
        on.index("scrapy.downloadermiddlewares.redirect.RedirectMiddleware")
        < on.index(COOKIES)
        < on.index("scrapy.downloadermiddlewares.httpproxy.HttpProxyMiddleware")
    )
    # A place the user gave it wins.
    mine = _downloader_middlewares(COOKIES_ENABLED="true", DOWNLOADER_MIDDLEWARES={COOKIES: 10})
    offsite = "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware"
    assert mine.index(COOKIES) < mine.index(offsite)
