"""What the site spider requests first: the start of a crawl, a resumed crawl, a re-crawl.

:func:`first_requests` is the spider's ``start``, in this order:

- on a re-crawl (``-a recrawl``) or a resumed crawl, every stored URL counts as seen: found
  as a link, it is not fetched again (a due one is re-visited from the database instead);
- with a shared frontier (:mod:`spidersite.scaleout`), only the process that pushes the
  seeds goes on; the others take their requests from the shared queue;
- the sitemaps of the crawl's servers are planned (and, on a re-crawl, of the servers of
  stored documents), before the first request, so that robots.txt's ``Sitemap:`` lines are
  read for those servers (:mod:`spidersite.sitemaps`);
- a crawl that was killed is resumed (``SITE_RESUME``, :func:`crawl_to_resume`): the
  links of stored pages that were never stored themselves are the frontier it had (the
  database knows what is done; stat ``resume/requests``), and its row in ``crawls``, if
  still unfinished, is closed (:func:`resumed_crawl`);
- the seeds, fetched as pages even when they look like files;
- the sitemaps' requests;
- on a re-crawl, conditional requests for the stored documents to re-visit (all of them,
  or only those due with ``recrawl=due``; with ``recrawl=reanalyze`` all of them, fetched
  whole to be analyzed again; stat ``recrawl/scheduled``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

from search.db import DatabaseError
from spidersite import storage

if TYPE_CHECKING:
    from spidersite.spiders.site import SiteSpider

logger = logging.getLogger(__name__)


def crawl_to_resume(crawler: Any, name: str, args: dict[str, Any]) -> int | None:
    """The id of the last crawl of spider *name* with the same *args* when it is to be
    resumed (it was killed, stopped, or stopped storing:
    :meth:`search.crawldb.CrawlDB.crawl_to_resume`), else None."""
    try:
        crawldb = storage.crawl_db(crawler, migrate=False)
    except DatabaseError:  # the store reports it when it opens
        return None
    return crawldb.crawl_to_resume(name, args)


def resumed_crawl(spider: SiteSpider) -> int | None:
    """The id of the crawl this process resumes, else None: the spider's
    :attr:`~spidersite.spiders.site.SiteSpider.resumes`, when this process seeds the crawl
    (with a shared frontier, only the one that pushes the seeds resumes; the others join
    it).  Its row is closed when this crawl's row is started (stat ``resume/crawl``)."""
    if spider.resumes is None:
        return None
    if not getattr(spider.crawler.engine.scheduler, "seeding", True):
        return None
    return spider.resumes


def first_requests(spider: SiteSpider) -> Iterator[Request]:
    """The first requests of *spider*'s crawl (see the module's documentation)."""
    seeding = getattr(spider.crawler.engine.scheduler, "seeding", True)
    resuming = resumed_crawl(spider) is not None
    if spider.recrawl or resuming:
        spider.links.mark_seen(storage.crawl_db(spider.crawler).stored_urls())
    if not seeding:
        return
    sitemaps = _sitemap_plan(spider)
    if resuming:
        yield from _resume_requests(spider)
    for url in spider.seed_urls:
        canon = spider.links.canonical(url)
        if spider.links.first_time(canon):
            yield spider.requests.page(canon, 0, file=False, dont_filter=True)
    yield from sitemaps
    if spider.recrawl:
        yield from _stored_requests(spider)


def _sitemap_plan(spider: SiteSpider) -> list[Request]:
    """The sitemaps to read first: those of the crawl's servers (and, on a re-crawl, of the
    servers of stored documents)."""
    if spider.sitemaps is None:
        return []
    servers = list(spider.servers)
    if spider.recrawl:
        stored = storage.crawl_db(spider.crawler).stored_servers()
        servers += [spider.servers.ensure(url) for url in stored]
    return spider.sitemaps.plan(servers)


def _resume_requests(spider: SiteSpider) -> Iterator[Request]:
    """Pick up a crawl that was killed: the links of stored pages that were never stored
    themselves are the frontier it had."""
    count = 0
    for row in storage.crawl_db(spider.crawler).frontier():
        url = row.to_url
        if not spider.links.first_time(url):
            continue
        server = spider.servers.get(url)
        if server is None or not server.allows(url):
            continue
        if row.hops + 1 > server.maxhops:
            continue
        count += 1
        yield spider.requests.page(url, row.hops + 1)
    spider.crawler.stats.set_value("resume/requests", count)
    logger.info(
        "Resuming an unfinished crawl: %d URLs left to fetch", count, extra={"spider": spider}
    )


def _stored_requests(spider: SiteSpider) -> Iterator[Request]:
    """Conditional requests for the stored documents to re-visit."""
    count = 0
    rows = storage.crawl_db(spider.crawler).revisits(
        due_only=spider.recrawl == "due", now=spider.recrawl_time
    )
    for row in rows:
        if not spider.servers.ensure(row.url).allows(row.url):
            continue
        count += 1
        yield spider.requests.revisit(row)
    spider.crawler.stats.set_value("recrawl/scheduled", count)
    logger.info(
        "Re-crawl (%s): %d stored documents to re-visit",
        spider.recrawl,
        count,
        extra={"spider": spider},
    )
