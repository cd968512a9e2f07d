"""The site spider's arguments (spidersite.arguments, search.crawlargs) and the rooms:
search/ never imports Scrapy, spidersite/ never reaches into the tables."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy.settings import Settings

from search.crawlargs import DEFAULT_TOPIC_THRESHOLD, parse_recrawl, parse_threshold
from search.servers import ConfigError
from spidersite.arguments import build_registry, check_arguments
from spidersite.crawlsettings import CrawlSettings
from tests.conftest import ROOT


def test_parse_recrawl() -> None:
    assert parse_recrawl(None) is None and parse_recrawl("") is None
    assert parse_recrawl(" DUE ") == "due"
    assert parse_recrawl("all") == "all"
    assert parse_recrawl(" Reanalyze") == "reanalyze"
    with pytest.raises(
        ConfigError, match=r"^recrawl: 'sometimes' is not one of: due, all, reanalyze$"
    ):
        parse_recrawl("sometimes")


@pytest.mark.parametrize("value", ["-1", "nan", "inf", -0.5])
def test_parse_threshold_refuses_what_is_not_a_finite_number_at_least_0(value: object) -> None:
    with pytest.raises(ConfigError, match="topic_threshold: must be a number ≥ 0"):
        parse_threshold(value)  # type: ignore[arg-type]


def test_parse_threshold() -> None:
    assert parse_threshold(None) == parse_threshold("") == DEFAULT_TOPIC_THRESHOLD
    assert parse_threshold("3.5") == 3.5
    with pytest.raises(ConfigError, match="'high' is not a number"):
        parse_threshold("high")


def test_check_arguments() -> None:
    settings = Settings({"SERVER_DEFAULTS": {}})
    check_arguments(settings, {"seeds": "http://a.example/", "_job": "1"})
    check_arguments(settings, {"recrawl": "due"})  # a re-crawl needs no seed
    check_arguments(settings, {"recrawl": "reanalyze"})
    with pytest.raises(ConfigError, match=r"unknown spider argument.*: seed \(the site"):
        check_arguments(settings, {"seed": "http://a.example/"})
    with pytest.raises(ConfigError, match="no seed URL"):
        check_arguments(settings, {})
    with pytest.raises(ConfigError, match="topic: give one or more words"):
        check_arguments(settings, {"seeds": "http://a.example/", "topic": " "})


def test_build_registry_keeps_seed_order_without_repeats() -> None:
    registry, seeds = build_registry(
        CrawlSettings.from_settings(Settings({"SERVER_DEFAULTS": {"maxhops": 3}})),
        "http://a.example/,http://b.example/x,http://a.example/",
    )
    assert seeds == ["http://a.example/", "http://b.example/x"]
    server = registry.get("http://b.example/y")
    assert server is not None and server.maxhops == 3


def test_the_web_admin_imports_no_scrapy() -> None:
    code = (
        "import sys, search.web.admin, search.crawlargs, search.crawldb, search.indexer; "
        "sys.exit('scrapy' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_crawler_reads_the_database_only_through_search() -> None:
    for path in sorted((ROOT / "spidersite").rglob("*.py")):
        bad = {n for n in _imports(path) if n.split(".")[0] == "sqlalchemy" or n == "search.models"}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
