"""The README is the user's manual: every crawl setting, spider argument, sites-file key,
``python -m search`` subcommand and option is named in it (as a table row's first cell
or in code), so that one added without its documentation fails here; and the defaults
its tables give for the settings, the sites-file keys and the options are the code's."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

from search.cli import build_parser
from search.servers import DEFAULTS, FIELD_NAMES, parse_duration, parse_size
from spidersite.arguments import KNOWN_ARGUMENTS
from spidersite.crawlsettings import CrawlSettings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
#: Every name the README writes as code: `NAME`, `--option`, `key`, `a key=value` ...
CODE = set(re.findall(r"`([^`\n]+)`", README))
#: ... and every word of those spans (an option shown with its value, `--k1 K`).
CODE_WORDS = {word for span in CODE for word in re.split(r"[\s=,/\[\]()|]+", span) if word}


def _table_rows() -> dict[str, tuple[list[str], int]]:
    """The README's table rows by the names in their first cell (`a`, `b` | … ): the
    other cells of the first row naming each, and which of the cell's names it is."""
    rows: dict[str, tuple[list[str], int]] = {}
    for line in README.splitlines():
        m = re.match(r"^\|\s*((?:`[A-Za-z_0-9]+`,?\s*)+)\|(.*)\|\s*$", line)
        if m:
            cells = [c.strip() for c in m.group(2).split("|")]
            for at, name in enumerate(re.findall(r"`([A-Za-z_0-9]+)`", m.group(1))):
                rows.setdefault(name, (cells, at))
    return rows


ROWS = _table_rows()


def _documented_default(cell: str, default: object, at: int = 0) -> object:
    """The value the README's default *cell* gives, read as *default* is typed (the
    *at*-th of a cell naming several, "`"1h"`, `"90d"`"); a sentence stays text."""
    words = [w.strip().strip("`").strip('"') for w in cell.split(" (")[0].split(",")]
    word = words[at] if at < len(words) else words[0]
    if isinstance(default, bool):
        return {"true": True, "false": False}.get(word, word)
    if default is None:
        return None if word in ("none", "from the page") else word
    if isinstance(default, int | float):
        try:
            return float(word)
        except ValueError:
            return word
    return word


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    return dict(actions[0].choices)


@pytest.mark.parametrize("name", sorted(f.name.upper() for f in dataclasses.fields(CrawlSettings)))
def test_every_crawl_setting_is_documented(name: str) -> None:
    assert name in CODE_WORDS, f"setting {name} is not in the README"


#: Settings whose default the README describes (it depends on the machine).
DESCRIBED = {"ANALYZE_PROCESSES"}
SETTING_DEFAULTS = {
    f.name.upper(): f.default
    for f in dataclasses.fields(CrawlSettings)
    # those resolved from the environment are described too
    if f.default is not dataclasses.MISSING
    and not f.metadata.get("resolved")
    and f.name.upper() not in DESCRIBED
}


@pytest.mark.parametrize("name", sorted(SETTING_DEFAULTS))
def test_every_crawl_settings_default_is_the_readmes(name: str) -> None:
    default = SETTING_DEFAULTS[name]
    cell = ROWS[name][0][1]
    if default is None:  # a path under the data folder, or no value
        assert _documented_default(cell, None) is None or "<data dir>" in cell, (name, cell)
    else:
        assert _documented_default(cell, default) == default, (name, cell, default)


#: How a sites-file key's default is written when it is not a plain value.
KEY_PARSERS = {
    "max_size": parse_size,
    "period": parse_duration,
    "min_period": parse_duration,
    "max_period": parse_duration,
}


@pytest.mark.parametrize("name", sorted(k for k in FIELD_NAMES if k in DEFAULTS))
def test_every_sites_file_keys_default_is_the_readmes(name: str) -> None:
    default = DEFAULTS[name]
    cells, at = ROWS[name]
    if name in KEY_PARSERS:
        word = _documented_default(cells[1], "", at)
        assert KEY_PARSERS[name](word) == default, (name, cells[1], default)
    elif isinstance(default, tuple):  # allow / deny: every URL, no URL
        assert not default and cells[1] in ("all", "none"), (name, cells[1])
    else:
        assert _documented_default(cells[1], default, at) == default, (name, cells[1], default)


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


def _option_defaults() -> dict[str, list[str]]:
    """The README's option rows (`--name VALUE` | default | …): each option's default
    cells, one a row naming it."""
    rows: dict[str, list[str]] = {}
    for line in README.splitlines():
        m = re.match(r"^\|\s*((?:`--[a-z0-9-]+[^`]*`,?\s*)+)\|(.*)\|\s*$", line)
        if m:
            cell = m.group(2).split("|")[0].strip()
            for name in re.findall(r"`(--[a-z0-9-]+)", m.group(1)):
                rows.setdefault(name, []).append(cell)
    return rows


OPTION_DEFAULTS = _option_defaults()
#: A default cell that gives a value: a number, or a word in code (`rm3`).
VALUE = re.compile(r"^(?:-?\d+(?:\.\d+)?|`[A-Za-z0-9][A-Za-z0-9_.-]*`)(?: \(.*\))?$")


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_search_options_default_is_the_readmes(name: str) -> None:
    checked = 0
    for action in _subcommands()[name]._actions:
        if action.default in (None, argparse.SUPPRESS) or isinstance(action.default, bool):
            continue
        for option in action.option_strings:
            for cell in OPTION_DEFAULTS.get(option, []):
                if VALUE.match(cell):
                    given = _documented_default(cell, action.default)
                    assert given == action.default, (name, option, cell, action.default)
                    checked += 1
    assert checked or name not in ("query", "eval", "reindex", "serve")


def test_a_name_missing_from_the_readme_is_found() -> None:
    assert "NO_SUCH_SETTING" not in CODE_WORDS
    assert "SITE_MAX_LINKS" in CODE_WORDS and "--k1" in CODE_WORDS
