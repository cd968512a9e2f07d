"""The page store: every fetched page written to WARC files (opt-in).

Enable with ``PAGESTORE_ENABLED = True``.  Each 200 response of an HTML or text page is
written as a WARC ``response`` record (warcio, gzip per record) into
``PAGESTORE_DIR`` (default ``<data dir>/warc``), in files named
``spidersite-<start time>-<n>.warc.gz`` of at most ``PAGESTORE_MAX_BYTES`` (default 1 GiB).
The file and the record's offset travel with the page into ``documents.warc_file`` and
``documents.warc_offset``, so a page can be re-parsed or shown later without fetching it
again (``python -m search cached URL``, the web app's document page).

The body is stored as Scrapy handed it to the spider (decompressed), so the stored
``Content-Encoding`` header is dropped and ``Content-Length`` set to the stored body.

Stats: ``pagestore/records``, ``pagestore/bytes``, ``pagestore/files``.
"""

from __future__ import annotations

import io
import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured

from spidersite.crawlsettings import crawl_settings

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from warcio.warcwriter import WARCWriter

logger = logging.getLogger(__name__)

_TYPES = (b"text/html", b"application/xhtml+xml", b"text/plain")
_DROPPED = {b"content-encoding", b"transfer-encoding", b"content-length"}


class PageStore:
    def __init__(self, crawler: Crawler) -> None:
        config = crawl_settings(crawler)
        if not config.pagestore_enabled:
            raise NotConfigured  # off by default: no warning in every crawl's log
        self.stats = crawler.stats
        self.folder = config.pagestore_folder
        self.max_bytes = config.pagestore_max_bytes
        self.prefix = f"spidersite-{time.strftime('%Y%m%d%H%M%S')}"
        self.number = 0
        self.stream: Any = None
        self.writer: WARCWriter | None = None
        crawler.signals.connect(self.response_received, signal=signals.response_received)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PageStore:
        return cls(crawler)

    def _open(self) -> None:
        # warcio is imported by crawls that store pages only (PAGESTORE_ENABLED).
        from warcio.warcwriter import WARCWriter

        self.folder.mkdir(parents=True, exist_ok=True)
        self.number += 1
        path = self.folder / f"{self.prefix}-{self.number:05d}.warc.gz"
        self.stream = path.open("ab")
        self.path = str(path)
        self.writer = WARCWriter(self.stream, gzip=True)
        self.stats.inc_value("pagestore/files")

    def response_received(self, response: Response, request: Request, **kwargs: Any) -> None:
        from warcio.statusandheaders import StatusAndHeaders

        ctype = response.headers.get(b"Content-Type") or b""
        if response.status != 200 or not response.body or not ctype.lower().startswith(_TYPES):
            return
        if self.stream is None or self.stream.tell() >= self.max_bytes:
            if self.stream is not None:
                self.stream.close()
            self._open()
        assert self.writer is not None
        headers = [
            (k.decode("latin-1"), b", ".join(v).decode("latin-1"))
            for k, v in response.headers.items()
            if k.lower() not in _DROPPED
        ]
        headers.append(("Content-Length", str(len(response.body))))
        http_headers = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
        offset = self.stream.tell()
        record = self.writer.create_warc_record(
            response.url,
            "response",
            payload=io.BytesIO(response.body),
            http_headers=http_headers,
        )
        self.writer.write_record(record)
        self.stream.flush()
        request.meta["warc"] = (self.path, offset)
        self.stats.inc_value("pagestore/records")
        self.stats.inc_value("pagestore/bytes", self.stream.tell() - offset)

    def spider_closed(self) -> None:
        if self.stream is not None:
            self.stream.close()
            self.stream = None
