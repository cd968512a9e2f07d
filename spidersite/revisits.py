"""The answers to a re-crawl's re-visits: what a stored document's new fetch means.

A re-visit is a conditional request for a stored document (``meta["stored"]``, built by
:class:`spidersite.crawlrequests.RequestFactory`).  Its answer is

- 304: not modified, a :class:`~spidersite.items.RevisitItem` (stat
  ``recrawl/not_modified``);
- 404 or 410: gone, a :class:`~spidersite.items.GoneItem` (``recrawl/gone``);
- redirected to another canonical URL: moved, a ``GoneItem`` with ``moved_to``
  (``recrawl/moved``), and the page is then parsed as a new page of its own URL;
- else the page, parsed: with the checksum it had (a server that ignores conditional
  requests), a ``RevisitItem`` again (``recrawl/unchanged``), else changed
  (``recrawl/changed``).  A page that was not stored is new (``recrawl/new``).

On ``recrawl=reanalyze`` (``stored["reanalyze"]``: the re-visit was sent without its
conditional headers) a page with the checksum it had is analyzed and stored again all the
same, as a changed page is, in place (``recrawl/reanalyzed``); its next visit is planned
as an unchanged page's, so that analyzing it again leaves its change rate as it was.

A re-visit robots.txt now forbids is never sent: the spider's errback turns it into a
``GoneItem`` that keeps the stored status (``recrawl/forbidden``).

The interval until the next visit follows :func:`search.schedule.next_interval` with the
server's ``period``, ``min_period`` and ``max_period``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.http import Response

from search.schedule import next_interval
from spidersite.items import GoneItem, PageItem, RevisitItem

if TYPE_CHECKING:
    from spidersite.spiders.site import SiteSpider


def _interval(spider: SiteSpider, url: str, stored: dict[str, Any], changed: bool) -> int:
    server = spider.servers.ensure(url)
    return next_interval(
        stored.get("change_interval"), changed, server.period, server.min_period, server.max_period
    )


def _outcome(spider: SiteSpider, response: Response, stored: dict[str, Any]) -> Any:
    """The item for a re-visit that needs no parsing (304, gone, moved), else None."""
    stats = spider.crawler.stats
    canonical = spider.links.canonical
    original = stored_url = response.request.url if response.request else response.url
    if response.status == 304:
        stats.inc_value("recrawl/not_modified")
        interval = _interval(spider, response.url, stored, changed=False)
        return RevisitItem(stored_url, stored["id"], 200, interval)
    if response.status in (404, 410):
        stats.inc_value("recrawl/gone")
        return GoneItem(original, stored["id"], response.status)
    redirects = response.meta.get("redirect_urls") or []
    if redirects and canonical(response.url) != canonical(redirects[0]):
        stats.inc_value("recrawl/moved")
        return GoneItem(redirects[0], stored["id"], 301, moved_to=canonical(response.url))
    return None


def check_revisit(spider: SiteSpider, response: Response) -> tuple[Any, bool]:
    """For a re-visit: (the item to yield first, or None; whether nothing is left to
    parse).  A page that moved yields its GoneItem and is then parsed as new."""
    stored = response.meta.get("stored")
    if not stored:
        return None, False
    outcome = _outcome(spider, response, stored)
    if outcome is None:
        return None, False
    moved = isinstance(outcome, GoneItem) and outcome.moved_to is not None
    return outcome, not moved


def unchanged(
    spider: SiteSpider, response: Response, item: PageItem, stored: dict[str, Any] | None
) -> RevisitItem | None:
    """For a page parsed on a re-crawl (*stored*: its stored document, None for a new
    page): the RevisitItem of a page whose content did not change, else None, with the
    changed page's next interval set on *item* (and, on ``recrawl=reanalyze``, an
    unchanged page's: it is analyzed again, see the module's documentation)."""
    stats = spider.crawler.stats
    if not stored:
        if spider.recrawl:
            stats.inc_value("recrawl/new")
        return None
    changed = item.checksum != stored.get("checksum")
    interval = _interval(spider, response.url, stored, changed)
    if not changed and stored.get("reanalyze"):
        stats.inc_value("recrawl/reanalyzed")
        item.interval = interval
        return None
    if not changed:  # for servers that ignore conditional requests
        stats.inc_value("recrawl/unchanged")
        return RevisitItem(item.url, stored["id"], response.status, interval)
    stats.inc_value("recrawl/changed")
    item.interval = interval
    return None
