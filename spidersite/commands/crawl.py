"""``scrapy crawl``, with the settings and the spider's arguments validated before Scrapy
starts, and the crawl's writer locks taken.

A spider class with a ``check_arguments(settings, spargs)`` class method gets it called;
then :func:`spidersite.storage.lock_writers` locks the index and the SQLite file the crawl
writes (a second crawl on the same data folder is refused).  A
:class:`~search.servers.ConfigError` becomes a usage error: the problems, one per line, and
exit status 2, with no traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError

from search.servers import ConfigError
from spidersite import storage
from spidersite.crawlsettings import CrawlSettings

if TYPE_CHECKING:
    import argparse


#: Finish reasons that mean the crawl could not do its work: exit status 1.
FATAL_REASONS = frozenset({"database_unusable", "index_unusable"})


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
        if crawler.stats.get_value("finish_reason") in FATAL_REASONS:
            self.exitcode = 1
