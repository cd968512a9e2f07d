"""Spelling suggestions (search.spelling): in the results, the command line, the JSON
answer and the search page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from search import db, spelling
from search.index import Index
from search.query import parse_query, replace_words
from search.searcher import Searcher
from search.spelling import edits1
from tests.conftest import run_search
from tests.test_unit_linkrank import indexed, row
from tests.test_web import make_app

PAGES = {
    "a": "Vacuuming reclaims storage occupied by dead tuples.",
    "b": "Run vacuum on the tables, then analyze them.",
    "c": "Streaming replication ships the write ahead log; checkpoints flush it.",
    "d": "Logical replication publishes changes of tables.",
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data = tmp_path_factory.mktemp("spelling")
    pages = [row(path, text, []) for path, text in PAGES.items()]
    engine, _ = indexed(data, pages, "spidersite.db")
    engine.dispose()
    yield data


@pytest.fixture(scope="module")
def searcher(data: Path) -> Iterator[Searcher]:
    engine = db.connect(f"sqlite:///{data / 'spidersite.db'}")
    yield Searcher(engine, Index(data / "index"))
    engine.dispose()


def suggestion(searcher: Searcher, text: str) -> str | None:
    return searcher.search(parse_query(text)).suggestion


def test_unknown_words_are_corrected_to_indexed_ones(searcher: Searcher) -> None:
    assert suggestion(searcher, "vacum") == "vacuum"
    # Shown as the stored surface form nearest to what was typed, not as a stem.
    assert suggestion(searcher, "vacuumng") == "vacuuming"
    # Found through the one-edit variants of the word typed: "replicaton" stems to itself.
    assert suggestion(searcher, "replicaton") == "replication"
    assert suggestion(searcher, "checkpoinst") == "checkpoints"


def test_a_query_whose_words_are_indexed_gets_no_suggestion(searcher: Searcher) -> None:
    assert suggestion(searcher, "vacuum tables") is None
    # Nothing close enough: no suggestion rather than a wild guess.
    assert suggestion(searcher, "zeppelin") is None
    # Short words are not corrected (too many stems are one edit away).
    assert suggestion(searcher, "tbl") is None


def test_only_the_misspelt_words_change_and_the_syntax_stays(searcher: Searcher) -> None:
    text = 'Vacum "streaming replicaton" -tables site:a.example'
    assert suggestion(searcher, text) == 'vacuum "streaming replication" -tables site:a.example'
    # An unknown word next to known ones is corrected, though the query has hits.
    page = searcher.search(parse_query("replication checkpont"))
    assert page.hits and page.suggestion == "replication checkpoints"


def test_replace_words_keeps_exclusions_sites_and_spacing() -> None:
    assert replace_words('  Foo  -foo site:foo "a foo"', {"foo": "bar"}) == (
        '  bar  -foo site:foo "a bar"'
    )
    assert replace_words("nothing here", {"foo": "bar"}) == "nothing here"


def test_edits1_are_one_edit_away() -> None:
    edits = edits1("abc")
    assert {"ab", "bac", "abd", "abcd", "xabc"} <= edits
    assert "abc" not in edits and "cba" not in edits


def test_suggestion_in_json_and_on_the_command_line(data: Path) -> None:
    proc = run_search("--json", "vacum", data_dir=data)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["suggestion"] == "vacuum" and answer["total"] == 0
    proc = run_search("vacum", data_dir=data)
    assert proc.stdout.splitlines()[0] == "Did you mean: vacuum"
    proc = run_search("--json", "vacuum", data_dir=data)
    assert json.loads(proc.stdout)["suggestion"] is None


def test_search_page_links_to_the_suggestion_escaped(data: Path) -> None:
    client = make_app(data, f"sqlite:///{data / 'spidersite.db'}").test_client()
    html = client.get("/?q=vacum").get_data(as_text=True)
    assert 'Did you mean <a href="/?q=vacuum&amp;page=1">vacuum</a>?' in html
    html = client.get("/?q=<i>vacum</i>").get_data(as_text=True)
    assert "<i>" not in html.split('id="suggestion"')[1].split("</p>")[0]
    assert "&lt;i&gt;vacuum&lt;/i&gt;" in html
    answer: Any = client.get("/api/search?q=replicaton").get_json()
    assert answer["suggestion"] == "replication"
    assert "suggestion" in str(client.get("/api/openapi.json").get_json())


def test_a_suggestion_is_never_the_word_typed_read_in_the_querys_language(
    tmp_path: Path,
) -> None:
    """A German page's stem "datenbank" is stored with its surface "Datenbanken", which
    English stems to "datenbanken", the stem typed: suggesting it would search the same
    again.  The suggestion is a word that finds the stem in the query's language."""
    german = row("de", "Datenbanken speichern Daten in Tabellen.", [], language="de")
    engine, index = indexed(tmp_path, [german], "spidersite.db")
    searcher = Searcher(engine, index)
    page = searcher.search(parse_query("Datenbanken"))
    assert page.total == 0
    assert page.suggestion is not None
    assert page.suggestion == "datenbank"  # German stems "Datenbanken" so, English not
    # The suggestion finds the page.
    assert searcher.search(parse_query(page.suggestion)).total == 1
    # In German, the word typed finds the page: no suggestion.
    page = searcher.search(parse_query("Datenbanken", language="de"))
    assert page.total == 1 and page.suggestion is None
    # A word of the page misspelt, in German: the page's word (stored lowercased), which
    # German stems to the stem suggested.
    page = searcher.search(parse_query("Datenbamken", language="de"))
    assert page.suggestion == "datenbanken"
    engine.dispose()


def test_few_hits_are_counted_before_the_query_is_expanded(tmp_path: Path) -> None:
    """A rare misspelling in a query that gets expanded: its three hits are few, though
    the expansion ("epsilon", a word of all three) finds five more pages."""
    pages = [row(f"t{i}", f"alpha beta gamma epsilon t{i}", []) for i in range(2)]
    pages.append(row("typo", "vacum epsilon", []))
    pages += [row(f"e{i}", f"epsilon alone e{i}", []) for i in range(5)]
    pages += [row(f"v{i}", f"vacuum cleaner v{i}", []) for i in range(12)]
    pages += [row(f"f{i}", f"filler page f{i}", []) for i in range(110)]
    engine, index = indexed(tmp_path, pages, "spidersite.db")
    searcher = Searcher(engine, index)
    q = parse_query("alpha beta gamma vacum")
    assert searcher.search(q, expand=False).total == 3 <= spelling.MAX_HITS
    page = searcher.search(q)
    assert page.total == 8
    assert page.suggestion == "alpha beta gamma vacuum"
    engine.dispose()
