"""Unit tests for search.query.parse_query."""

from __future__ import annotations

import pytest

from search.query import (
    MAX_PHRASE_WORDS,
    MAX_QUERY_BYTES,
    MAX_QUERY_WORDS,
    MAX_RESULTS,
    MAX_SITES,
    ParsedQuery,
    QueryError,
    QueryTerm,
    check_window,
    parse_query,
)


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


@pytest.mark.parametrize("text", ["the of and", '"the of"'])
def test_only_stop_words(text: str) -> None:
    with pytest.raises(QueryError, match=r"has only stop words: nothing to search for$"):
        parse_query(text)


@pytest.mark.parametrize(
    "text", ["-vacuum", '-"full vacuum"', "-vacuum -tables", "site:a.com", "the site:a.com"]
)
def test_site_and_exclusions_need_a_word(text: str) -> None:
    """site: and exclusions narrow a search: alone, the message says a word is needed."""
    with pytest.raises(
        QueryError,
        match=r"has no word to search for: site: and -exclusions only narrow a search; "
        r"add a word to find \(vacuum site:example\.org\)$",
    ):
        parse_query(text)


def test_no_words_at_all() -> None:
    with pytest.raises(QueryError, match="no words to search for"):
        parse_query("!!! ???")


def test_query_error_is_value_error() -> None:
    assert issubclass(QueryError, ValueError)


# --- hostile input: what a query may ask for -------------------------------------------------


def test_whoosh_syntax_is_only_words() -> None:
    q = parse_query("title:lion AND (zebra OR NOT gir*) ~2 ^3 lion^2 [a TO z]")
    assert q.stems[:3] == ["titl", "lion", "zebra"]
    assert not q.phrases and not q.excluded and not q.sites


@pytest.mark.parametrize("text", ['"lion zebra', 'lion"', 'lion " zebra', '"lion" "', '""lion'])
def test_unbalanced_quotes(text: str) -> None:
    assert "lion" in parse_query(text).stems


def test_unbalanced_excluded_phrase() -> None:
    assert parse_query('zebra -"lion hunts').excluded_phrases == [["lion", "hunt"]]


def test_nul_and_control_characters_separate_words() -> None:
    assert parse_query("lion\x00zebra\x07giraffe").stems == ["lion", "zebra", "giraff"]


def test_invalid_utf8_is_refused() -> None:
    text = b"lion \xff\xfe".decode("utf-8", "surrogateescape")  # as argv decodes it
    with pytest.raises(QueryError, match="not valid UTF-8"):
        parse_query(text)


def test_query_bytes_are_bounded() -> None:
    long_word = "abcdefghij" * 6 + " "
    assert len(parse_query(long_word * (MAX_QUERY_BYTES // len(long_word))).terms) == 1
    with pytest.raises(QueryError, match=f"10000 bytes long: at most {MAX_QUERY_BYTES}"):
        parse_query("lion " * 1999 + "zebra")
    with pytest.raises(QueryError, match="bytes long"):  # counted in UTF-8, not characters
        parse_query("数" * (MAX_QUERY_BYTES // 3 + 1))


def test_query_words_are_bounded() -> None:
    words = [f"w{i}" for i in range(1000)]
    assert len(parse_query(" ".join(words[:MAX_QUERY_WORDS])).terms) == MAX_QUERY_WORDS
    with pytest.raises(QueryError, match=f"1000 words: at most {MAX_QUERY_WORDS}"):
        parse_query(" ".join(words))


def test_phrase_words_are_bounded() -> None:
    words = [f"w{i}" for i in range(1000)]
    q = parse_query('"' + " ".join(words[:MAX_PHRASE_WORDS]) + '"')
    assert len(q.phrases[0]) == MAX_PHRASE_WORDS
    for text in ('"' + " ".join(words[:400]) + '"', '"' + " ".join(words[: MAX_PHRASE_WORDS + 1])):
        with pytest.raises(QueryError, match=f"phrase has .* words: at most {MAX_PHRASE_WORDS}"):
            parse_query(text)
    with pytest.raises(QueryError, match="phrase has"):
        parse_query('lion -"' + " ".join(words[:100]) + '"')


@pytest.mark.parametrize(
    ("page", "per_page"), [(0, 10), (1, 0), (-1, 10), (1001, 10), (1, MAX_RESULTS + 1), (10**30, 1)]
)
def test_result_window_is_bounded(page: int, per_page: int) -> None:
    with pytest.raises(QueryError):
        check_window(page, per_page)


def test_result_window_limits() -> None:
    check_window(1, 1)
    check_window(MAX_RESULTS // 10, 10)
    check_window(1, MAX_RESULTS)


def test_site_restrictions_are_bounded() -> None:
    sites = [f"site:h{i}" for i in range(240)]
    q = parse_query("lion " + " ".join(sites[:MAX_SITES]))
    assert len(q.sites) == MAX_SITES
    with pytest.raises(QueryError, match=f"240 site: restrictions: at most {MAX_SITES}"):
        parse_query("lion " + " ".join(sites))
    with pytest.raises(QueryError, match=f"{MAX_SITES + 1} site: restrictions"):
        parse_query("lion " + " ".join(sites[: MAX_SITES + 1]))


def test_without_syntax_every_word_is_searched() -> None:
    q = parse_query('the "Office of the Future," -based site:example.org words', syntax=False)
    assert q.phrases == [] and q.excluded == [] and q.sites == []
    assert q.stems == parse_query("office future based site example org words").stems
    syntax = parse_query('the "Office of the Future," -based site:example.org words')
    assert syntax.phrases == [["offic", "futur"]] and syntax.excluded == ["base"]
    assert syntax.sites == ["example.org"]


HOSTS = [
    "example.org",
    "docs.example.org:8080",
    "127.0.0.1:8000",
    "10.0.0.1",
    "[::1]:8080",
    "[::1]",
    "a*b.example",
]


@pytest.mark.parametrize(
    ("site", "expected"),
    [
        ("example.org", {"example.org", "docs.example.org:8080"}),
        ("example.org:8080", {"docs.example.org:8080"}),
        ("127.0.0.1", {"127.0.0.1:8000"}),
        ("127.0.0.1:8000", {"127.0.0.1:8000"}),
        ("[::1]", {"[::1]:8080", "[::1]"}),
        ("[::1]:8080", {"[::1]:8080"}),
        ("a*b.example", {"a*b.example"}),
        ("*", set()),
        ("*.example", set()),
        ("12?.0.0.1", set()),
        ("[1]27.0.0.1", set()),
        ("1", set()),
        ("0.0.1", set()),
        ("[", set()),
    ],
)
def test_site_query_names_a_host(site: str, expected: set[str]) -> None:
    """site: is a host, not a pattern, and an IP address has no subdomains."""
    from whoosh.fields import ID, Schema
    from whoosh.filedb.filestore import RamStorage

    from search.indexquery import site_query

    ix = RamStorage().create_index(Schema(host=ID(stored=True)))
    with ix.writer() as writer:
        for host in HOSTS:
            writer.add_document(host=host)
    with ix.searcher() as searcher:
        found = {searcher.stored_fields(n)["host"] for n in site_query(site).docs(searcher)}
    assert found == expected
