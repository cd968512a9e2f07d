"""`python -m search`: queries, modes, errors, reindex and status, on a crawled site."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CrawlResult, Site, damaged_sqlite, run_crawl, run_search

PAGES = {
    "/": (
        "Animals of the savanna",
        "The savanna is home to lions, zebras and giraffes.",
        ["/lion.html", "/zebra.html", "/giraffe.html", "/mix.html", "/xss.html"],
    ),
    "/lion.html": ("Lion", "The lion hunts zebras at night. Lions sleep all day.", []),
    "/zebra.html": ("Zebra", "A zebra has black and white stripes. Zebras eat grass.", []),
    "/giraffe.html": ("Giraffe", "The giraffe eats leaves from tall trees.", []),
    "/mix.html": ("Mixed", "Black stripes and white stripes; stripes white and black.", []),
    "/xss.html": ("<script>alert(1)</script>", "a page about script injection", []),
}


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> CrawlResult:
    from tests.conftest import _serve_site

    gen = _serve_site()
    site: Site = next(gen)
    for path, (title, body, links) in PAGES.items():
        if path == "/xss.html":
            site.add(
                path,
                "<html><head><title>&lt;script&gt;alert(1)&lt;/script&gt;</title>"
                "</head><body>a page about script injection</body></html>",
            )
        else:
            site.page(path, title, body, links)
    result = run_crawl(tmp_path_factory.mktemp("cli"), "-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    result.base = site.url  # type: ignore[attr-defined]
    gen.close()
    return result


def hits(result: CrawlResult, *args: str) -> list[dict]:
    proc = result.search(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["hits"]


def names(found: list[dict]) -> list[str]:
    return [h["url"].rsplit("/", 1)[-1] for h in found]


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["vacuum", "full"], ["query", "vacuum", "full"]),
        (["status", "--json"], ["status", "--json"]),
        (["--data-dir", "D", "status"], ["status", "--data-dir", "D"]),
        (
            ["--data-dir=D", "--index-dir", "I", "check"],
            ["check", "--data-dir=D", "--index-dir", "I"],
        ),
        (["--data-dir", "D", "vacuum"], ["query", "--data-dir", "D", "vacuum"]),
        (["--version"], ["--version"]),
    ],
)
def test_storage_options_may_come_before_the_command(argv: list[str], expected: list[str]) -> None:
    from search.cli import commands, normalize_argv

    assert normalize_argv(argv, list(commands())) == expected


def test_any_word_default_and_all_words(crawled: CrawlResult) -> None:
    assert set(names(hits(crawled, "giraffe", "lion"))) >= {"giraffe.html", "lion.html"}
    assert names(hits(crawled, "--all", "zebra", "night")) == ["lion.html"]


def test_earlier_words_weigh_more(crawled: CrawlResult) -> None:
    # Same two words, typed in a different order: the page about the first word ranks
    # above the page about the second (the index page, which has both, may lead both).
    first = names(hits(crawled, "giraffe lion"))
    assert first.index("giraffe.html") < first.index("lion.html")
    second = names(hits(crawled, "lion giraffe"))
    assert second.index("lion.html") < second.index("giraffe.html")


def test_longer_queries_weigh_their_words_alike(crawled: CrawlResult) -> None:
    # Four distinct words are a description, not keywords: the order they are typed in does
    # not change the ranking (README "Ranking", --decay-words); with --decay-words 0 it does.
    def ranked(*args: str) -> list[tuple[str, float]]:
        return [(h["url"], round(h["score"], 9)) for h in hits(crawled, *args)]

    forward, backward = "giraffe lion zebra leaves", "leaves zebra lion giraffe"
    assert ranked(forward) == ranked(backward)
    assert ranked(forward, "--decay-words", "0") != ranked(backward, "--decay-words", "0")


def test_phrase_exclusion_site(crawled: CrawlResult) -> None:
    assert names(hits(crawled, '"black and white stripes"')) == ["zebra.html"]
    assert "zebra.html" not in names(hits(crawled, "stripes -grass"))
    host = crawled.base.split("/")[2]  # type: ignore[attr-defined]
    assert len(hits(crawled, f"stripes site:{host}")) == 2
    assert hits(crawled, "stripes site:elsewhere.example") == []
    # As many site: restrictions as a query may have (MAX_SITES), the crawled host last.
    others = " ".join(f"site:h{i}.example" for i in range(15))
    assert len(hits(crawled, f"stripes {others} site:{host}")) == 2


@pytest.mark.parametrize(
    "site",
    [
        "*",
        "12?.0.0.1",
        "1",
        "0.0.1",
        "0.1",
        "[1]27.0.0.1",
        "127.0.0.*",
        "127.0.0.1:*",
        "127.0.0.[1]",
    ],
)
def test_a_site_is_a_host_not_a_pattern(crawled: CrawlResult, site: str) -> None:
    """site: names a host: its wildcard characters are characters, and an IP address has
    no subdomains (site:1 is not the last label of 127.0.0.1)."""
    assert hits(crawled, f"stripes site:{site}") == []


def test_site_of_an_ip_address(crawled: CrawlResult) -> None:
    host = crawled.base.split("/")[2]  # type: ignore[attr-defined]
    assert len(hits(crawled, "stripes site:127.0.0.1")) == 2
    assert len(hits(crawled, f"stripes site:{host}")) == 2
    assert hits(crawled, "stripes site:127.0.0.1:1") == []


def test_stemmed_query_and_snippet(crawled: CrawlResult) -> None:
    found = hits(crawled, "hunting")
    assert names(found) == ["lion.html"]
    assert "<b>hunts</b>" in found[0]["snippet_html"]
    assert found[0]["matches"] == ["hunts"]


def test_plain_output(crawled: CrawlResult) -> None:
    proc = crawled.search("zebra", "-n", "1")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("Results 1-1 of ")
    assert "1. Zebra" in proc.stdout and "[zebra]" in proc.stdout.lower()


def test_pages(crawled: CrawlResult) -> None:
    first = names(hits(crawled, "stripes", "-n", "1"))
    second = names(hits(crawled, "stripes", "-n", "1", "--page", "2"))
    assert len(first) == 1 and len(second) == 1 and first != second
    # A page past the last says so, and how many there are (not "No results").
    proc = run_search("stripes", "-n", "1", "--page", "50", data_dir=crawled.data_dir)
    assert proc.returncode == 0
    assert proc.stdout.startswith("No results on page 50 for 'stripes': 2 results, 2 pages of 1.")


def test_crawled_markup_is_escaped(crawled: CrawlResult) -> None:
    found = hits(crawled, "injection")
    assert found[0]["title"] == "<script>alert(1)</script>"
    assert "<script>" not in found[0]["snippet_html"]


#: Terminal escapes a crawled page may hold: a window title (OSC 0, ended by BEL), a colour
#: (CSI), C1's one-byte CSI, a hyperlink (OSC 8, ended by ST).
ESCAPES = "\x1b]0;PWNED\x07\x1b[31mred\u009b2J\x1b]8;;http://evil.example/\x1b\\"
CONTROLS = ("\x1b", "\x07", "\u009b", "\u202e", "\u2066")
#: Bidirectional controls (an override and an isolate) and a backslash escape typed as text.
BIDI = "\u202eevil\u2066x\u2069 \\x1b"


def test_crawled_control_characters_never_reach_the_terminal(
    crawled: CrawlResult, tmp_path: Path
) -> None:
    """A database crawled before extraction dropped control characters: what the commands
    print of it shows them as visible escapes, never as the characters themselves."""
    from sqlalchemy import create_engine, text

    data = tmp_path / "copy"
    shutil.copytree(crawled.data_dir, data)
    engine = create_engine(f"sqlite:///{data / 'spidersite.db'}")
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE documents SET title = :t, url = url || :e, "
                "text = 'A zebra ' || :e || ' has black and white stripes.' "
                "WHERE url LIKE '%/zebra.html'"
            ),
            {"t": "Zebra" + ESCAPES + BIDI, "e": ESCAPES},
        )
        conn.execute(
            text(
                "INSERT INTO crawl_errors (url, time, kind, message) "
                "VALUES (:u, '2026-12-01 10:00:00', 'http', :m)"
            ),
            {"u": "http://a.example/" + ESCAPES, "m": "HTTP 500\nfake line" + ESCAPES},
        )
    engine.dispose()
    for args in (["zebra"], ["zebra", "--explain"], ["errors"], ["status"]):
        proc = run_search(*args, data_dir=data)
        assert proc.returncode == 0, proc.stderr
        assert not any(c in proc.stdout + proc.stderr for c in CONTROLS), args
    shown = run_search("zebra", "-n", "1", data_dir=data).stdout
    assert "1. Zebra\\x1b]0;PWNED\\x07\\x1b[31mred\\x9b2J" in shown, shown
    assert "\\u202eevil\\u2066x\\u2069 \\\\x1b" in shown, shown
    assert "A [zebra] \\x1b]0;PWNED" in shown, shown
    logged = run_search("errors", data_dir=data).stdout
    assert "HTTP 500\\nfake line\\x1b" in logged
    assert not any(line.startswith("fake line") for line in logged.splitlines())
    # JSON keeps the text as stored, its control characters (C1 too) as \\u escapes.
    proc = run_search("zebra", "-n", "1", "--json", data_dir=data)
    assert not any(c in proc.stdout for c in CONTROLS)
    assert json.loads(proc.stdout)["hits"][0]["title"] == "Zebra" + ESCAPES + BIDI


def test_printable_escapes_are_unambiguous_and_cover_bidirectional_controls() -> None:
    """printable(): a backslash is doubled, so that text that only looks like an escape
    (the four characters \\x1b) never prints as the escape of a control character; the
    bidirectional controls (overrides, embeddings, isolates, marks) print as \\u escapes,
    so that a title cannot reorder what the terminal shows; every other character as it is.
    The escapes read back (as Python string escapes) to the text."""
    import ast

    from search.commands._common import BIDI_CONTROLS, printable, write_json

    assert printable("Zebra\x1b[31m") == "Zebra\\x1b[31m"
    assert printable("Zebra\\x1b[31m") == "Zebra\\\\x1b[31m"  # typed, not a control
    assert printable("\x1b") != printable("\\x1b")
    assert printable("abc\u202edcba.exe") == "abc\\u202edcba.exe"
    bidi = "".join(map(chr, BIDI_CONTROLS))
    assert len(bidi) == 12
    shown = printable(bidi)
    assert shown.isascii() and shown.count("\\u") == 12
    for c in range(0x2000, 0x2100):  # the others of the general punctuation are kept
        if c not in BIDI_CONTROLS:
            assert printable(chr(c)) == chr(c)
    text = "a\\b \x1b\\x1b \u2066x\u2069 \t\n\u009b café हिन्दी"
    assert ast.literal_eval('"' + printable(text) + '"') == text
    # JSON shows the bidirectional controls as \\u escapes too, and reads back the same.
    out = io.StringIO()
    write_json({"title": "abc\u202edcba" + bidi}, out)
    assert not any(chr(c) in out.getvalue() for c in BIDI_CONTROLS)
    assert json.loads(out.getvalue()) == {"title": "abc\u202edcba" + bidi}


def test_control_characters_are_dropped_when_crawled(site: Site, tmp_path: Path) -> None:
    """Control characters have no place in a title or in indexed text: a crawl drops them
    (HTML and plain text), so that the database never holds them."""
    site.add(
        "/",
        f"<html><head><title>Okapi{ESCAPES}</title>"
        f'<meta name="description" content="shy{ESCAPES}"></head>'
        f'<body><p>okapi{ESCAPES} forest</p><a href="/notes.txt">notes</a></body></html>',
    )
    site.add("/notes.txt", f"okapi notes{ESCAPES}\nline two\tend", content_type="text/plain")
    result = run_crawl(tmp_path / "data", "-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    rows = result.rows("SELECT url, title, description, text FROM documents ORDER BY url")
    assert len(rows) == 2
    for row in rows:
        for value in (row.title, row.description, row.text):
            assert not any(c in (value or "") for c in CONTROLS), row
    assert rows[0].title == "Okapi ]0;PWNED [31mred 2J ]8;;http://evil.example/ \\"
    assert rows[1].text.startswith("okapi notes ]0;PWNED") and "\nline two\tend" in rows[1].text


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["   "], 2, "empty query"),
        (["the", "of", "and"], 2, "only stop words"),
        (["lion", "-n", "0"], 2, "-n must be at least 1"),
        (["query"], 2, "the following arguments are required"),
        (["lion", "--page", "0"], 2, "--page must be at least 1"),
        (["lion", "--page", "1001"], 2, "results beyond the first 10,000 are not served"),
        (["lion", "--page", str(10**30)], 2, "results beyond the first 10,000"),
        (["lion", "-n", "10001"], 2, "results beyond the first 10,000"),
        (["lion", "-n", "x"], 2, "invalid int value"),
        (["lion", "--k1", "nan"], 2, "k1 must be a finite number, not nan"),
        (["lion", "--decay", "nan"], 2, "decay must be a finite number, not nan"),
        (["lion", "--linkrank", "inf"], 2, "linkrank must be a finite number, not inf"),
        (["lion", "--b-title=-inf"], 2, "b_title must be a finite number, not -inf"),
        (["lion " * 2000], 2, "10000 bytes long: at most 8192"),
        ([" ".join(f"w{i}" for i in range(1000))], 2, "1000 words: at most 500"),
        (['"' + " ".join(f"w{i}" for i in range(1000)) + '"'], 2, "1000 words: at most 500"),
        (['"' + " ".join(f"w{i}" for i in range(40)) + '"'], 2, "phrase has 40 words"),
        ([b"lion \xff\xfe".decode("utf-8", "surrogateescape")], 2, "not valid UTF-8"),
        (
            ["lion " + " ".join(f"site:h{i}" for i in range(240))],
            2,
            "240 site: restrictions: at most 16",
        ),
    ],
)
def test_bad_queries(crawled: CrawlResult, args: list[str], code: int, message: str) -> None:
    proc = crawled.search(*args)
    assert proc.returncode == code
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr.splitlines()[-1]  # one line (after argparse's usage)


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("title:zebra AND (lion OR NOT giraffe*) ~2 ^3", "zebra.html"),
        ('"black and white', "zebra.html"),
        ('stripes"', "mix.html"),
        ('" "', None),
        (" ".join(["zebra"] + [f"w{i}" for i in range(499)]), "zebra.html"),
        ('"' + " ".join(["black", "and", "white", "stripes"] * 8) + '"', None),
        ("stripes site:http://[::1", None),
        ("stripes site:h:99999", None),
        ("stripes site:[::1]:99999 site:%zz site:.. site::", None),
    ],
    ids=[
        "whoosh-syntax",
        "open-quote",
        "close-quote",
        "empty-phrase",
        "500-words",
        "32-words",
        "site-broken-ipv6",
        "site-bad-port",
        "site-odd-hosts",
    ],
)
def test_odd_queries_answer_cleanly(crawled: CrawlResult, query: str, found: str | None) -> None:
    """Whoosh's syntax means nothing, unbalanced quotes run to the end, queries at the
    limits answer (or refuse, for a phrase of no search words) with one line."""
    proc = crawled.search(query, "--json")
    assert "Traceback" not in proc.stderr
    if found is None:
        assert proc.returncode in (0, 2) and len(proc.stderr.splitlines()) <= 1
    else:
        assert proc.returncode == 0, proc.stderr
        assert found in names(json.loads(proc.stdout)["hits"])


def test_no_index_yet(tmp_path: Path) -> None:
    proc = run_search("anything", data_dir=tmp_path / "empty")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: no search index at ")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "command", [["status"], ["errors"], ["check", "--dry-run"], ["query", "foo"], ["cached", "u"]]
)
def test_a_database_that_cannot_be_opened_is_one_line(
    command: list[str], crawled: CrawlResult, tmp_path: Path
) -> None:
    # A server that does not answer, then a file that is not a database: each the read-only
    # commands' first read, not a traceback from their first query (a search finds the
    # index first: the crawl's).
    command = [*command, "--index-dir", str(crawled.data_dir / "index")]
    unreachable = "postgresql://someone:secret@127.0.0.1:1/nowhere"
    proc = run_search(*command, data_dir=tmp_path, database_url=unreachable)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: cannot open database postgresql"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "secret" not in proc.stderr
    (tmp_path / "not.db").write_text("not a database")
    proc = run_search(*command, data_dir=tmp_path, database_url=f"sqlite:///{tmp_path}/not.db")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().endswith("file is not a database"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize("damage", ["not a database", "truncated"])
def test_a_damaged_sqlite_file_is_one_line_for_every_command(
    damage: str, crawled: CrawlResult, tmp_path: Path
) -> None:
    """A SQLite file that is not a database or was cut short: every command, those that
    write (and bring the schema up to date) and ``serve`` among them, says so in one line,
    exit status 1, and leaves the file as it was."""
    path = tmp_path / "spidersite.db"
    damaged_sqlite(path, damage)
    before = path.read_bytes()
    index = ["--index-dir", str(crawled.data_dir / "index")]
    reason = "file is not a database" if damage == "not a database" else "malformed"
    for command in (
        ["status"],
        ["query", "zebra", *index],
        ["errors"],
        ["check", *index],
        ["reindex", "--new", *index],
        ["cached", "http://x/"],
        ["serve", "--port", "1"],
    ):
        proc = run_search(*command, data_dir=tmp_path)
        assert proc.returncode == 1, (command, proc.stderr)
        assert proc.stderr.startswith(f"error: cannot open database sqlite:///{path}"), (
            command,
            proc.stderr,
        )
        assert reason in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert path.read_bytes() == before


#: The commands that read the database (and the rebuild, which creates none): each says
#: there is no database yet when there is none, or an empty one.
READERS = (
    ["status"],
    ["query", "zebra", "--index-dir"],
    ["errors"],
    ["check", "--dry-run", "--index-dir"],
    ["check", "--index-dir"],
    ["cached", "http://x/"],
    ["reindex", "--new", "--index-dir"],
    ["reindex", "--quiet"],
)


def readers(index: Path) -> list[list[str]]:
    """:data:`READERS`, those that read an index given *index*."""
    return [[*c, str(index)] if c[-1] == "--index-dir" else c for c in READERS]


@pytest.mark.parametrize("empty", ["missing", "zero bytes", "no tables"])
def test_an_empty_sqlite_file_is_no_database_yet(
    empty: str, crawled: CrawlResult, tmp_path: Path
) -> None:
    """A database file with nothing in it (``touch data/spidersite.db``: zero bytes, which
    SQLite opens as an empty database; or a database without a table) is no database yet,
    as a missing file is: every command that reads says so in one line, exit status 1,
    and creates nothing (a zero-byte file is left as it was)."""
    path = tmp_path / "spidersite.db"
    if empty == "zero bytes":
        path.touch()
    elif empty == "no tables":
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA user_version = 7")  # writes the file's header
    # A copy of the crawl's index, for the commands that read one: the database is what
    # is missing.
    shutil.copytree(crawled.data_dir / "index", tmp_path / "index-copy")
    for command in readers(tmp_path / "index-copy"):
        proc = run_search(*command, data_dir=tmp_path)
        assert proc.returncode == 1, (command, proc.stderr)
        assert proc.stderr == (
            f"error: no database at {path} yet: crawl a site first "
            f"(scrapy crawl site -a seeds=URL)\n"
        ), (command, proc.stderr)
        if empty == "missing":
            assert not path.exists(), command
            continue
        if empty == "zero bytes":
            assert path.stat().st_size == 0, command
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            assert not conn.execute("SELECT name FROM sqlite_master").fetchall(), command
    assert not (tmp_path / "index").exists()


def test_an_empty_postgresql_database_is_no_database_yet(pg_url: str, tmp_path: Path) -> None:
    """A PostgreSQL database without a table (just created): as an empty SQLite file,
    nothing crawled yet, said in one line, and nothing created in it."""
    for command in (["status"], ["errors"], ["cached", "http://x/"], ["reindex", "--quiet"]):
        proc = run_search(*command, data_dir=tmp_path, database_url=pg_url)
        assert proc.returncode == 1, (command, proc.stderr)
        assert proc.stderr.startswith("error: no tables in the database postgresql"), proc.stderr
        assert proc.stderr.endswith(
            " yet: crawl a site first (scrapy crawl site -a seeds=URL)\n"
        ), proc.stderr
    from sqlalchemy import create_engine, inspect

    engine = create_engine(pg_url)
    try:
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_a_database_of_something_else_is_one_line(crawled: CrawlResult, tmp_path: Path) -> None:
    """A database that holds tables and not this project's schema (another
    application's; or this project's, its creation cut short): every command says so in
    one line, exit status 1, and changes none of its tables."""
    path = tmp_path / "spidersite.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.commit()
    shutil.copytree(crawled.data_dir / "index", tmp_path / "index-copy")
    for command in [*readers(tmp_path / "index-copy"), ["serve", "--port", "1"]]:
        proc = run_search(*command, data_dir=tmp_path)
        assert proc.returncode == 1, (command, proc.stderr)
        assert proc.stderr.startswith(f"error: cannot use the database sqlite:///{path}: "), (
            command,
            proc.stderr,
        )
        assert "invoices" in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    with contextlib.closing(sqlite3.connect(path)) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"invoices"}


def test_reindex_rebuilds_the_same_index(crawled: CrawlResult, tmp_path: Path) -> None:
    before = [(h["url"], round(h["score"], 6)) for h in hits(crawled, "stripes black")]
    index = crawled.data_dir / "index"
    shutil.rmtree(index)
    assert crawled.search("stripes").returncode == 1
    # Without the linkranks, which the crawl did not compute (tests/test_unit_linkrank.py).
    proc = run_search("reindex", "--no-linkrank", data_dir=crawled.data_dir)
    assert proc.returncode == 0, proc.stderr
    assert "Indexed 6 documents" in proc.stdout
    after = [(h["url"], round(h["score"], 6)) for h in hits(crawled, "stripes black")]
    assert after == before
    again = run_search("reindex", "--new", "--quiet", "--no-linkrank", data_dir=crawled.data_dir)
    assert again.returncode == 0 and "Indexed 0 documents" in again.stdout


def test_status(crawled: CrawlResult) -> None:
    from search.index import FORMAT

    proc = run_search("status", "--json", data_dir=crawled.data_dir)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["documents_total"] == 6
    assert data["in_index"] == 6 == data["marked_indexed"]
    assert data["crawls"] == 1
    # The crawl's indexer wrote an index of the current format (array postings).
    assert data["index_format"] == f"{FORMAT} (current)"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--kind", "bogus"], "invalid choice: 'bogus'"),
        (["--server", "example.org"], "--server: 'example.org' is not a URL"),
    ],
)
def test_errors_refuses_a_filter_that_matches_nothing_ever(
    crawled: CrawlResult, args: list[str], message: str
) -> None:
    proc = run_search("errors", *args, data_dir=crawled.data_dir)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_reindex_of_no_database_creates_none(tmp_path: Path) -> None:
    # A mistyped --data-dir: not an empty database and index, "Indexed 0 documents".
    proc = run_search("reindex", "--quiet", data_dir=tmp_path / "typo")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: no database at "), proc.stderr
    assert not (tmp_path / "typo").exists()


def test_a_dry_check_without_an_index_writes_none(crawled: CrawlResult, tmp_path: Path) -> None:
    data = tmp_path / "copy"
    shutil.copytree(crawled.data_dir, data, ignore=shutil.ignore_patterns("index"))
    proc = run_search("check", "--dry-run", "--json", data_dir=data)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["in_index"] == 0 and report["missing"] and not report["repaired"]
    assert not (data / "index").exists()
    assert run_search("check", data_dir=data).returncode == 0  # the repair creates it
    assert (data / "index").exists()


def test_older_index_is_refused_until_rebuilt(crawled: CrawlResult, tmp_path: Path) -> None:
    data = tmp_path / "copy"
    shutil.copytree(crawled.data_dir, data)
    (data / "index" / "spidersite-format.json").unlink()  # as a version before formats wrote it
    for args in (["stripes"], ["check"], ["check", "--dry-run"]):
        proc = run_search(*args, data_dir=data)
        assert proc.returncode == 1, args
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert "run `python -m search reindex`" in proc.stderr
    status = json.loads(run_search("status", "--json", data_dir=data).stdout)
    assert "python -m search reindex" in status["index_format"] and status["in_index"] is None
    assert run_search("reindex", "--quiet", data_dir=data).returncode == 0
    proc = run_search("stripes", "--json", data_dir=data)
    assert proc.returncode == 0 and json.loads(proc.stdout)["total"] == 2


# Whoosh leaves open the segment file it failed to read (closed when it is collected).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_a_damaged_index_is_one_line_until_rebuilt(
    crawled: CrawlResult, tmp_path: Path, damage: str
) -> None:
    """A segment file deleted, or cut short: every command says in one line to rebuild the
    index (no traceback), `status` reports it, `serve` warms up without it, and `reindex`
    rebuilds it."""
    data = tmp_path / "copy"
    shutil.copytree(crawled.data_dir, data)
    (segment,) = (data / "index").glob("spidersite_*.seg")
    if damage == "deleted":
        segment.unlink()
    else:
        with open(segment, "r+b") as f:
            f.truncate(1000)
    for args in (["stripes"], ["check"], ["check", "--dry-run"]):
        proc = run_search(*args, data_dir=data)
        assert proc.returncode == 1, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith(f"error: the search index at {data / 'index'} is damaged")
        assert "run `python -m search reindex`" in proc.stderr
    proc = run_search("status", "--json", data_dir=data)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    status = json.loads(proc.stdout)
    assert "is damaged" in status["index_format"] and status["in_index"] is None

    from search.commands.serve import warm_up
    from search.web import create_app
    from search.web.settings import WebSettings

    app = create_app(WebSettings.from_env(str(data), None, env={}))
    warm_up(app)  # serve starts; its searches say what the command line says
    resp = app.test_client().get("/api/search?q=stripes")
    assert resp.status_code == 503 and "is damaged" in resp.get_data(as_text=True)

    assert run_search("reindex", "--quiet", data_dir=data).returncode == 0
    proc = run_search("stripes", "--json", data_dir=data)
    assert proc.returncode == 0 and json.loads(proc.stdout)["total"] == 2


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """*path* made read-only: ``chattr +i`` as root (whom file modes do not stop), else
    ``chmod 444``; skipped where neither can be done."""
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"chattr +i is not available here: {made.stderr!r}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(mode)


def test_a_read_only_database_is_one_line_before_the_index_is_touched(
    crawled: CrawlResult, tmp_path: Path
) -> None:
    data = tmp_path / "copy"
    shutil.copytree(crawled.data_dir, data)
    index = data / "index"
    before = sorted((p.name, p.stat().st_mtime_ns) for p in index.iterdir())
    with read_only(data / "spidersite.db"):
        for args in (["reindex", "--quiet"], ["reindex", "--new"], ["check"]):
            proc = run_search(*args, data_dir=data)
            assert proc.returncode == 1, (args, proc.stderr)
            assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
            assert proc.stderr == (
                f"error: cannot use the database sqlite:///{data / 'spidersite.db'}: not writable\n"
            )
        assert sorted((p.name, p.stat().st_mtime_ns) for p in index.iterdir()) == before
        # What only reads still works.
        assert run_search("check", "--dry-run", data_dir=data).returncode == 0
        assert run_search("stripes", data_dir=data).returncode == 0


def test_a_database_error_under_way_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database that fails a command after it opened (a PostgreSQL in recovery, a disk
    gone read-only) is one line, exit status 1."""
    from sqlalchemy.exc import OperationalError

    import search.commands.status
    from search.cli import main

    def fails(args: object, out: object) -> int:
        raise OperationalError(
            "UPDATE documents", {}, Exception("attempt to write a readonly database\nmore")
        )

    monkeypatch.setattr(search.commands.status, "run", fails)
    assert main(["status"]) == 1
    err = capsys.readouterr().err
    assert err == "error: the database failed: attempt to write a readonly database more\n"
