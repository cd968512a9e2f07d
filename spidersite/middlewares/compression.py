"""Refuse a compressed body cut before its end.

Scrapy's ``HttpCompressionMiddleware`` keeps whatever it could decompress of a gzip,
deflate, brotli or zstd stream that stops early (:func:`scrapy.utils.gz.gunzip` "returns as
much data as possible"), so a body the server cut short, with a ``Content-Length`` that
matches what it sent, became a complete-looking page of its first bytes.  This middleware
sees the body before it is decompressed and decompresses it once more, keeping nothing,
to check that the stream reaches its end (for gzip and zstd, every member or frame that
starts); one that does not raises :class:`spidersite.errors.TruncatedBody`, a failure of
kind ``reset``, like a body shorter than its ``Content-Length``, and a network error of
its server (``max_net_errors``).  Only the outermost coding
of a body with several (``Content-Encoding: gzip, br``) is checked.

It decompresses no more than ``DOWNLOAD_MAXSIZE`` bytes (the request's
``download_maxsize``): past them, ``HttpCompressionMiddleware`` refuses the body itself.
A stream that is not valid data at all is left to it too.  The cost is a second
decompression of each compressed page (zlib inflates ~300 MB/s on one core).

Priority 595 in ``DOWNLOADER_MIDDLEWARES``: ``process_response`` runs from high numbers to
low, so it sees the body before ``HttpCompressionMiddleware`` (590) decompresses it.

Switched off with Scrapy's ``COMPRESSION_ENABLED = False`` (nothing is decompressed then).

Stats: ``compression/truncated``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from spidersite.errors import TruncatedBody
from spidersite.middlewares.neterrors import count_net_error

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

#: Bytes decompressed at a time.
_CHUNK = 65536


class _TooLarge(Exception):
    """More than the allowed bytes came out: the size limit's business, not ours."""


def _count(chunk: bytes, total: int, limit: int) -> int:
    total += len(chunk)
    if limit and total > limit:
        raise _TooLarge
    return total


def _zlib_ends(data: bytes, wbits: int, limit: int, total: int = 0) -> tuple[bool, bytes, int]:
    """(whether the zlib-family stream at the start of *data* ends, the bytes after it,
    bytes decompressed so far)."""
    inflater = zlib.decompressobj(wbits=wbits)
    total = _count(inflater.decompress(data, _CHUNK), total, limit)
    while inflater.unconsumed_tail and not inflater.eof:
        total = _count(inflater.decompress(inflater.unconsumed_tail, _CHUNK), total, limit)
    return inflater.eof, inflater.unused_data, total


def gzip_ends(body: bytes, limit: int) -> bool:
    """Whether every gzip member that starts in *body* ends (gunzip reads them all, and
    ignores what follows the last one)."""
    data, total = body, 0
    while True:
        ended, data, total = _zlib_ends(data, 31, limit, total)
        if not ended:
            return False
        if not data.startswith(b"\x1f\x8b"):
            return True


def deflate_ends(body: bytes, limit: int) -> bool:
    """Whether the zlib stream (or, as Scrapy falls back to it, raw deflate) ends."""
    try:
        zlib.decompressobj().decompress(body[:_CHUNK], 1)
    except zlib.error:
        return _zlib_ends(body, -15, limit)[0]
    return _zlib_ends(body, 15, limit)[0]


def brotli_ends(body: bytes, limit: int) -> bool:
    try:
        import brotli
    except ImportError:  # Scrapy's other choice
        import brotlicffi as brotli
    decompressor = brotli.Decompressor()
    total = _count(decompressor.process(body, output_buffer_limit=_CHUNK), 0, limit)
    while not decompressor.is_finished():
        chunk = decompressor.process(b"", output_buffer_limit=_CHUNK)
        if not chunk:
            break
        total = _count(chunk, total, limit)
    return bool(decompressor.is_finished())


def zstd_ends(body: bytes, limit: int) -> bool:
    """Whether every zstd frame that starts in *body* ends."""
    try:
        from compression import zstd  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        from backports import zstd  # type: ignore[import-not-found, no-redef, unused-ignore]
    data, total = body, 0
    while data:
        decompressor = zstd.ZstdDecompressor()
        total = _count(decompressor.decompress(data, max_length=_CHUNK), total, limit)
        while not decompressor.eof and not decompressor.needs_input:
            total = _count(decompressor.decompress(b"", max_length=_CHUNK), total, limit)
        if not decompressor.eof:
            return False
        data = decompressor.unused_data
    return True


#: The codings checked, by their ``Content-Encoding`` name.
CHECKS: dict[bytes, Callable[[bytes, int], bool]] = {
    b"gzip": gzip_ends,
    b"x-gzip": gzip_ends,
    b"deflate": deflate_ends,
    b"br": brotli_ends,
    b"zstd": zstd_ends,
}


def stream_ends(coding: bytes, body: bytes, limit: int = 0) -> bool | None:
    """Whether the *coding* stream *body* reaches its end; None when it cannot be told:
    an unknown coding, data that is not of that coding, or more than *limit* bytes
    (0: no limit) decompressed."""
    check = CHECKS.get(coding)
    if check is None:
        return None
    try:
        return check(body, limit)
    except _TooLarge:
        return None
    except Exception:  # not data of that coding (zlib.error, brotli's and zstd's errors)
        return None


class CompressedBodyMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("COMPRESSION_ENABLED"):
            raise NotConfigured("COMPRESSION_ENABLED is off")
        self.crawler = crawler
        self.stats = crawler.stats
        self.max_size = crawler.settings.getint("DOWNLOAD_MAXSIZE")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CompressedBodyMiddleware:
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        if request.method == "HEAD" or not response.body:
            return response
        codings = [
            coding.strip().lower()
            for value in response.headers.getlist(b"Content-Encoding")
            for coding in value.split(b",")
        ]
        if not codings:
            return response
        limit: Any = request.meta.get("download_maxsize", self.max_size)
        if stream_ends(codings[-1], response.body, int(limit or 0)) is not False:
            return response
        self.stats.inc_value("compression/truncated")
        # A network error of its server (max_net_errors), as a connection reset is: the
        # net-error middleware never sees what process_response raises.
        count_net_error(self.crawler, request, "reset")
        coding = codings[-1].decode("latin-1")
        raise TruncatedBody(
            f"{coding} body cut before its end ({len(response.body)} bytes received)"
        )
