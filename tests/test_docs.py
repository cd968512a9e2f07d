"""The README is the user's manual: every crawl setting, spider argument, sites-file key,
``python -m search`` subcommand and option is named in it (as a table row's first cell
or in code), so that one added without its documentation fails here."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from search.cli import build_parser
from search.servers import FIELD_NAMES
from spidersite.arguments import KNOWN_ARGUMENTS
from spidersite.crawlsettings import CrawlSettings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
#: Every name the README writes as code: `NAME`, `--option`, `key`, `a key=value` ...
CODE = set(re.findall(r"`([^`\n]+)`", README))
#: ... and every word of those spans (an option shown with its value, `--k1 K`).
CODE_WORDS = {word for span in CODE for word in re.split(r"[\s=,/\[\]()|]+", span) if word}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    return dict(actions[0].choices)


@pytest.mark.parametrize("name", sorted(f.name.upper() for f in dataclasses.fields(CrawlSettings)))
def test_every_crawl_setting_is_documented(name: str) -> None:
    assert name in CODE_WORDS, f"setting {name} is not in the README"


@pytest.mark.parametrize("name", sorted(KNOWN_ARGUMENTS))
def test_every_spider_argument_is_documented(name: str) -> None:
    assert name in CODE_WORDS, f"spider argument {name} is not in the README"


@pytest.mark.parametrize("name", sorted(FIELD_NAMES))
def test_every_sites_file_key_is_documented(name: str) -> None:
    assert name in CODE_WORDS, f"sites-file key {name} is not in the README"


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_search_subcommand_and_option_is_documented(name: str) -> None:
    assert f"python -m search {name}" in README, f"subcommand {name} is not in the README"
    options = {
        o
        for action in _subcommands()[name]._actions
        for o in action.option_strings
        if o.startswith("--") and o != "--help"
    }
    missing = sorted(o for o in options if o not in CODE_WORDS)
    assert not missing, f"options of {name} not in the README: {missing}"


def test_a_name_missing_from_the_readme_is_found() -> None:
    assert "NO_SUCH_SETTING" not in CODE_WORDS
    assert "SITE_MAX_LINKS" in CODE_WORDS and "--k1" in CODE_WORDS
