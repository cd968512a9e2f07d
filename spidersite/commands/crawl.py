"""``scrapy crawl``, with the settings and the spider's arguments validated before Scrapy
starts, and the crawl's writer locks taken.

A spider class with a ``check_arguments(settings, spargs)`` class method gets it called;
then :func:`spidersite.storage.lock_writers` locks the index and the SQLite file the crawl
writes (a second crawl on the same data folder is refused).  A
:class:`~search.servers.ConfigError` becomes a usage error: the problems, one per line, and
exit status 2, with no traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError

from search.crawldb import STORE_FAILED
from search.servers import ConfigError
from spidersite import storage
from spidersite.crawlsettings import CrawlSettings

if TYPE_CHECKING:
    import argparse


#: Finish reasons that mean the crawl could not do its work: exit status 1.  A crawl that
#: stopped because pages it fetched could not be stored (``store_failed``) is one: the same
#: command resumes it.
FATAL_REASONS = frozenset({"database_unusable", "index_unusable", STORE_FAILED})
#: Stats that mean the crawl could not do its work, whatever Scrapy's finish reason: a
#: batch not stored, the worker dead, the crawl's end not recorded in ``crawls`` (the
#: database failed as it closed: its row says it never finished, and the same command
#: resumes it).  Exit status 1.
FATAL_STATS = ("store/error", "store/worker_error", "store/unrecorded")
#: The exit status of a crawl that stored its pages but could not make them all searchable
#: (the indexer failed: ``index/error``); ``python -m search reindex --new`` indexes them.
EXIT_UNSEARCHABLE = 3


def exit_status(stats: Mapping[str, Any]) -> int:
    """The exit status of a crawl that ran, from its final stats: 1 when it could not do
    its work (:data:`FATAL_REASONS`, or :data:`FATAL_STATS`: a batch or the worker failed,
    or its end could not be recorded, whatever Scrapy's reason), :data:`EXIT_UNSEARCHABLE`
    when its pages are stored and not all searchable, else 0."""
    if stats.get("finish_reason") in FATAL_REASONS or any(stats.get(k) for k in FATAL_STATS):
        return 1
    if stats.get("index/error"):
        return EXIT_UNSEARCHABLE
    return 0


class Command(ScrapyCrawlCommand):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1 or self.crawler_process is None:
            super().run(args, opts)
            return
        try:
            spidercls = self.crawler_process.spider_loader.load(args[0])
        except KeyError:
            raise UsageError(
                f"no spider named {args[0]!r} (try: scrapy list)", print_help=False
            ) from None
        check = getattr(spidercls, "check_arguments", None)
        assert self.settings is not None
        try:
            if check is not None:
                check(self.settings, opts.spargs)
            storage.lock_writers(CrawlSettings.from_settings(self.settings))
        except ConfigError as exc:
            raise UsageError(str(exc), print_help=False) from None
        crawler = self._create_crawler(args[0])
        self.crawler_process.crawl(crawler, **opts.spargs)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
        self.exitcode = self.exitcode or exit_status(crawler.stats.get_stats())
