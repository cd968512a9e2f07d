"""Where a crawl's database and index are, from its Scrapy settings (one place for all
components: spider, pipelines, extensions)."""

from __future__ import annotations

from typing import Any

from search import config


def data_dir(settings: Any) -> str:
    return str(config.data_dir(settings.get("SPIDERSITE_DATA_DIR")))


def database_url(settings: Any) -> str:
    return config.database_url(settings.get("STORE_DATABASE_URL"), data_dir(settings))


def index_dir(settings: Any) -> str:
    return str(config.index_dir(settings.get("INDEX_DIR"), data_dir(settings)))
