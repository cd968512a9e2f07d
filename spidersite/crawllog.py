"""Record a failure in the crawl log from any component (middlewares have no items)."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def record_error(crawler: Any, url: str, server: str | None, kind: str, message: str) -> None:
    """Add a row to ``crawl_errors`` (through the store pipeline) and a line to the log."""
    from spidersite.pipelines import StorePipeline

    logger.warning("%s: %s (%s)", kind, url, message, extra={"spider": crawler.spider})
    store = crawler.get_item_pipeline(StorePipeline)
    if store is not None:
        store.add_error(url, server, kind, message)
