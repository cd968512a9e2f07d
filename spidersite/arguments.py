"""The ``site`` spider's arguments: parsed and checked before the crawl starts.

    scrapy crawl site -a seeds=URL[,URL...] -a seeds_file=PATH -a sites=FILE
                      -a topic=WORDS -a topic_threshold=N -a recrawl=due|all|reanalyze
                      -a crawl_key=NAME

:func:`check_arguments` is what our ``crawl`` command calls: it checks the settings
(:class:`~spidersite.crawlsettings.CrawlSettings`), the arguments, the shared frontier's
Redis, the browser of ``render_js`` servers and the database (a
:class:`~search.servers.ConfigError` becomes one clear usage error, exit status 2, before
anything is written);
:func:`build_registry` gives the spider its servers and seeds.  The values the web admin
checks too (re-crawl modes, topic threshold) are parsed by :mod:`search.crawlargs`.
"""

from __future__ import annotations

import logging
from typing import Any

from search import db
from search.crawlargs import (
    DEFAULT_TOPIC_THRESHOLD,
    RECRAWL_MODES,
    parse_recrawl,
    parse_threshold,
)
from search.servers import ConfigError
from search.sitesfile import ServerRegistry, parse_seeds, read_seeds_file
from spidersite import render, scaleout
from spidersite.crawlsettings import CrawlSettings
from spidersite.librarysettings import check_library_settings

__all__ = [
    "DEFAULT_TOPIC_THRESHOLD",
    "KNOWN_ARGUMENTS",
    "RECRAWL_MODES",
    "build_registry",
    "check_arguments",
    "parse_recrawl",
    "parse_threshold",
]

logger = logging.getLogger(__name__)

#: The arguments the site spider takes (Scrapyd adds its job id as ``_job``).
KNOWN_ARGUMENTS = frozenset(
    {"seeds", "seeds_file", "sites", "topic", "topic_threshold", "recrawl", "crawl_key"}
)


def build_registry(
    settings: CrawlSettings,
    seeds: str | None = None,
    seeds_file: str | None = None,
    sites: str | None = None,
    require_seeds: bool = True,
) -> tuple[ServerRegistry, list[str]]:
    """Servers and seed URLs of a crawl, validated; raise ConfigError listing every problem.

    A re-crawl (*require_seeds* false) may have no seed: it starts from stored documents.
    """
    registry = ServerRegistry(settings.server_defaults, source="SERVER_DEFAULTS")
    sites = sites or settings.sites_file
    if sites:
        registry.load_file(sites)
    raw: list[str] = []
    if seeds is not None:
        raw.extend(str(seeds).split(","))
    if seeds_file:
        raw.extend(read_seeds_file(seeds_file))
    good, bad = parse_seeds(s.strip() for s in raw)
    for server in registry:
        good.extend(server.seeds or [server.url])
    if bad and not good:
        raise ConfigError("\n".join([*bad, "no valid seed URL: the crawl cannot start"]))
    if not good and require_seeds:
        raise ConfigError(
            "no seed URL: give -a seeds=URL[,URL...], -a seeds_file=PATH "
            "or a sites file with [[server]] tables"
        )
    for line in bad:
        logger.error("%s (skipped)", line)
    for url in good:
        registry.ensure(url)
    # Seeds first seen in the sites file come after the explicit ones; keep order, no repeats.
    return registry, list(dict.fromkeys(good))


def check_arguments(settings: Any, spargs: dict[str, Any]) -> None:
    """Validate the crawl's settings and the spider's arguments before Scrapy starts, and
    that the database can be opened (writing nothing); raise ConfigError."""
    config = CrawlSettings.from_settings(settings)
    unknown = sorted(set(spargs) - KNOWN_ARGUMENTS - {"_job"})
    if unknown:
        raise ConfigError(
            f"unknown spider argument(s): {', '.join(unknown)} "
            f"(the site spider takes: {', '.join(sorted(KNOWN_ARGUMENTS))})"
        )
    recrawl = parse_recrawl(spargs.get("recrawl"))
    registry, _ = build_registry(
        config,
        spargs.get("seeds"),
        spargs.get("seeds_file"),
        spargs.get("sites"),
        require_seeds=recrawl is None,
    )
    parse_threshold(spargs.get("topic_threshold"))
    if "topic" in spargs and not str(spargs["topic"]).strip():
        raise ConfigError('topic: give one or more words (-a topic="vacuum autovacuum")')
    scaleout.check_settings(config, spargs.get("crawl_key"))
    # Scrapy's settings, and scrapy-playwright's when pages are rendered (before the
    # browser's are read below).
    check_library_settings(settings, config.render_enabled and render.renders(registry))
    render.check_settings(settings, config, registry)
    if config.store_enabled:
        try:
            db.probe(config.store_database_url)
        except db.DatabaseError as exc:
            raise ConfigError(str(exc)) from None
