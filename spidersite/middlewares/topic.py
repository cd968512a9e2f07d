"""Spider middleware: a topic-focused crawl keeps only the pages about its topic.

    scrapy crawl site -a seeds=URL -a topic="vacuum autovacuum bloat" [-a topic_threshold=2]

Each fetched page is scored against the topic, as the design documents' topic crawler does::

    A = w_title · B + w_body · C          (server weights; 4 · B + C by default)
    B = 10 · cos(topic, title)            C = 10 · cos(topic, body)

``cos`` is the vector-space (cosine) similarity of two stem vectors built by the analyzer
of :mod:`search.analysis` (tokenize, segment CJK, lowercase, drop stop words, stem): a
page section's vector holds each stem's count, the topic's vector each stem's query weight
(:func:`search.ranking.query_weights` with a decay of :data:`TOPIC_DECAY`: the first topic
word weighs 1, the second 0.8 …).  A cosine lies in [0, 1]; B and C are on a 0–10 scale, A
on 0–50 with the default weights.  A page whose A is at most the threshold (default 2) is
not stored and its links are not followed; a kept page stores A in ``documents.topic_score``.

What 2 means, measured on the PostgreSQL 15 docs (1,169 pages) with the topic
"vacuum autovacuum bloat": ``sql-vacuum.html`` scores 32.0 (title "VACUUM": B = 6.9),
``routine-vacuuming.html`` 18.3, ``runtime-config-autovacuum.html`` 16.2; the next pages,
which mention vacuuming in passing (``progress-reporting.html``, ``app-vacuumdb.html``,
``maintenance.html``), score 1.2–1.6; 99 % of the pages score below 0.7 and the ``ecpg``
pages 0.  A title that contains a topic word (B ≥ 0.5 or so) is enough to keep a page; with
the body alone, about a fifth of the body's vector must point at the topic (C > 2).

Seeds are never cut off: the links of a page at ``TOPIC_FOLLOW_HOPS`` hops or fewer
(default 0, the seeds) are followed even when the page itself scores too low to be stored,
so a crawl can start from a table of contents.  Files (``kind="file"``) have no words and are
kept unscored; revisits, gone pages and errors pass through.  A link of a dropped page is
forgotten by the spider's seen-URL set, so an on-topic page that links to it later gets it
fetched.

Priority 950 in ``SPIDER_MIDDLEWARES``: output runs from high numbers to low, so the topic
gate sees the spider's output first and a dropped page's requests never reach the hops
filter (900) or the scheduler.

The gate decides on the reactor thread, before the page's requests reach the scheduler, so
it analyzes the page (all its sections, with the server's weights) there; the analysis goes
on with the item (``PageItem.words``), and the store's worker does not analyze it again.

Switch off with ``TOPIC_ENABLED = False``; without ``-a topic`` it does nothing.

Stats: ``topic/kept``, ``topic/dropped``, ``topic/requests_dropped``,
``topic/seeds_followed`` (seeds scored too low whose links were followed anyway).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import NotConfigured

from search.analysis import (
    DEFAULT_WEIGHTS,
    SECTIONS,
    WordRecord,
    analyze_document,
    get_analyzer,
    page_sections,
)
from search.crawlargs import DEFAULT_TOPIC_THRESHOLD
from search.ranking import query_weights
from spidersite.crawlsettings import crawl_settings
from spidersite.items import PageItem

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: B and C are cosines scaled from [0, 1] to [0, 10].
SCALE = 10.0

_TITLE = SECTIONS.index("title")
_BODY = SECTIONS.index("body")
#: How much less later topic words weigh (a topic is a few keywords, the first the main one).
TOPIC_DECAY = 0.25


def topic_vector(topic: str, language: str | None = None) -> dict[str, float]:
    """The topic's stems with their query weights (earlier words weigh more)."""
    return query_weights(
        [t.stem for t in get_analyzer(language).tokens(topic)], TOPIC_DECAY, decay_words=0
    )


def cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Cosine similarity of two sparse vectors (0 when either is empty)."""
    if len(a) > len(b):
        a, b = b, a
    dot = sum(w * b.get(t, 0.0) for t, w in a.items())
    if dot <= 0:
        return 0.0
    norm = math.sqrt(sum(w * w for w in a.values())) * math.sqrt(sum(w * w for w in b.values()))
    return dot / norm


def score_records(
    topic: Mapping[str, float],
    records: Mapping[str, WordRecord],
    weights: Mapping[str, float] | None = None,
) -> float:
    """A = w_title · B + w_body · C of a page's analysis (its title and body counts)."""
    title_vec = {s: float(r.counts[_TITLE]) for s, r in records.items() if r.counts[_TITLE]}
    body_vec = {s: float(r.counts[_BODY]) for s, r in records.items() if r.counts[_BODY]}
    w = {**DEFAULT_WEIGHTS, **(weights or {})}
    b = SCALE * cosine(topic, title_vec)
    c = SCALE * cosine(topic, body_vec)
    return float(w["title"]) * b + float(w["body"]) * c


def topic_score(
    topic: Mapping[str, float],
    title: str | None,
    body: str | None,
    weights: Mapping[str, float] | None = None,
    language: str | None = None,
    max_words: int | None = None,
) -> float:
    """A = w_title · B + w_body · C, with B, C = 10 · cos(topic, title / body)."""
    records = analyze_document(
        {"title": title or "", "body": body or ""}, language=language, max_words=max_words
    )
    return score_records(topic, records, weights)


class TopicMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        config = crawl_settings(crawler)
        if not config.topic_enabled:
            raise NotConfigured("TOPIC_ENABLED is off")
        self.crawler = crawler
        self.stats = crawler.stats
        self.follow_hops = config.topic_follow_hops
        self.max_words = config.analyze_max_words
        #: Ship each page's analysis with its item, so the worker does not analyze it again.
        self.ship_analysis = config.analyze_enabled
        #: language -> topic vector (pages of other languages stem differently)
        self._vectors: dict[str | None, dict[str, float]] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> TopicMiddleware:
        return cls(crawler)

    def _topic(self) -> tuple[str | None, float]:
        spider = self.crawler.spider
        threshold = getattr(spider, "topic_threshold", DEFAULT_TOPIC_THRESHOLD)
        return getattr(spider, "topic", None), float(threshold)

    def _vector(self, topic: str, language: str | None) -> dict[str, float]:
        vector = self._vectors.get(language)
        if vector is None:
            vector = self._vectors[language] = topic_vector(topic, language)
        return vector

    def _forget(self, url: str) -> None:
        """Let the spider request *url* again when an on-topic page links to it: the
        spider marks a link seen when it makes the request, before this gate drops it."""
        spider = self.crawler.spider
        forget = getattr(spider, "forget", None)
        if callable(forget):
            forget(url)

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterator[Any]:
        topic, threshold = self._topic()
        if not topic:
            yield from result
            return
        yield from self._filter(response, list(result), topic, threshold)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        topic, threshold = self._topic()
        if not topic:
            async for o in result:
                yield o
            return
        buffered = [o async for o in result]
        for o in self._filter(response, buffered, topic, threshold):
            yield o

    def _filter(
        self, response: Response, output: list[Any], topic: str, threshold: float
    ) -> Iterator[Any]:
        pages = [o for o in output if isinstance(o, PageItem) and o.kind == "page"]
        if not pages:
            yield from output
            return
        keep = False
        for item in pages:
            # The gate must decide here, before the page's requests are scheduled; the
            # page's whole analysis goes on with the item (analyzed once).
            records = analyze_document(
                page_sections(item.url, item.title, item.text, item.description, item.keywords),
                item.weights,
                item.language,
                self.max_words,
            )
            score = score_records(self._vector(topic, item.language), records, item.weights)
            item.topic_score = round(score, 4)
            if self.ship_analysis:
                item.words = records
            keep = keep or score > threshold
        hops = response.meta.get("hops", 0)
        if keep:
            self.stats.inc_value("topic/kept", len(pages))
            yield from output
            return
        self.stats.inc_value("topic/dropped", len(pages))
        follow = hops <= self.follow_hops
        logger.debug(
            "Off topic (A = %.2f ≤ %.2f): %s%s",
            max(p.topic_score or 0.0 for p in pages),
            threshold,
            response.url,
            "; its links are followed (seed)" if follow else "",
            extra={"spider": self.crawler.spider},
        )
        if follow:
            self.stats.inc_value("topic/seeds_followed")
        for o in output:
            if isinstance(o, PageItem) and o.kind == "page":
                continue
            if isinstance(o, Request) and not follow:
                self.stats.inc_value("topic/requests_dropped")
                self._forget(o.url)
                continue
            yield o
