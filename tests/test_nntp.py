"""News: a crawl of a group on a local NNTP server (the test's own, on 127.0.0.1) indexes
its articles (subject as title, body as text, From and Date kept, References as links),
and a second crawl fetches only the articles posted since; a missing article is logged,
the server's basic_auth logs in, NNTP_MAX_ARTICLES and max_pages take the newest."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from search.urls import check_url, origin
from spidersite.extract import absolute_link, extract_article
from spidersite.nntp import article_url, parse_etag
from tests.conftest import run_crawl


class NewsServer(socketserver.ThreadingTCPServer):
    """The subset of NNTP (RFC 3977) a reader needs: CAPABILITIES, MODE READER,
    AUTHINFO, GROUP, OVER, ARTICLE, QUIT; one group, articles numbered from 1."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, group: str, auth: str | None = None) -> None:
        self.group = group
        self.auth = auth
        #: (message-id, headers, body) by article number.
        self.articles: dict[int, tuple[str, dict[str, str], str]] = {}
        #: Every command received, in order.
        self.commands: list[str] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _NewsHandler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def post(self, number: int, mid: str, subject: str, body: str, **headers: str) -> None:
        fields = {
            "From": "Ann Author <ann@example.org>",
            "Date": f"Mon, 0{number} Jun 2026 10:00:00 +0000",
            "Subject": subject,
            "Newsgroups": self.group,
            "Message-ID": f"<{mid}>",
            **{k.replace("_", "-"): v for k, v in headers.items()},
        }
        self.articles[number] = (mid, fields, body)

    def served(self, command: str) -> list[str]:
        with self.lock:
            return [c for c in self.commands if c.upper().startswith(command)]


class _NewsHandler(socketserver.StreamRequestHandler):
    server: NewsServer

    def send(self, *lines: str) -> None:
        self.wfile.write("".join(f"{line}\r\n" for line in lines).encode())

    def handle(self) -> None:
        server = self.server
        authenticated = server.auth is None
        user = ""
        self.send("200 test news server ready")
        for raw in self.rfile:
            line = raw.decode().strip()
            with server.lock:
                server.commands.append(line)
            word, _, arg = line.partition(" ")
            word = word.upper()
            if word == "QUIT":
                self.send("205 bye")
                return
            if word == "CAPABILITIES":
                self.send("101 capabilities", "VERSION 2", "READER", "OVER", "AUTHINFO USER", ".")
            elif word == "MODE":
                self.send("200 reader mode")
            elif word == "AUTHINFO":
                what, _, value = arg.partition(" ")
                if what.upper() == "USER":
                    user = value
                    self.send("381 password please")
                elif server.auth == f"{user}:{value}":
                    authenticated = True
                    self.send("281 welcome")
                else:
                    self.send("481 authentication failed")
            elif not authenticated:
                self.send("480 authentication required")
            elif word == "GROUP":
                if arg != server.group:
                    self.send("411 no such group")
                    continue
                numbers = sorted(server.articles) or [0]
                count = len(server.articles)
                self.send(f"211 {count} {numbers[0]} {numbers[-1]} {arg}")
            elif word == "OVER":
                first, _, last = arg.partition("-")
                self.send("224 overview follows")
                for number in sorted(server.articles):
                    if int(first) <= number <= int(last or number):
                        mid, fields, body = server.articles[number]
                        self.send(
                            "\t".join(
                                [
                                    str(number),
                                    fields["Subject"],
                                    fields["From"],
                                    fields["Date"],
                                    fields["Message-ID"],
                                    fields.get("References", ""),
                                    str(len(body)),
                                    str(body.count("\n") + 1),
                                ]
                            )
                        )
                self.send(".")
            elif word == "LIST":
                self.send("503 no overview format")
            elif word == "ARTICLE":
                found = [(n, a) for n, a in server.articles.items() if f"<{a[0]}>" == arg.strip()]
                if not found:
                    self.send("430 no such article")
                    continue
                number, (mid, fields, body) = found[0]
                self.send(f"220 {number} <{mid}> article")
                self.send(*(f"{k}: {v}" for k, v in fields.items()), "")
                self.send(*("." + b if b.startswith(".") else b for b in body.split("\n")), ".")
            else:
                self.send("500 what?")


@pytest.fixture
def news() -> Iterator[NewsServer]:
    server = NewsServer("local.test.animals")
    server.post(1, "first.1@example.org", "Aardvark sighting", "An aardvark dug a burrow.")
    server.post(
        2,
        "second.2@example.org",
        "Re: Aardvark sighting",
        "Quoting the aardvark: a second look\n.. a line that starts with a dot",
        References="<first.1@example.org>",
    )
    server.post(3, "third/3@example.org", "Zebra crossing", "Stripes of a zebra.")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_a_group_is_crawled_into_articles_and_a_recrawl_takes_only_the_new_ones(
    news: NewsServer, crawl: Any
) -> None:
    group = f"nntp://127.0.0.1:{news.port}/local.test.animals"
    missing = f"nntp://127.0.0.1:{news.port}/nobody@example.org"
    no_group = f"nntp://127.0.0.1:{news.port}/no.such.group"
    result = crawl("-a", f"seeds={group},{missing},{no_group}")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.log
    base = f"nntp://127.0.0.1:{news.port}/"
    first, second, third = (
        f"{base}first.1@example.org",
        f"{base}second.2@example.org",
        f"{base}third%2F3@example.org",
    )
    assert result.urls("page") == {group, first, second, third}
    rows = {
        r.url: r
        for r in result.rows(
            "SELECT url, title, description, keywords, last_modified, noindex, etag FROM documents"
        )
    }
    assert rows[first].title == "Aardvark sighting"
    assert rows[first].description == (
        "From: Ann Author <ann@example.org>; Date: Mon, 01 Jun 2026 10:00:00 +0000"
    )
    assert rows[first].keywords == "local.test.animals"
    assert str(rows[first].last_modified).startswith("2026-06-01 10:00:00")
    assert rows[group].noindex and rows[group].etag == '"3"'
    links = result.rows(
        "SELECT d.url, l.to_url FROM links l JOIN documents d ON d.id = l.from_id WHERE d.url = :u",
        u=second,
    )
    assert [(r.url, r.to_url) for r in links] == [(second, first)]
    errors = {(e.url, e.kind, e.message) for e in result.errors()}
    assert {(missing, "http", "HTTP 404"), (no_group, "http", "HTTP 404")} <= errors
    found = result.search("aardvark")
    assert first in found.stdout and second in found.stdout, found.stdout
    assert group not in result.search("animals").stdout  # the listing is not indexed
    stats = result.stats
    assert (stats["nntp/groups"], stats["nntp/articles"], stats["nntp/errors"]) == (1, 3, 2)
    assert stats["site/pages"] == 4

    news.post(4, "fourth.4@example.org", "Quokka smiles", "A quokka, newly posted.")
    with news.lock:
        news.commands.clear()
    again = crawl("-a", f"seeds={group}")
    assert again.returncode == 0, again.stderr
    assert again.stats["nntp/articles"] == 1
    assert news.served("ARTICLE") == ["ARTICLE <fourth.4@example.org>"]
    assert news.served("OVER") == ["OVER 4-4"]
    assert f"{base}fourth.4@example.org" in again.search("quokka").stdout

    # A re-visit of the stored documents: the group has nothing newer (304).
    revisit = crawl("-a", "recrawl=all")
    assert revisit.returncode == 0, revisit.stderr
    assert revisit.stats["nntp/not_modified"] == 1
    assert revisit.stats.get("nntp/groups", 0) == 0
    # Analyzed again: the articles, fetched again; the group is still asked only for what
    # is newer than its last article number (the listing is not indexed), and keeps it.
    reanalyze = crawl("-a", "recrawl=reanalyze")
    assert reanalyze.returncode == 0, reanalyze.stderr
    stats = reanalyze.stats
    assert stats["nntp/not_modified"] == 1 and stats.get("nntp/groups", 0) == 0
    assert stats["nntp/articles"] == 4 and stats["recrawl/reanalyzed"] == 4
    assert reanalyze.scalar("SELECT etag FROM documents WHERE url = :u", u=group) == '"4"'
    assert f"{base}fourth.4@example.org" in reanalyze.search("quokka").stdout


def test_basic_auth_logs_in_and_max_articles_takes_the_newest(
    news: NewsServer, tmp_path: Path
) -> None:
    news.auth = "reader:secret"
    group = f"news://127.0.0.1:{news.port}/local.test.animals"
    sites = tmp_path / "sites.toml"
    sites.write_text(
        f'[[server]]\nurl = "{group}"\nseeds = ["{group}"]\nbasic_auth = "reader:secret"\n'
    )
    result = run_crawl(tmp_path / "ok", "-a", f"sites={sites}", settings={"NNTP_MAX_ARTICLES": 2})
    assert result.returncode == 0, result.stderr
    base = f"news://127.0.0.1:{news.port}/"
    assert result.urls() == {group, f"{base}second.2@example.org", f"{base}third%2F3@example.org"}
    assert "authinfo user reader" in news.served("AUTHINFO")

    wrong = tmp_path / "wrong.toml"
    wrong.write_text(
        f'[[server]]\nurl = "{group}"\nseeds = ["{group}"]\nbasic_auth = "reader:nope"\n'
    )
    result = run_crawl(tmp_path / "wrong", "-a", f"sites={wrong}")
    assert result.returncode == 0, result.stderr
    assert (group, "http", "HTTP 401") in [(e.url, e.kind, e.message) for e in result.errors()]

    # The server's max_pages bounds the group's listing too: its 2 newest articles are
    # listed (not all 3), and the cap leaves room for the group and one of them.
    capped = tmp_path / "capped.toml"
    capped.write_text(
        f'[[server]]\nurl = "{group}"\nseeds = ["{group}"]\nbasic_auth = "reader:secret"\n'
        f"max_pages = 2\n"
    )
    with news.lock:
        news.commands.clear()
    result = run_crawl(tmp_path / "capped", "-a", f"sites={capped}")
    assert result.returncode == 0, result.stderr
    assert news.served("OVER") == ["OVER 2-3"]
    newest = {f"{base}second.2@example.org", f"{base}third%2F3@example.org"}
    (fetched,) = result.urls() - {group}
    assert group in result.urls() and fetched in newest
    assert result.error_kinds() == {(url, "page_cap") for url in newest - {fetched}}
    assert "ARTICLE <first.1@example.org>" not in news.served("ARTICLE")


# -- the pure parts ---------------------------------------------------------------------


def test_news_urls_are_accepted_with_their_default_port() -> None:
    assert check_url("news://news.example/comp.lang.python")
    assert origin("nntp://News.Example:119/x") == "nntp://news.example/"
    assert origin("news://news.example:1190/x@y") == "news://news.example:1190/"
    with pytest.raises(ValueError, match="has no host"):
        check_url("news:comp.lang.python")


def test_news_links_with_a_host_are_links() -> None:
    assert absolute_link("http://a.example/", "news://h.example/g.x") == "news://h.example/g.x"
    assert absolute_link("http://a.example/", "NNTP://h.example/a@b") == "NNTP://h.example/a@b"
    assert absolute_link("http://a.example/", "news:comp.lang.python") is None


def test_an_article_url_is_the_message_id_percent_encoded() -> None:
    assert article_url("news://h/g", "<a.b/c@d>") == "news://h/a.b%2Fc@d"
    assert parse_etag(b'"42"') == 42
    assert parse_etag('W/"7"') == 7
    assert parse_etag('"abc"') is None


def test_an_article_is_read_with_its_headers_and_references() -> None:
    raw = (
        b"From: =?utf-8?q?Ren=C3=A9?= <r@example.org>\r\n"
        b"Subject: =?utf-8?q?Caf=C3=A9?= talk\r\n"
        b"Date: Tue, 02 Jun 2026 08:30:00 +0200\r\n"
        b"Newsgroups: a.b,c.d\r\n"
        b"References: <x@h> <y@h>\r\n"
        b"In-Reply-To: <y@h>\r\n"
        b"\r\n"
        b"Body words here.\r\n"
    )
    ex = extract_article("news://h/z@h", raw, article_url)
    assert ex.title == "Café talk"
    assert ex.description == "From: René <r@example.org>; Date: Tue, 02 Jun 2026 08:30:00 +0200"
    assert ex.keywords == "a.b, c.d"
    assert ex.text == "Body words here."
    assert [(link.url, link.nofollow) for link in ex.links] == [
        ("news://h/x@h", True),
        ("news://h/y@h", True),
    ]
    assert ex.date is not None and ex.date.isoformat() == "2026-06-02T08:30:00+02:00"
