"""Unit tests for search.query.parse_query."""

from __future__ import annotations

import pytest

from search.query import ParsedQuery, QueryError, QueryTerm, parse_query


def test_terms_are_stemmed_in_order_with_positions() -> None:
    q = parse_query("Vacuuming tables Running")
    assert q.terms == [
        QueryTerm("vacuum", "vacuuming", 0),
        QueryTerm("tabl", "tables", 1),
        QueryTerm("run", "running", 2),
    ]
    assert q.stems == ["vacuum", "tabl", "run"]
    assert q.surfaces == {"vacuum": "vacuuming", "tabl": "tables", "run": "running"}
    assert q.text == "Vacuuming tables Running"


def test_duplicates_collapse_to_first_occurrence() -> None:
    q = parse_query("vacuum tables VACUUMING vacuum analyze tables")
    assert q.stems == ["vacuum", "tabl", "analyz"]
    assert [t.position for t in q.terms] == [0, 1, 2]
    assert q.surfaces["vacuum"] == "vacuum"  # first surface kept


def test_stop_words_dropped_and_positions_stay_dense() -> None:
    q = parse_query("the vacuum of the tables")
    assert q.stems == ["vacuum", "tabl"]
    assert [t.position for t in q.terms] == [0, 1]


def test_default_flags_and_lists() -> None:
    q = parse_query("vacuum")
    assert isinstance(q, ParsedQuery)
    assert q.phrases == []
    assert q.excluded == []
    assert q.excluded_phrases == []
    assert q.sites == []
    assert q.require_all is False


def test_require_all() -> None:
    assert parse_query("vacuum tables", require_all=True).require_all is True


def test_phrase_recorded_and_its_words_are_terms() -> None:
    q = parse_query('postgres "full text search" index')
    assert q.phrases == [["full", "text", "search"]]
    assert q.stems == ["postgr", "full", "text", "search", "index"]


def test_phrase_stop_words_are_dropped_from_phrase() -> None:
    q = parse_query('"state of the art"')
    assert q.phrases == [["state", "art"]]
    assert q.stems == ["state", "art"]


def test_one_word_phrase_is_just_a_term() -> None:
    q = parse_query('"vacuum" tables')
    assert q.phrases == []
    assert q.stems == ["vacuum", "tabl"]


def test_phrase_repeating_an_earlier_word() -> None:
    q = parse_query('vacuum "full vacuum"')
    assert q.stems == ["vacuum", "full"]
    assert q.phrases == [["full", "vacuum"]]


def test_unterminated_phrase_runs_to_the_end() -> None:
    q = parse_query('word "unterminated phrase')
    assert q.phrases == [["untermin", "phrase"]]
    assert q.stems == ["word", "untermin", "phrase"]


def test_excluded_word() -> None:
    q = parse_query("database -MySQL -oracle")
    assert q.stems == ["databas"]
    assert q.excluded == ["mysql", "oracl"]


def test_excluded_phrase() -> None:
    q = parse_query('database -"Oracle Databases"')
    assert q.stems == ["databas"]
    assert q.excluded_phrases == [["oracl", "databas"]]
    assert q.excluded == []


def test_excluded_stop_word_is_nothing() -> None:
    q = parse_query("vacuum -the")
    assert q.excluded == []
    assert q.stems == ["vacuum"]


def test_lone_dash_is_ignored() -> None:
    q = parse_query("vacuum -")
    assert q.stems == ["vacuum"]
    assert q.excluded == []


def test_site_restriction() -> None:
    q = parse_query("vacuum site:Example.COM/ site:docs.example.org")
    assert q.sites == ["example.com", "docs.example.org"]
    assert q.stems == ["vacuum"]


def test_bare_site_prefix_is_a_word() -> None:
    q = parse_query("vacuum site:")
    assert q.sites == []
    assert q.stems == ["vacuum", "site"]


def test_everything_together() -> None:
    q = parse_query(
        'postgres "full text search" -mysql -"oracle database" site:example.com',
        require_all=True,
    )
    assert q.stems == ["postgr", "full", "text", "search"]
    assert q.phrases == [["full", "text", "search"]]
    assert q.excluded == ["mysql"]
    assert q.excluded_phrases == [["oracl", "databas"]]
    assert q.sites == ["example.com"]
    assert q.require_all is True


def test_underscored_and_chinese_words() -> None:
    q = parse_query("max_connections 数据库")
    assert q.stems[1] == "数据库"
    assert q.stems[0].startswith("max_connect")


def test_language_selects_stemmer() -> None:
    assert parse_query("Häuser", language="de").stems == ["haus"]


@pytest.mark.parametrize("text", ["", "   ", "\t\n"])
def test_empty_query(text: str) -> None:
    with pytest.raises(QueryError, match="empty query"):
        parse_query(text)


@pytest.mark.parametrize(
    "text", ["the of and", '"the of"', "-vacuum", '-"full vacuum"', "-vacuum -tables", "site:a.com"]
)
def test_nothing_to_search(text: str) -> None:
    with pytest.raises(QueryError, match="only stop words or exclusions"):
        parse_query(text)


def test_no_words_at_all() -> None:
    with pytest.raises(QueryError, match="no words to search for"):
        parse_query("!!! ???")


def test_query_error_is_value_error() -> None:
    assert issubclass(QueryError, ValueError)
