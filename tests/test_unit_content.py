"""Main content and boilerplate (search.content): the split, the boilerplate section's low
weight, and what a search shows (ranking and snippets), through the crawl's worker."""

from __future__ import annotations

import tarfile
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime

import lxml.html
import pytest

from search import db
from search.analysis import (
    DEFAULT_WEIGHTS,
    analyze_document,
    get_analyzer,
    page_sections,
    remainder_words,
)
from search.analysispool import analyze_rows
from search.content import MAX_HTML_BYTES, flatten_code, main_text, split_content
from search.index import Index
from search.query import parse_query
from search.reindex import reindex
from search.rows import DocumentRow
from search.searcher import Searcher
from search.servers import ServerConfig
from search.snippets import make_snippet, word_stems
from search.worker import WorkBatch, WorkerConfig
from search.workerprocess import Worker
from spidersite.extract import extract_html
from tests.conftest import CORPUS

BASE = "http://zoo.example/"
ANIMALS = ("zebras", "giraffes", "lions")

ARTICLES = {
    "zebras": [
        "Zebras live in herds on the open grassland of eastern and southern Africa.",
        "Each zebra has its own pattern of black and white stripes, as unique as a "
        "fingerprint; foals learn to recognise their mother by her stripes.",
        "A herd grazes for most of the day and moves on when the grass runs short, "
        "often together with wildebeest, which eat the shorter shoots the zebras leave.",
        "The keepers weigh every zebra once a month and trim its hooves twice a year.",
    ],
    "giraffes": [
        "Giraffes are the tallest animals on land: an adult bull stands over five metres.",
        "Their long necks have seven vertebrae, the same number as a mouse, and let them "
        "browse acacia leaves that no other grazer reaches.",
        "A giraffe sleeps less than two hours a day, mostly standing, in short naps of a "
        "few minutes each, and drinks by splaying its front legs wide.",
        "The keepers feed the giraffes from a raised platform where visitors may watch.",
    ],
    "lions": [
        "Lions are the only cats that live in groups, called prides, of related females, "
        "their cubs and a few males.",
        "The lionesses hunt together at dusk, while the males guard the territory and "
        "roar to keep rival prides away; a roar carries eight kilometres.",
        "Lions rest for up to twenty hours a day in the shade of the acacia trees.",
        "The keepers scatter their meat across the enclosure so that they search for it.",
    ],
}


def page_html(animal: str) -> str:
    """A page with a header, a navigation bar, breadcrumbs, a sidebar and a footer around
    its article, as a content management system writes them."""
    nav = " ".join(f'<li><a href="/{a}.html">{a.title()}</a></li>' for a in ANIMALS)
    others = [a for a in ANIMALS if a != animal]
    paragraphs = "\n".join(f"<p>{p}</p>" for p in ARTICLES[animal])
    return f"""<!DOCTYPE html>
<html lang="en"><head><title>{animal.title()} at the Savanna Park</title>
<meta name="description" content="Visiting the {animal} of the Savanna Park."></head>
<body>
<header class="site-header"><a href="/">Savanna Wildlife Park</a>
<form action="/search"><input name="q" placeholder="Search the park"></form></header>
<nav class="main-nav" role="navigation"><ul>
<li><a href="/">Home</a></li>{nav}<li><a href="/tickets.html">Tickets</a></li>
<li><a href="/contact.html">Contact</a></li></ul></nav>
<div class="breadcrumbs"><a href="/">Home</a> › <a href="/animals.html">Animals</a> ›
{animal.title()}</div>
<main><article>
<h1>{animal.title()}</h1>
{paragraphs}
</article></main>
<aside class="sidebar"><h3>Related</h3><ul>
<li><a href="/{others[0]}.html">Feeding times of the {others[0]}</a></li>
<li><a href="/{others[1]}.html">Meet the {others[1]}</a></li></ul></aside>
<footer class="site-footer"><p>Copyright 2026 Savanna Wildlife Park. Opening hours,
directions and parking. <a href="/privacy.html">Privacy policy</a></p></footer>
</body></html>"""


def crawled_row(animal: str) -> DocumentRow:
    """The row the crawler hands to the worker for the page: the whole text, the HTML."""
    url = f"{BASE}{animal}.html"
    html = page_html(animal).encode()
    ex = extract_html(url, html, "utf-8")
    return DocumentRow(
        url=url,
        server=BASE,
        values={
            "kind": "page",
            "status": 200,
            "crawled_at": datetime(2026, 12, 4, tzinfo=UTC),
            "charset": "utf-8",
            "language": ex.language,
            "title": ex.title,
            "description": ex.description,
            "keywords": ex.keywords,
            "text": ex.text,
            "noindex": False,
            "nofollow": False,
        },
        weights=ServerConfig(BASE).weights,
        html=html,
    )


# --- the split ----------------------------------------------------------------------------


def test_the_extractors_caches_of_texts_are_emptied_after_a_batch() -> None:
    """trafilatura's caches of strings are capped in entries, not bytes (an element's
    whole text each): the analysis of a batch empties them when it is done."""
    import trafilatura.utils

    html = page_html("zebras").encode()
    split_content(html, extract_html(BASE + "zebras.html", html, "utf-8").text, "utf-8", "en")
    assert trafilatura.utils.trim.cache_info().currsize > 0
    analyze_rows([crawled_row("lions")], True, None, Counter())
    assert trafilatura.utils.trim.cache_info().currsize == 0
    assert trafilatura.utils.line_processing.cache_info().currsize == 0


def test_the_main_content_is_the_article_and_the_rest_is_boilerplate() -> None:
    html = page_html("zebras").encode()
    whole = extract_html(BASE + "zebras.html", html, "utf-8").text
    content = split_content(html, whole, "utf-8", "en")
    assert content is not None
    for paragraph in ARTICLES["zebras"]:
        assert paragraph in content.main
    for chrome in ("Savanna Wildlife Park", "Tickets", "Giraffes", "Animals", "Privacy"):
        assert chrome not in content.main
    words = content.boilerplate.split()
    # Every word of the header, the navigation, the breadcrumbs, the sidebar and the
    # footer, and none of the article's.
    for word in ("savanna", "tickets", "giraffes", "lions", "animals", "feeding", "privacy"):
        assert word in words
    assert "stripes" not in words and "wildebeest" not in words
    # The two parts account for the whole text, word for word.
    analyzer = get_analyzer("en")
    assert len(analyzer.words(content.main)) + len(words) == len(analyzer.words(whole))


def test_remainder_cancels_each_word_once() -> None:
    # As bags of words: the first occurrences are the ones cancelled, order kept.
    words = get_analyzer("en").words
    assert remainder_words(
        words("Home Zebras home zebra stripes Home"), words("zebra stripes home")
    ) == ["zebras", "home", "home"]
    assert remainder_words(words("Nothing left"), words("nothing left at all")) == []


def test_the_split_hands_the_analysis_its_words() -> None:
    """The split gives the words it read (the main text's and the boilerplate's), and the
    page's analysis counts them as it would count the texts: the same records, read once."""
    html = page_html("zebras").encode()
    whole = extract_html(BASE + "zebras.html", html, "utf-8").text
    content = split_content(html, whole, "utf-8", "en")
    assert content is not None
    analyzer = get_analyzer("en")
    assert content.main_words == analyzer.words(content.main)
    assert content.boilerplate_words == remainder_words(
        analyzer.words(whole), analyzer.words(content.main)
    )
    for limit in (None, 7):
        from_texts = analyze_document(
            page_sections(BASE, "Zebras", content.main, boilerplate=content.boilerplate),
            max_words=limit,
        )
        from_words = analyze_document(
            page_sections(
                BASE, "Zebras", content.main_words, boilerplate=content.boilerplate_words
            ),
            max_words=limit,
        )
        assert from_words == from_texts
        assert len(from_words) > (5 if limit else 20)


def test_no_split_without_main_content() -> None:
    assert main_text(b"") is None
    assert main_text(b"<html><body></body></html>") is None
    # Too big to split cheaply: the whole text stays the body.
    assert main_text(b"<p>" + b"word " * (MAX_HTML_BYTES // 5) + b"</p>") is None
    assert split_content(b"   ", "some text") is None


def test_boilerplate_words_weigh_boilerplateweight() -> None:
    sections = page_sections(BASE, text="zebra stripes", boilerplate="giraffes zebra")
    records = analyze_document(sections)
    assert records["zebra"].counts == [1, 0, 0, 0, 0, 1]
    assert records["giraff"].weight == pytest.approx(DEFAULT_WEIGHTS["boilerplate"])
    assert records["stripe"].weight == pytest.approx(DEFAULT_WEIGHTS["body"])
    custom = analyze_document(sections, {"boilerplate": 0.0})
    assert custom["giraff"].weight == 0  # stored, counted, weightless


# --- through the worker, the index and the searcher ---------------------------------------


@pytest.fixture(scope="module")
def park(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Searcher]:
    data = tmp_path_factory.mktemp("content")
    url = f"sqlite:///{data / 'spidersite.db'}"
    worker = Worker(WorkerConfig(database_url=url, linkrank=False))
    report = worker.write(WorkBatch(docs=[crawled_row(a) for a in ANIMALS]))
    assert report.error is None
    assert report.inc["analyze/main_content"] == len(ANIMALS)
    worker.store.engine.dispose()
    engine = db.connect(url)
    reindex(engine, Index(data / "index"))
    yield Searcher(engine, Index(data / "index"))
    engine.dispose()


def ranked(searcher: Searcher, query: str) -> list[str]:
    hits = searcher.search(parse_query(query), per_page=10).hits
    return [h.url[len(BASE) :] for h in hits]


def snippet_of(searcher: Searcher, query: str, page: str) -> str:
    for hit in searcher.search(parse_query(query), per_page=10).hits:
        if hit.url == BASE + page:
            return hit.snippet_text()
    raise AssertionError(f"{page} is not a hit of {query!r}")


def test_only_the_main_content_is_stored(park: Searcher) -> None:
    with park.engine.connect() as conn:
        from sqlalchemy import text

        stored = dict(conn.execute(text("SELECT url, text FROM documents")).all())
    assert "Tickets" not in stored[BASE + "zebras.html"]
    assert ARTICLES["zebras"][0] in stored[BASE + "zebras.html"]


@pytest.mark.parametrize("animal", ANIMALS)
def test_a_page_about_a_word_ranks_above_pages_that_name_it_in_their_menus(
    park: Searcher, animal: str
) -> None:
    # Every page names every animal in its navigation bar, and two in its sidebar: the
    # boilerplate keeps them findable, far below the page whose article is about it.
    pages = ranked(park, animal)
    assert pages[0] == f"{animal}.html"
    assert set(pages) == {f"{a}.html" for a in ANIMALS}
    scores = [h.score for h in park.search(parse_query(animal), per_page=3).hits]
    assert scores[0] > 2 * scores[1]


def test_boilerplate_words_alone_still_find_the_pages(park: Searcher) -> None:
    assert len(ranked(park, "privacy policy")) == len(ANIMALS)


def test_boilerplate_never_makes_the_snippet(park: Searcher) -> None:
    # "giraffes" is in the zebra page's menu and sidebar only: its snippet is the start of
    # its article (or its description), never its navigation.
    snippet = snippet_of(park, "giraffes", "zebras.html")
    for chrome in ("Giraffes", "Home", "Tickets", "Savanna Wildlife", "Animals"):
        assert chrome not in snippet, snippet
    snippet = snippet_of(park, "keepers feed giraffes", "giraffes.html")
    assert "[keepers] [feed] the [giraffes]" in snippet, snippet
    assert "Feeding times" not in snippet and "Contact" not in snippet


# --- a real page of the corpus -----------------------------------------------------------


def test_python_docs_snippet_is_the_text_not_the_navigation() -> None:
    # The case: "asyncio event loop" on the Python documentation showed
    # "… Bug Show Source Navigation index modules | next | previous | Python » …".
    with tarfile.open(CORPUS / "python-3.11-docs.tar.gz") as tar:
        member = tar.extractfile("python-3.11-docs/library/asyncio-exceptions.html")
        assert member is not None
        html = member.read()
    whole = extract_html("http://x/library/asyncio-exceptions.html", html, "utf-8").text
    stems = {w[2] for w in word_stems("asyncio event loop", None)}
    before = "".join(s.text for s in make_snippet(whole, stems))
    assert "Show Source" in before  # what the whole page gave
    content = split_content(html, whole, "utf-8", "en")
    assert content is not None
    after = "".join(s.text for s in make_snippet(content.main, stems))
    for chrome in ("Show Source", "Navigation", "index modules", "previous |", "Documentation »"):
        assert chrome not in after, after
    assert "asyncio" in after and "Source code: Lib/asyncio/exceptions.py" in after
    # The navigation's words are not dropped: they are the boilerplate section's.
    assert {"show", "source", "navigation", "modules"} <= set(content.boilerplate.split())


def test_flatten_code_removes_the_spans_of_code_only() -> None:
    tree = lxml.html.fromstring(
        "<html><body><div class='share'><span class='byline'>By Ann</span> news</div>"
        "<pre><span></span><span class='kn'>import</span> <span class='nn'>os</span>"
        "<span class='c1'># a comment</span>\nx</pre>"
        "<p>Call <code class='literal'><span class='pre'>os.close()</span></code> now"
        "<a href='/x'><code><span class='pre'>fd</span></code></a> here.</p></body></html>"
    )
    text = tree.text_content()
    flatten_code(tree)
    assert not tree.xpath("//pre//span | //code//span")
    assert tree.xpath("//div/span[@class='byline']")  # outside code: the extractor's to judge
    assert tree.text_content() == text  # every text and tail kept, in its place
    assert tree.xpath("string(//pre)") == "import os# a comment\nx"


@pytest.mark.parametrize(
    "page",
    [
        "python-3.11-docs/library/json.html",
        "python-3.11-docs/tutorial/controlflow.html",
        "postgresql-15-docs/plpgsql-control-structures.html",
    ],
)
def test_code_pages_keep_the_extractors_words(page: str) -> None:
    """Highlighted code flattened before the extractor (:func:`flatten_code`), a page keeps
    the words the extractor keeps of the page as served."""
    import trafilatura

    from search.content import _options

    with tarfile.open(CORPUS / f"{page.split('/')[0]}.tar.gz") as tar:
        member = tar.extractfile(page)
        assert member is not None
        html = member.read()
    tree = lxml.html.fromstring(html)
    assert tree.xpath("count(//pre//span | //code//span)") > 20  # code the change is about
    analyzer = get_analyzer("en")
    as_served = trafilatura.extract(html.decode("utf-8"), options=_options())
    got = main_text(html, "utf-8")
    assert got is not None and as_served is not None
    assert analyzer.words(got) == analyzer.words(as_served)


def test_boilerplate_holds_no_word_made_by_what_the_extractor_drops() -> None:
    """The extractor drops format characters (a soft hyphen, a zero-width space) and
    composes accents (NFC); the page's whole text is read alike before the main content's
    words are taken out of it, so the boilerplate gets no pieces of main-content words
    ("in" and "formation" of "In\\u00adformation") nor a decomposed word's letters."""
    from spidersite.extract import extract_html

    sentence = "Die In\u00adformation ist wich\u200btig, sagt das Cafe\u0301 am Markt. "
    html = (
        "<html><head><title>T</title></head><body><nav>Startseite Kontakt</nav><article><p>"
        + sentence * 20
        + "</p></article></body></html>"
    ).encode()
    extracted = extract_html("http://a.example/", html, "utf-8", 100)
    content = split_content(html, extracted.text, "utf-8", "de")
    assert content is not None
    assert "information" in content.main_words and "café" in content.main_words
    assert sorted(content.boilerplate_words) == ["kontakt", "startseite"]
