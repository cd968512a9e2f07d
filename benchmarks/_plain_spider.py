"""The baseline of the crawl benchmark: a plain Scrapy ``CrawlSpider``, nothing else.

One ``Rule(LinkExtractor(...), callback="parse_item", follow=True)``; ``parse_item``
does nothing; no pipelines; ``CONCURRENT_REQUESTS=32``; robots.txt obeyed. Links are
followed only on the seeds' host and port (``127.0.0.1:PORT``) and below the seeds'
folders.

    python benchmarks/_plain_spider.py http://127.0.0.1:PORT/site/index.html [...]

The Scrapy log goes to stderr; the last line of stdout is a JSON object with the crawl's
stats (``start_time``, ``finish_time``, ``elapsed_time_seconds``,
``response_received_count``, ...).
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from scrapy.crawler import CrawlerProcess
from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

SETTINGS: dict[str, Any] = {
    "CONCURRENT_REQUESTS": 32,
    "ROBOTSTXT_OBEY": True,
    "LOG_LEVEL": "INFO",
    "TELNETCONSOLE_ENABLED": False,
}


def folder_prefix(url: str) -> str:
    """``http://host:port/site/index.html`` -> ``http://host:port/site/``."""
    return url.rsplit("/", 1)[0] + "/"


class PlainSpider(CrawlSpider):
    name = "plain"

    def __init__(self, seeds: list[str], **kwargs: Any) -> None:
        self.start_urls = list(seeds)
        self.rules = (
            Rule(
                LinkExtractor(
                    allow=[re.escape(folder_prefix(u)) for u in seeds],
                    # Scrapy compares allow_domains with the URL's netloc, port included:
                    # a bare "127.0.0.1" would match no link of http://127.0.0.1:PORT/.
                    allow_domains=sorted({urlsplit(u).netloc for u in seeds}),
                ),
                callback="parse_item",
                follow=True,
            ),
        )
        super().__init__(**kwargs)  # compiles self.rules

    def parse_item(self, response: Response) -> None:
        return None


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def main(argv: list[str]) -> int:
    seeds = argv[1:]
    if not seeds:
        print(__doc__, file=sys.stderr)
        return 2
    process = CrawlerProcess(settings=SETTINGS)
    crawler = process.create_crawler(PlainSpider)
    process.crawl(crawler, seeds=seeds)
    process.start()
    assert crawler.stats is not None
    stats = {key: _jsonable(value) for key, value in crawler.stats.get_stats().items()}
    print(json.dumps(stats, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
