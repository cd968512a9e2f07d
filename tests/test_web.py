"""The web application: search page, JSON endpoint, document pages (Flask test client)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, CrawlResult, Site, _env, read_only_tree, run_crawl

PAGES = {
    "/": (
        "Animals of the savanna",
        "The savanna is home to lions, zebras and giraffes.",
        ["/lion.html", "/zebra.html", "/giraffe.html", "/mix.html", "/xss.html"],
    ),
    "/lion.html": ("Lion", "The lion hunts zebras at night. Lions sleep all day.", ["/"]),
    "/zebra.html": ("Zebra", "A zebra has black and white stripes. Zebras eat grass.", ["/"]),
    "/giraffe.html": ("Giraffe", "The giraffe eats leaves from tall trees.", []),
    "/mix.html": ("Mixed", "Black stripes and white stripes; zebras and stripes.", []),
}
XSS = (
    "<html><head><title>&lt;script&gt;alert(1)&lt;/script&gt;</title></head>"
    "<body>zebras and a script <img src=x onerror=alert(2)> injection</body></html>"
)


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> CrawlResult:
    from tests.conftest import _serve_site

    gen = _serve_site()
    site: Site = next(gen)
    for path, (title, body, links) in PAGES.items():
        site.page(path, title, body, links)
    site.add("/xss.html", XSS)
    result = run_crawl(tmp_path_factory.mktemp("web"), "-a", f"seeds={site.url}")
    assert result.returncode == 0, result.stderr
    result.base = site.url  # type: ignore[attr-defined]
    gen.close()
    return result


def make_app(data_dir: Path, database_url: str | None = None, **env: str) -> Any:
    from search.web import create_app
    from search.web.settings import WebSettings

    settings = WebSettings.from_env(str(data_dir), database_url, env=env)
    return create_app(settings)


@pytest.fixture(scope="module")
def client(crawled: CrawlResult) -> Any:
    app = make_app(crawled.data_dir, crawled.database_url)
    return app.test_client()


def text(resp: Any) -> str:
    return str(resp.get_data(as_text=True))


def test_search_page_lists_hits_with_marked_snippets(client: Any) -> None:
    resp = client.get("/?q=zebras")
    assert resp.status_code == 200
    html = text(resp)
    assert re.search(r"Results 1–\d+ of \d+ for <q>zebras</q> \(\d+ ms\)", html)
    assert "<mark>zebras</mark>" in html or "<mark>Zebras</mark>" in html
    assert 'class="score">score ' in html
    assert "/zebra.html" in html
    assert html.count('class="hit"') >= 4
    # Crawled text is isolated from the page's direction (a right-to-left title, or one
    # with a bidi override, cannot reorder what stands around it).
    assert html.count('class="title" dir="auto"') == html.count('class="hit"')
    assert html.count('<p class="snippet" dir="auto">') == html.count('class="hit"')


def test_search_pagination_and_modes(client: Any) -> None:
    first = text(client.get("/?q=zebras&n=2"))
    assert "Results 1–2 of" in first
    assert 'rel="next" href="/?q=zebras&amp;page=2&amp;n=2"' in first
    second = text(client.get("/?q=zebras&n=2&page=2"))
    assert "Results 3–4 of" in second
    assert 'rel="prev"' in second
    # all words: only pages with both words
    data = client.get("/api/search?q=black+giraffe&mode=all").get_json()
    assert data["total"] == 0 and data["mode"] == "all"
    data = client.get("/api/search?q=black+giraffe").get_json()
    assert data["total"] >= 2
    urls = [h["url"] for h in client.get('/api/search?q="white+stripes"').get_json()["hits"]]
    assert urls and all(u.endswith(("zebra.html", "mix.html")) for u in urls)
    urls = [h["url"] for h in client.get("/api/search?q=zebras+-stripes").get_json()["hits"]]
    assert urls and not any(u.endswith(("zebra.html", "mix.html")) for u in urls)
    assert client.get("/api/search?q=zebras+site:127.0.0.1").get_json()["total"] >= 4


def test_json_endpoint(client: Any, crawled: CrawlResult) -> None:
    resp = client.get("/api/search?q=lion&n=1")
    assert resp.status_code == 200
    data = resp.get_json()
    assert set(data) >= {"query", "total", "page", "per_page", "seconds", "hits", "mode"}
    hit = data["hits"][0]
    assert hit["rank"] == 1 and hit["url"].endswith("/lion.html")
    assert set(hit) >= {"score", "docid", "title", "snippet", "snippet_html", "document"}
    assert hit["document"].endswith(f"/doc/{hit['docid']}")
    assert client.get("/api/search?q=").status_code == 400
    assert "error" in client.get("/api/search?q=the").get_json()
    assert client.get("/api/search?q=lion&n=0").status_code == 400
    assert client.get("/api/search?q=lion&page=x").status_code == 400
    assert client.get("/api/search?q=lion&mode=some").status_code == 400
    spec = client.get("/api/openapi.json").get_json()
    assert "/api/search" in spec["paths"]
    # In the order the CLI's --json prints them (Flask sorts keys unless told not to).
    assert list(data)[:3] == ["query", "suggestion", "total"], list(data)


def test_a_phrases_count_is_exact_only_when_every_candidate_was_checked(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from search import searcher

    data = client.get('/api/search?q="white stripes"&n=1').get_json()
    assert data["total"] == 2 and data["total_exact"] is True
    # Only the best candidate checked: its count is a lower bound, and says so.
    monkeypatch.setattr(searcher, "PHRASE_CANDIDATES", 1)
    monkeypatch.setattr(searcher, "PHRASE_DEPTH", 1)
    data = client.get('/api/search?q="white stripes"&n=1').get_json()
    assert data["total"] == 1 and data["total_exact"] is False
    html = client.get('/?q="white stripes"&n=1').get_data(as_text=True)
    assert "Results 1–1 of about 1 for" in html


def test_an_excluded_phrase_leaves_out_the_pages_that_say_it(client: Any) -> None:
    # The zebra page says "black and white stripes": the words, not the phrase.
    data = client.get('/api/search?q=stripes -"black stripes"').get_json()
    assert [h["url"].rsplit("/", 1)[1] for h in data["hits"]] == ["zebra.html"]
    assert data["total"] == 1 and data["total_exact"] is True


def test_api_errors_are_json_and_odd_ids_are_404(client: Any) -> None:
    for path in ("/api/nothing", "/api/search/extra"):
        resp = client.get(path)
        assert resp.status_code == 404 and resp.get_json()["error"].startswith("Not Found")
    resp = client.post("/api/search?q=lion")
    assert resp.status_code == 405 and "error" in resp.get_json()
    # The API takes no float: a number that is not whole (nan, inf) is a bad parameter.
    for query in ("n=nan", "page=inf", "n=1e3", "page=-inf"):
        resp = client.get(f"/api/search?q=lion&{query}")
        assert resp.status_code == 400 and "error" in resp.get_json(), query
    # An id past the database's 64-bit integers names no document: 404, not a 500.
    for path in ("/doc/9223372036854775808", "/doc/99999999999999999999/text"):
        assert client.get(path).status_code == 404, path
    assert client.get("/doc/99999999999999999999/cached").status_code == 404
    assert client.get("/doc/9223372036854775807").status_code == 404


def test_a_wrong_method_or_path_is_405_or_404_before_the_csrf_check(tmp_path: Path) -> None:
    """Routing answers first: a method a route does not take is 405, a path that is not
    there 404, whatever the CSRF token; a route that takes the method still wants one."""
    client = make_app(tmp_path / "data").test_client()
    for method in ("post", "put", "delete", "patch"):
        resp = getattr(client, method)("/api/search?q=lion")
        assert resp.status_code == 405, method
        assert resp.get_json()["error"].startswith("Method Not Allowed"), method
    for path in ("/api/nothere", "/api/search/extra", "/nothere"):
        resp = client.post(path, data={"x": "1"})
        assert resp.status_code == 404, path
    assert client.post("/api/nothere").get_json()["error"].startswith("Not Found")
    assert client.put("/admin/logout").status_code == 405
    assert client.post("/admin/logout").status_code == 400  # its route: the token is checked


def test_api_search_keeps_the_index_open_between_requests(
    crawled: CrawlResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index is opened once, by the serve command's warm-up before it listens, and
    each request reuses it, with the same answer as a searcher opened for it alone."""
    import search.searcher
    from search.commands.serve import warm_up
    from search.index import Index
    from search.query import parse_query

    opened: list[Any] = []
    real = search.searcher.open_searcher

    def counting(index: Any, *args: Any) -> Any:
        opened.append(index)
        return real(index, *args)

    monkeypatch.setattr(search.searcher, "open_searcher", counting)
    app = make_app(crawled.data_dir, crawled.database_url)
    warm_up(app)
    assert len(opened) == 1
    c = app.test_client()
    answers = [c.get(f"/api/search?q={q}").get_json() for q in ("zebras", "lion", "zebras")]
    assert len(opened) == 1
    assert c.get("/api/search?q=the").status_code == 400  # a query error keeps it open too
    assert c.get("/api/search?q=stripes").status_code == 200
    assert len(opened) == 1
    alone = search.searcher.Searcher(
        app.extensions["spidersite.engine"], Index(app.extensions["spidersite.index"].path)
    ).search(parse_query("zebras"))
    assert [(h["url"], h["snippet_html"]) for h in answers[0]["hits"]] == [
        (h.url, h.snippet_html()) for h in alone.hits
    ]
    assert answers[2]["hits"] == answers[0]["hits"]


def _scores(client: Any, query: str) -> dict[str, float]:
    """Each hit's score, by the end of its URL, as /api/search answers *query*."""
    data = client.get(f"/api/search?q={query}").get_json()
    return {h["url"].rsplit("/", 1)[1]: h["score"] for h in data["hits"]}


def test_the_web_ranks_with_the_ranking_of_its_settings(crawled: CrawlResult) -> None:
    """``serve``'s ranking options reach every search of the application (the search
    page, /api/search, the searchers the warm-up opens), not only ``query``'s."""
    import dataclasses

    from search.commands.serve import warm_up
    from search.index import Index
    from search.query import parse_query
    from search.ranking import DEFAULT, Params
    from search.searcher import Searcher
    from search.web import create_app

    default = make_app(crawled.data_dir, crawled.database_url)
    assert default.config["SPIDERSITE"].ranking == DEFAULT
    params = Params(linkrank=0, k1=0.9)
    settings = dataclasses.replace(default.config["SPIDERSITE"], ranking=params)
    app = create_app(settings)
    warm_up(app).join()
    with app.extensions["spidersite.searchers"].searcher() as searcher:
        assert searcher.params is params  # the one the warm-up opened
    c = app.test_client()
    served, by_default = _scores(c, "zebras"), _scores(default.test_client(), "zebras")
    assert served.keys() == by_default.keys() and len(served) >= 4
    assert all(served[u] != by_default[u] for u in served), (served, by_default)
    alone = Searcher(app.extensions["spidersite.engine"], Index(settings.index_dir), params)
    expected = {h.url.rsplit("/", 1)[1]: h.score for h in alone.search(parse_query("zebras")).hits}
    assert served == pytest.approx(expected)
    best = max(expected.values())
    assert f'class="score">score {best:.3f}' in text(c.get("/?q=zebras"))
    # The expansion's options too: every query expanded, on an index of any size (by
    # default one word on six pages is not), finds pages through the words it adds.
    expanding = Params(expansion="bo1", fb_min_words=1, fb_min_docs=0, fb_skip_held=0)
    app = create_app(dataclasses.replace(settings, ranking=expanding))
    expanded = app.test_client().get("/api/search?q=grass").get_json()
    assert default.test_client().get("/api/search?q=grass").get_json()["total"] == 1
    assert expanded["total"] == 5 and expanded["hits"][0]["url"].endswith("/zebra.html")


WARM_SEGMENTER = """
import time
import jieba
from search.commands.serve import warm_up
from search.web import create_app
from search.web.settings import WebSettings

app = create_app(WebSettings.from_env())
assert not jieba.dt.initialized
start = time.perf_counter()
thread = warm_up(app)
returned = time.perf_counter() - start
thread.join(120)
print(jieba.dt.initialized, returned)
"""


def test_serve_warms_the_chinese_segmenter_in_the_background(crawled: CrawlResult) -> None:
    """jieba's dictionary takes 1-3.5 s to load: ``serve`` loads it on a thread of its own
    as it starts, so that the first query that meets Chinese text does not wait for it,
    and the index warms up meanwhile."""
    initialized, returned = _run_script(crawled, WARM_SEGMENTER).split()
    assert initialized == "True"
    assert float(returned) < 1.0  # the index's warm-up only, not the dictionary's


SERVE_LISTENS = """
import sys
import jieba
import waitress.server

def create_server(*args, **kwargs):
    print("listening with the dictionary loaded:", jieba.dt.initialized)
    raise SystemExit(0)

waitress.server.create_server = create_server
from search.cli import main
sys.exit(main(["serve", "--port", "8123"]))
"""


def test_serve_listens_once_the_segmenter_is_loaded(crawled: CrawlResult) -> None:
    """A query that came while jieba's dictionary loaded competed with it for the
    interpreter (a first /api/search of 0.7 s): ``serve`` listens once it is loaded."""
    out = _run_script(crawled, SERVE_LISTENS)
    assert "listening with the dictionary loaded: True" in out, out


SERVE_RANKING = """
import json
import sys
import waitress.server

class Server:
    effective_port = 8123

    def __init__(self, app):
        self.app = app

    def run(self):
        with self.app.extensions["spidersite.searchers"].searcher() as searcher:
            warmed = searcher.params  # the searcher the warm-up opened
        data = self.app.test_client().get("/api/search?q=zebras").get_json()
        print(json.dumps({
            "settings": repr(self.app.config["SPIDERSITE"].ranking),
            "warmed": repr(warmed),
            "scores": {h["url"]: h["score"] for h in data["hits"]},
        }))

    def close(self):
        pass

waitress.server.create_server = lambda app, **kwargs: Server(app)
from search.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_serve_ranks_with_its_ranking_options(crawled: CrawlResult) -> None:
    """``serve --k1 0.9 --linkrank 0 --fb-min-words 1``: the options reach the settings,
    the searchers (the warmed one too) and /api/search, and the non-default ones are
    said in one line as it starts."""
    from search import db
    from search.index import Index
    from search.query import parse_query
    from search.ranking import Params
    from search.searcher import Searcher

    args = ["serve", "--port", "8123", "--fb-min-words", "1", "--k1", "0.9", "--linkrank", "0"]
    out = _run_script(crawled, SERVE_RANKING, *args).splitlines()
    params = Params(k1=0.9, fb_min_words=1, linkrank=0.0)
    assert out[0] == (
        "Ranking: --k1 0.9 --linkrank 0 --fb-min-words 1 (the other parameters at their defaults)"
    )
    assert out[1].startswith("Serving on http://127.0.0.1:8123/ with waitress, 8 threads")
    served = json.loads(out[2])
    assert served["settings"] == served["warmed"] == repr(params)
    engine = db.connect(crawled.database_url)
    alone = Searcher(engine, Index(crawled.data_dir / "index"), params)
    hits = alone.search(parse_query("zebras")).hits
    assert len(hits) >= 4
    assert served["scores"] == pytest.approx({h.url: h.score for h in hits})
    by_default = Searcher(engine, Index(crawled.data_dir / "index")).search(parse_query("zebras"))
    assert all(served["scores"][h.url] != h.score for h in by_default.hits)
    # At the defaults, no such line.
    out = _run_script(crawled, SERVE_RANKING, "serve", "--port", "8123").splitlines()
    assert out[0].startswith("Serving on") and json.loads(out[1])["settings"] == repr(Params())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--k1", "nan"], "k1 must be a finite number, not nan"),
        (["--linkrank", "-1"], "linkrank must be >= 0"),
        (["--fb-min-words", "0"], "fb_min_words must be >= 1 and fb_min_docs >= 0"),
        (["--w-title", "2", "--bm25f", "merged"], "w_title scale BM25F's section weights"),
    ],
)
def test_serve_refuses_a_ranking_option_out_of_range(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``query`` refuses it: one line, exit status 2, before anything is opened."""
    from search.cli import main

    assert main(["serve", "--data-dir", str(tmp_path / "data"), *args]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {message}"), err
    assert not (tmp_path / "data").exists()


def test_the_ranking_line_reads_back_as_the_options() -> None:
    """What ``serve`` says of its ranking are options that give the same parameters."""
    import argparse

    from search.commands.query import add_ranking_options, ranking_options, ranking_params
    from search.ranking import DEFAULT, Params

    parser = argparse.ArgumentParser()
    add_ranking_options(parser, language=False)
    assert ranking_options(DEFAULT) == []
    for params in (
        Params(k1=0.9, fb_min_words=1),
        Params(expansion="none", b_title=-0.5, w_body=1.25, linkrank=0, proximity=1e-5),
        Params(model="dph", fuse="bm25", bm25f="merged", fb_skip_held=0, decay_words=0),
    ):
        assert ranking_params(parser.parse_args(ranking_options(params))) == params


def _run_script(crawled: CrawlResult, script: str, *args: str) -> str:
    """Standard output of Python *script* (given *args*), run in a process of its own on
    the crawl."""
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env=_env(crawled.data_dir, crawled.database_url),
        text=True,
        capture_output=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_search_page_errors_are_shown(client: Any) -> None:
    resp = client.get("/?q=the+and")
    assert resp.status_code == 400  # as /api/search answers, the message on the page
    assert "only stop words" in text(resp)
    assert client.get("/?q=lion&n=abc").status_code == 400
    assert "No results for" in text(client.get("/?q=quagga"))
    assert text(client.get("/")).count('class="hit"') == 0


def test_xss_title_is_escaped(client: Any) -> None:
    html = text(client.get("/?q=injection"))
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "onerror=alert(2)>" not in html
    docid = client.get("/api/search?q=injection").get_json()["hits"][0]["docid"]
    page = text(client.get(f"/doc/{docid}"))
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    stored = text(client.get(f"/doc/{docid}/text"))
    assert "<img" not in stored
    resp = client.get("/")
    assert "script-src 'self'" in resp.headers["Content-Security-Policy"]


def test_document_page(client: Any, crawled: CrawlResult) -> None:
    base = crawled.base  # type: ignore[attr-defined]
    docid = crawled.scalar("SELECT id FROM documents WHERE url = :u", u=base + "lion.html")
    home = crawled.scalar("SELECT id FROM documents WHERE url = :u", u=base)
    resp = client.get(f"/doc/{docid}")
    assert resp.status_code == 200
    html = text(resp)
    for label in (
        "Status",
        "Content type",
        "Charset",
        "Size",
        "Keywords",
        "Description",
        "Hops",
        "Last modified",
        "Last index time",
        "Next index time",
        "Server",
    ):
        assert f"<th>{label}</th>" in html
    assert f'href="{base}lion.html"' in html  # the original
    assert '<h1 dir="auto">' in html and '<tr><th>Title</th><td dir="auto">' in html
    assert base in html  # its server
    # top words with counts and weights: "lion" is in the title, URL and body
    # (body, title, URL, description, keywords, boilerplate, weight)
    assert "<th>boilerplate</th>" in html
    row = re.search(
        r'<tr><td dir="auto">lion</td><td dir="auto">\w+</td>((?:<td>[\d.]+</td>){7})</tr>', html
    )
    assert row, html
    counts = re.findall(r"<td>([\d.]+)</td>", row.group(1))
    assert int(counts[0]) >= 1 and int(counts[1]) == 1 and float(counts[6]) > 4
    # outgoing (to the home page, a stored document) and incoming links
    outgoing = html.split('id="outgoing"')[1].split("</ul>")[0]
    assert f'href="/doc/{home}"' in outgoing
    incoming = html.split('id="incoming"')[1].split("</ul>")[0]
    assert f'href="/doc/{home}"' in incoming and "Animals of the savanna" in incoming
    stored = text(client.get(f"/doc/{docid}/text"))
    assert "The lion hunts zebras at night" in stored
    assert client.get("/doc/999999").status_code == 404
    assert client.get("/doc/999999/text").status_code == 404


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        ("lion " * 2000, 400, "bytes long: at most 8192"),
        (" ".join(f"w{i}" for i in range(1000)), 400, "1000 words: at most 500"),
        ('"' + " ".join(f"w{i}" for i in range(1000)) + '"', 400, "1000 words: at most 500"),
        ('"' + " ".join(f"w{i}" for i in range(40)) + '"', 400, "phrase has 40 words"),
        ("title:zebra AND (lion OR NOT giraffe*) ~2", 200, None),
        ('"black and white', 200, None),
        ("zebra\x00lion", 200, None),
        ("lion " + " ".join(f"site:h{i}" for i in range(17)), 400, "17 site: restrictions"),
    ],
    ids=["bytes", "words", "phrase", "phrase-words", "whoosh-syntax", "open-quote", "nul", "sites"],
)
def test_api_search_hostile_queries(client: Any, query: str, status: int, message: str) -> None:
    resp = client.get("/api/search", query_string={"q": query})
    assert resp.status_code == status
    if message:
        assert message in resp.get_json()["error"]
    else:
        assert resp.get_json()["total"] >= 1


def test_api_search_bounds_pages_and_bytes(client: Any) -> None:
    deep = client.get("/api/search?q=zebras&page=1001&n=10")
    assert deep.status_code == 400
    assert "results beyond the first 10,000" in deep.get_json()["error"]
    assert client.get("/api/search?q=zebras&page=100000").status_code == 400
    assert client.get("/api/search?q=zebras&n=101").status_code == 400
    # Bytes that are not UTF-8 in the URL: replaced, an answer all the same.
    assert client.get("/api/search?q=zebras%FF%FE").status_code == 200
    html = client.get("/", query_string={"q": "lion " * 2000})
    assert "at most 8192" in text(html)


def test_search_page_refuses_a_thousand_word_phrase(client: Any) -> None:
    phrase = '"' + " ".join(f"w{i}" for i in range(1000)) + '"'
    resp = client.get("/", query_string={"q": phrase})
    assert resp.status_code == 400
    assert "1000 words: at most 500" in text(resp)
    assert text(resp).count('class="hit"') == 0


def test_no_index_yet(tmp_path: Path) -> None:
    client = make_app(tmp_path / "empty").test_client()
    resp = client.get("/?q=lion")
    assert resp.status_code == 503 and "there is no search index yet" in text(resp)
    assert client.get("/api/search?q=lion").status_code == 503


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(env: dict[str, str], port: int, path: str) -> tuple[Any, bytes, Any]:
    """``python -m search serve`` on *port* (2 threads), and its first answer to *path*
    once it is up: the process (the caller stops it), the body and the headers."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "search", "serve", "--port", str(port), "--threads", "2"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                return proc, r.read(), r.headers
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.terminate()
                proc.communicate(timeout=10)
                raise
            time.sleep(0.2)


def test_serve_command(crawled: CrawlResult) -> None:
    port = _free_port()
    env = _env(crawled.data_dir, crawled.database_url)
    proc, body, headers = _serve(env, port, "/?q=lion")
    try:
        assert "lion.html" in body.decode()
        assert headers["Server"] == "waitress"  # not Werkzeug's development server
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert f"Serving on http://127.0.0.1:{port}/ with waitress, 2 threads" in out
    for option in (["--port", "0"], ["--threads", "0"]):
        bad = subprocess.run(
            [sys.executable, "-m", "search", "serve", *option],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == 2 and option[0] in bad.stderr


def test_serve_a_read_only_data_folder(crawled: CrawlResult, tmp_path: Path) -> None:
    """A deployed copy on a read-only file system: ``serve`` starts and searches, says in
    one line each what cannot work there, and the admin's login and logout work for the
    sessions of its own process."""
    import shutil

    deployed = tmp_path / "deployed"
    shutil.copytree(crawled.data_dir, deployed)
    for name in ("web-secret-key", "web-session-epoch", "spidersite.db-wal", "spidersite.db-shm"):
        (deployed / name).unlink(missing_ok=True)
    port = _free_port()
    env = {**_env(deployed, None), "SPIDERSITE_ADMIN_PASSWORD": "a long passphrase"}
    with read_only_tree(deployed):
        proc, body, _ = _serve(env, port, "/api/search?q=lion")
        try:
            hits = json.loads(body)["hits"]
            assert hits and hits[0]["url"].endswith("lion.html")
            with urllib.request.urlopen(hits[0]["document"], timeout=5) as r:
                assert r.status == 200
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=10)
        assert "Serving on" in out, err
        assert "Traceback" not in err
        notes = [line for line in err.splitlines() if line.startswith("warning: ")]
        assert len(notes) == 3, err
        assert f"the data folder {deployed} cannot be written" in notes[0]
        assert "searching works" in notes[0]
        assert "SPIDERSITE_SECRET_KEY" in notes[1]
        assert "logout" in notes[2] and "this process only" in notes[2]

        # The admin, in this process: its login, and a logout that ends its sessions.
        app = make_app(deployed, None, SPIDERSITE_ADMIN_PASSWORD="a long passphrase")
        client = app.test_client()
        page = text(client.get("/admin/login"))
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert csrf
        form = {"password": "a long passphrase", "csrf_token": csrf.group(1)}
        assert client.post("/admin/login", data=form).status_code == 302
        assert client.get("/admin/").status_code == 200
        kept = client.get_cookie("spidersite_session")
        assert kept is not None
        page = text(client.get("/admin/"))
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert csrf
        resp = client.post("/admin/logout", data={"csrf_token": csrf.group(1)})
        assert resp.status_code == 302
        other = app.test_client()  # a copy of the cookie from before the logout
        other.set_cookie("spidersite_session", kept.value)
        assert other.get("/admin/").status_code == 302
        # The admin cannot change the database: said on the page (503), nothing written.
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', text(client.get("/admin/login")))
        assert csrf
        form["csrf_token"] = csrf.group(1)
        assert client.post("/admin/login", data=form).status_code == 302
        page = text(client.get("/admin/servers/new"))
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert csrf
        resp = client.post(
            "/admin/servers/new",
            data={"url": "http://new.example/", "userobots": "on", "csrf_token": csrf.group(1)},
        )
        assert resp.status_code == 503, text(resp)
        assert "cannot be written" in text(resp)
    assert sorted(p.name for p in deployed.iterdir()) == sorted(
        p.name
        for p in crawled.data_dir.iterdir()
        if p.name not in ("web-secret-key", "web-session-epoch")
        and not p.name.startswith("spidersite.db-")
    )


SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def assert_security_headers(resp: Any, where: str) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert resp.headers.get(name) == value, (where, name)
    csp = resp.headers.get("Content-Security-Policy", "")
    for part in ("default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"):
        assert part in csp, (where, csp)


def test_security_headers_on_every_response(tmp_path: Path) -> None:
    app = make_app(tmp_path / "data", SPIDERSITE_ADMIN_PASSWORD="pw")

    def boom() -> Any:
        raise RuntimeError("a bug")

    app.add_url_rule("/boom", view_func=boom)
    client = app.test_client()
    for method, path, status in [
        ("get", "/", 200),
        ("get", "/?q=lion", 503),  # no index yet, as /api/search
        ("get", "/?q=lion&n=abc", 400),
        ("get", "/api/search?q=lion", 503),
        ("get", "/api/openapi.json", 200),
        ("get", "/healthz", 200),
        ("get", "/static/style.css", 200),
        ("get", "/nowhere", 404),
        ("get", "/doc/12345", 404),
        ("get", "/admin/login", 200),
        ("post", "/admin/logout", 400),
        ("post", "/admin/login", 400),  # no CSRF token
        ("get", "/admin/", 302),
        ("get", "/admin/login", 200),
        ("get", "/boom", 500),
    ]:
        resp = getattr(client, method)(path)
        resp.close()  # a static file is streamed from an open file
        assert resp.status_code == status, path
        assert_security_headers(resp, f"{method} {path}")
    assert "a bug" not in text(client.get("/boom"))


# -- hostile stored documents -----------------------------------------------------------

#: What a hostile site can get into the database: markup in every text field, and URLs
#: that a browser would run (a crawl never stores them; a database written by something
#: else, or an older version, might).
HOSTILE_TITLE = '<script>alert("title")</script>'
HOSTILE_DESC = '"><img src=x onerror=alert("desc")>'
HOSTILE_TEXT = "<svg onload=alert('body')> quokka marsupial </textarea><b>bold</b>"
HOSTILE_URLS = [
    "javascript:alert(document.cookie)//quokka",
    "JaVaScRiPt:alert(2)//quokka",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgzKTwvc2NyaXB0Pg==#quokka",
    "vbscript:msgbox(4)//quokka",
    'http://quokka.example/"><script>alert(5)</script>',
]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[int], Any]:
    """A data folder whose documents (stored through the store, then indexed) are hostile,
    and a crawl error and a server with markup, for the admin pages."""
    from datetime import UTC, datetime

    from search import db
    from search.analysis import analyze_document
    from search.index import Index
    from search.reindex import reindex
    from search.rows import DocumentRow, ErrorRow
    from search.store import DocumentStore

    data = tmp_path_factory.mktemp("hostile")
    engine = db.connect(f"sqlite:///{data / 'spidersite.db'}")
    now = datetime.now(UTC)
    rows = []
    for url in HOSTILE_URLS:
        sections = {"body": HOSTILE_TEXT, "title": HOSTILE_TITLE, "url": "", "desc": HOSTILE_DESC}
        values = {
            "kind": "page",
            "status": 200,
            "content_type": "text/html",
            "title": HOSTILE_TITLE,
            "description": HOSTILE_DESC,
            "keywords": HOSTILE_DESC,
            "text": HOSTILE_TEXT,
            "crawled_at": now,
        }
        links = [(u, HOSTILE_TITLE, False) for u in HOSTILE_URLS]
        rows.append(DocumentRow(url, None, values, analyze_document(sections), links))
    store = DocumentStore(engine)
    errors = [ErrorRow(u, None, "http", HOSTILE_DESC, now) for u in HOSTILE_URLS]
    ids = [d.id for d in store.write_batch(rows, errors).documents]
    assert reindex(engine, Index(data / "index")) == len(HOSTILE_URLS)
    app = make_app(data, f"sqlite:///{data / 'spidersite.db'}", SPIDERSITE_ADMIN_PASSWORD="pw")
    return app, ids, engine


MARKUP = ("<script>", "<img", "<svg onload", "<b>bold", 'onerror=alert("desc")>')


def assert_inert(html: str) -> None:
    """No markup of the documents, and no link to any URL that is not http(s) or ftp."""
    for bad in MARKUP:
        assert bad not in html, bad
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert hrefs
    assert all(h.startswith(("/", "http://", "https://", "ftp://")) for h in hrefs), hrefs


def test_hostile_documents_are_shown_as_text(hostile: tuple[Any, list[int], Any]) -> None:
    app, ids, _ = hostile
    client = app.test_client()
    page = text(client.get("/?q=quokka"))
    assert page.count('class="hit"') == len(HOSTILE_URLS)
    assert_inert(page)
    assert "&lt;script&gt;alert(&#34;title&#34;)&lt;/script&gt;" in page
    assert "javascript:alert(document.cookie)//quokka" in page  # shown, as text
    # a hostile http URL is a link, with its quotes escaped inside the attribute
    assert 'href="http://quokka.example/&#34;&gt;&lt;script&gt;' in page
    for doc_id in ids:
        for path in (f"/doc/{doc_id}", f"/doc/{doc_id}/text"):
            html = text(client.get(path))
            assert_inert(html)
            assert "&lt;script&gt;alert(&#34;title&#34;)" in html
    # the JSON endpoint's HTML snippet is escaped too
    for hit in client.get("/api/search?q=quokka").get_json()["hits"]:
        assert "<svg" not in hit["snippet_html"] and "<b>bold" not in hit["snippet_html"]
        assert "&lt;b&gt;bold" in hit["snippet_html"]


def test_hostile_documents_in_the_admin(hostile: tuple[Any, list[int], Any]) -> None:
    from tests.test_web_admin import token

    app, _, _ = hostile
    client = app.test_client()
    csrf = token(text(client.get("/admin/login")))
    assert client.post("/admin/login", data={"password": "pw", "csrf_token": csrf}).status_code
    for path in ("/admin/", "/admin/servers", "/admin/log", "/admin/crawls"):
        resp = client.get(path)
        assert resp.status_code == 200, path
        assert_inert(text(resp))
    log = text(client.get("/admin/log"))
    assert "javascript:alert(document.cookie)//quokka" in log
    assert "&#34;&gt;&lt;img src=x onerror" in log


def test_links_only_for_web_schemes() -> None:
    from search.urls import has_scheme

    for url in (
        "http://a.example/",
        "HTTPS://a.example/",
        "ftp://f.example/x",
        "news://n.example/a@b",
        "nntp://n.example:1119/comp.x",
    ):
        assert has_scheme(url), url
    for url in (
        "javascript:alert(1)",
        " javascript:alert(1)",
        "\x01javascript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html,x",
        "vbscript:x",
        "file:///etc/passwd",
        "//evil.example/",
        "/relative",
        "",
        None,
    ):
        assert not has_scheme(url), url


def test_stored_copy_only_from_the_data_folder(
    hostile: tuple[Any, list[int], Any], tmp_path: Path
) -> None:
    from sqlalchemy import update

    from search.models import Document

    app, ids, engine = hostile
    data_dir = app.config["SPIDERSITE"].data_dir
    (data_dir / "notwarc.warc.gz").write_text("just text\n")
    outside = tmp_path / "secret.warc.gz"
    outside.write_text("WARC/1.0 not for the web\n")
    (data_dir / "link.warc.gz").symlink_to(outside)
    client = app.test_client()
    for path, message in [
        ("/etc/passwd", "outside the data folder"),
        (str(outside), "outside the data folder"),
        (str(data_dir / ".." / outside.parent.name / outside.name), "outside the data folder"),
        (str(data_dir / "link.warc.gz"), "outside the data folder"),
        (str(data_dir / "notwarc.warc.gz"), "is not a WARC file"),
        (str(data_dir / "missing.warc.gz"), "cannot read the page store file"),
    ]:
        with engine.begin() as conn:
            conn.execute(
                update(Document).where(Document.id == ids[0]).values(warc_file=path, warc_offset=0)
            )
        resp = client.get(f"/doc/{ids[0]}/cached")
        assert resp.status_code == 404, path
        body = text(resp)
        assert message in body and "root:" not in body and "not for the web" not in body, path
