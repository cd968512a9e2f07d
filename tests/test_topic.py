"""Topic-focused crawl: the score A = 4·B + C, the middleware, and a crawl of the PostgreSQL
docs with the topic "vacuum autovacuum bloat"."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from spidersite.items import ErrorItem, PageItem
from spidersite.middlewares.topic import TopicMiddleware, cosine, topic_score, topic_vector
from tests.conftest import CrawlResult, run_crawl

# -- the score ------------------------------------------------------------------------


def test_topic_vector_weighs_earlier_words_more() -> None:
    assert topic_vector("vacuum autovacuum bloat") == pytest.approx(
        {"vacuum": 1.0, "autovacuum": 0.8, "bloat": 1 / 1.5}
    )
    # Stop words go, words are stemmed, a repeated word counts twice.
    assert topic_vector("the vacuuming of vacuum") == {"vacuum": 2.0}


def test_cosine() -> None:
    assert cosine({"a": 1.0}, {"a": 3.0}) == pytest.approx(1.0)
    assert cosine({"a": 1.0}, {"b": 1.0}) == 0.0
    assert cosine({}, {"a": 1.0}) == 0.0
    assert cosine({"a": 1.0, "b": 1.0}, {"a": 1.0}) == pytest.approx(1 / math.sqrt(2))


def test_score_by_hand() -> None:
    topic = topic_vector("vacuum bloat")  # vacuum 1, bloat 0.8
    norm = math.sqrt(1 + 0.8**2)
    # Title "Vacuum": B = 10 · 1 / norm.  Body "vacuum table table": C = 10 · 1 / (norm · √5).
    score = topic_score(topic, "Vacuum", "vacuum table table")
    b = 10 / norm
    c = 10 / (norm * math.sqrt(5))
    assert score == pytest.approx(4 * b + c)
    # The section weights are the server's.
    assert topic_score(topic, "Vacuum", "vacuum table table", {"title": 1}) == pytest.approx(b + c)


def test_score_extremes() -> None:
    topic = topic_vector("vacuum autovacuum bloat")
    assert topic_score(topic, "ECPG", "embedded SQL in C programs") == 0.0
    assert topic_score(topic, None, None) == 0.0
    # The most: both sections point exactly where the topic does (counts 15 : 12 : 10).
    text = " ".join(["vacuum"] * 15 + ["autovacuum"] * 12 + ["bloat"] * 10)
    assert topic_score(topic, text, text) == pytest.approx(50.0)
    assert 45 < topic_score(topic, "vacuum autovacuum bloat", "vacuum autovacuum bloat") < 50


def test_chinese_topic() -> None:
    topic = topic_vector("国际化 本地化")
    assert topic_score(topic, "第 8 章 国际化和本地化", "软件的国际化和本地化") > 2
    assert topic_score(topic, "第 5 章 网络设置", "网络接口的配置") == 0.0


# -- the middleware -------------------------------------------------------------------


class _Spider:
    def __init__(self, topic: str | None, threshold: float = 2.0) -> None:
        self.topic = topic
        self.topic_threshold = threshold
        self.seen: set[str] = set()

    def forget(self, url: str) -> None:
        self.seen.discard(url)


def _middleware(topic: str | None, **settings: Any) -> TopicMiddleware:
    crawler = get_crawler(settings_dict=settings)
    crawler.stats.open_spider()
    crawler.spider = _Spider(topic)  # type: ignore[assignment]
    return TopicMiddleware.from_crawler(crawler)


def _output(title: str, text: str, hops: int) -> tuple[HtmlResponse, list[Any]]:
    url = "http://example.org/page.html"
    response = HtmlResponse(url, body=b"<html></html>", request=Request(url, meta={"hops": hops}))
    item = PageItem(url=url, server="http://example.org/", status=200, title=title, text=text)
    item.weights = {"title": 4.0, "body": 1.0}
    links = [Request(f"http://example.org/{i}.html", meta={"hops": hops + 1}) for i in range(3)]
    return response, [*links, item]


def test_on_topic_page_is_kept_with_its_score() -> None:
    mw = _middleware("vacuum autovacuum bloat")
    response, output = _output("Routine Vacuuming", "autovacuum removes bloat", hops=1)
    out = list(mw.process_spider_output(response, output))
    assert out == output
    assert output[-1].topic_score > 2
    assert mw.stats.get_value("topic/kept") == 1


def test_the_gate_ships_its_analysis_with_the_page() -> None:
    # The page is analyzed once, here: the store's worker stores this analysis.
    mw = _middleware("vacuum autovacuum bloat")
    response, output = _output("Routine Vacuuming", "autovacuum removes bloat", hops=1)
    list(mw.process_spider_output(response, output))
    words = output[-1].words
    assert words is not None
    assert words["vacuum"].counts[:2] == [0, 1]  # in the title, not the body
    assert words["autovacuum"].weight == 1.0
    assert "exampl" in words  # the URL's words too: the page's whole analysis


def test_off_topic_page_and_its_links_are_dropped() -> None:
    mw = _middleware("vacuum autovacuum bloat")
    response, output = _output("ECPG", "embedded SQL in C", hops=1)
    seen = mw.crawler.spider.seen  # type: ignore[union-attr]
    seen.update(o.url for o in output if isinstance(o, Request))
    assert list(mw.process_spider_output(response, output)) == []
    # The spider forgets the dropped links: an on-topic page may lead to them later.
    assert not seen
    assert mw.stats.get_value("topic/dropped") == 1
    assert mw.stats.get_value("topic/requests_dropped") == 3


def test_off_topic_seed_is_dropped_but_its_links_followed() -> None:
    mw = _middleware("vacuum autovacuum bloat")
    response, output = _output("Table of contents", "chapters", hops=0)
    out = list(mw.process_spider_output(response, output))
    assert out == output[:3]
    assert mw.stats.get_value("topic/seeds_followed") == 1


def test_other_output_passes_through() -> None:
    mw = _middleware("vacuum")
    response, _ = _output("x", "y", hops=1)
    error = ErrorItem("http://example.org/", None, "parse", "bad")
    assert list(mw.process_spider_output(response, [error])) == [error]
    # Without a topic, nothing is scored.
    mw = _middleware(None)
    response, output = _output("ECPG", "embedded SQL in C", hops=1)
    assert list(mw.process_spider_output(response, output)) == output
    assert output[-1].topic_score is None


def test_async_output() -> None:
    mw = _middleware("vacuum autovacuum bloat")
    response, output = _output("ECPG", "embedded SQL in C", hops=2)

    async def agen() -> Any:
        for o in output:
            yield o

    async def collect() -> list[Any]:
        return [o async for o in mw.process_spider_output_async(response, agen())]

    assert asyncio.run(collect()) == []


def test_switched_off() -> None:
    with pytest.raises(NotConfigured):
        _middleware("vacuum", TOPIC_ENABLED=False)


# -- a crawl of the PostgreSQL docs ---------------------------------------------------

SITE = "postgresql-15-docs"


@pytest.fixture(scope="module")
def vacuum_crawl(
    corpus_root: Path, corpus_url: str, tmp_path_factory: pytest.TempPathFactory
) -> CrawlResult:
    # Seeds: the list of SQL commands (it links sql-vacuum.html), the list of client
    # applications (app-ecpg.html, app-vacuumdb.html …) and the ECPG chapter (ecpg-*.html).
    seeds = ",".join(
        f"{corpus_url}{SITE}/{page}"
        for page in ("sql-commands.html", "reference-client.html", "ecpg.html")
    )
    data = tmp_path_factory.mktemp("topic")
    result = run_crawl(
        data,
        "-a",
        f"seeds={seeds}",
        "-a",
        "topic=vacuum autovacuum bloat",
        settings={"LOG_LEVEL": "INFO"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_vacuum_pages_kept_ecpg_pages_dropped(vacuum_crawl: CrawlResult, corpus_url: str) -> None:
    base = f"{corpus_url}{SITE}/"
    scores = {
        r.url[len(base) :]: r.topic_score
        for r in vacuum_crawl.rows("SELECT url, topic_score FROM documents")
    }
    assert "sql-vacuum.html" in scores, sorted(scores)
    # Reached only through sql-vacuum.html: the kept page's links were followed.
    assert "routine-vacuuming.html" in scores, sorted(scores)
    assert scores["sql-vacuum.html"] > 20
    assert scores["routine-vacuuming.html"] > 10
    assert all(score > 2 for score in scores.values()), scores
    assert not [page for page in scores if "ecpg" in page]
    stats = vacuum_crawl.stats
    assert stats["topic/kept"] == len(scores)
    # The seeds (off topic) and the ECPG pages, the other SQL commands and client apps.
    assert stats["topic/dropped"] > 200
    assert stats["topic/seeds_followed"] == 3


def test_kept_pages_are_searchable(vacuum_crawl: CrawlResult) -> None:
    proc = vacuum_crawl.search("autovacuum", "-n", "3")
    assert proc.returncode == 0, proc.stderr
    assert "vacuum" in proc.stdout.lower()
