"""Decompress bodies once, and refuse a compressed body cut before its end.

:class:`DecompressionMiddleware` is Scrapy's ``HttpCompressionMiddleware`` (in its place,
590; Scrapy's own is switched off in ``spidersite/settings.py``) with each coding
decompressed by :func:`decompress`, which tells whether the stream reached its end.  Scrapy's
own decompression keeps whatever it could decompress of a gzip, deflate, brotli or zstd
stream that stops early (:func:`scrapy.utils.gz.gunzip` "returns as much data as
possible"), so a body the server cut short, with a ``Content-Length`` that matches what it
sent, became a complete-looking page of its first bytes.  Here such a stream (for gzip and
zstd, every member or frame that starts must end) raises
:class:`spidersite.errors.TruncatedBody`, a failure of kind ``reset`` like a body shorter
than its ``Content-Length``, and a network error of its server (``max_net_errors``,
counted through :func:`spidersite.middlewares.neterrors.count_net_error`: the net-error
middleware never sees what ``process_response`` raises).  Every coding of a body with
several (``Content-Encoding: gzip, br``) is checked as it is decompressed.  A cut body is
retried as a reset connection is (``RETRY_TIMES``, stat
``retry/reason_count/truncated compressed body``), then fails.

Everything else is Scrapy's, inherited: ``Accept-Encoding`` on requests, the decompressed
size bounded by ``DOWNLOAD_MAXSIZE`` (the request's ``download_maxsize``: a server's
``max_size``) as it is decompressed, so a decompression bomb is refused without being
inflated past the limit (Scrapy's warning; its ``IgnoreRequest`` becomes
:class:`spidersite.errors.DecompressedTooLarge`, a failure of kind ``too_large`` as a body
that comes bigger than its limit is), the warning past
``DOWNLOAD_WARNSIZE``, the response class chosen again for the decompressed body, and the
stats ``httpcompression/response_count`` and ``httpcompression/response_bytes``.  Bytes
that are not data of the declared coding at all (a bad checksum, garbage) are left to
Scrapy's own decoder, which then decides as it always did (gunzip keeps what it read
before a bad CRC).

Before 2026-12-07 the check was a middleware of its own that decompressed each compressed
body a second time (``benchmarks/decompression.py``: ~0.4 ms more a page of 270 kB).

Switched off with Scrapy's ``COMPRESSION_ENABLED = False`` (nothing is decompressed then).

Stats: ``compression/truncated``, and Scrapy's ``httpcompression/*``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.downloadermiddlewares.retry import get_retry_request
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils._compression import _DecompressionMaxSizeExceeded

from spidersite.errors import DecompressedTooLarge, TruncatedBody
from spidersite.middlewares.neterrors import count_net_error

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

#: Bytes decompressed at a time (Scrapy's step too).
_CHUNK = 65536


class _Cut(Exception):
    """The stream stops before its end."""


class _Output:
    """The decompressed chunks, their size bounded by *limit* (0: no bound)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.chunks: list[bytes] = []

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.limit and self.size > self.limit:
            raise _DecompressionMaxSizeExceeded(self.size, self.limit)
        self.chunks.append(chunk)

    def value(self) -> bytes:
        return b"".join(self.chunks)


def _zlib_stream(data: bytes, wbits: int, out: _Output) -> bytes:
    """Decompress the zlib-family stream at the start of *data* into *out*; the bytes
    after it.  :class:`_Cut` when it stops before its end."""
    inflater = zlib.decompressobj(wbits=wbits)
    out.add(inflater.decompress(data, _CHUNK))
    return _zlib_rest(inflater, out)


def _zlib_rest(inflater: Any, out: _Output) -> bytes:
    """The rest of *inflater*'s stream (its first chunk decompressed) into *out*; the
    bytes after it."""
    while inflater.unconsumed_tail and not inflater.eof:
        out.add(inflater.decompress(inflater.unconsumed_tail, _CHUNK))
    if not inflater.eof:
        raise _Cut
    return bytes(inflater.unused_data)


def _gunzip(body: bytes, out: _Output) -> None:
    """Every gzip member of *body* (gunzip reads them all, and ignores bytes after the
    last that start no member)."""
    data = _zlib_stream(body, 31, out)
    while data.startswith(b"\x1f\x8b"):
        data = _zlib_stream(data, 31, out)


def _inflate(body: bytes, out: _Output) -> None:
    """A zlib stream, or, as Scrapy falls back to it when the first chunk is not one, raw
    deflate."""
    inflater = zlib.decompressobj()
    try:
        first = inflater.decompress(body, _CHUNK)
    except zlib.error:
        inflater = zlib.decompressobj(wbits=-15)
        first = inflater.decompress(body, _CHUNK)
    out.add(first)
    _zlib_rest(inflater, out)


def _unbrotli(body: bytes, out: _Output) -> None:
    try:
        import brotli
    except ImportError:  # Scrapy's other choice
        import brotlicffi as brotli
    decompressor = brotli.Decompressor()
    out.add(decompressor.process(body, output_buffer_limit=_CHUNK))
    while not decompressor.is_finished():
        chunk = decompressor.process(b"", output_buffer_limit=_CHUNK)
        if not chunk:
            raise _Cut
        out.add(chunk)


def _unzstd(body: bytes, out: _Output) -> None:
    """Every zstd frame of *body*."""
    try:
        from compression import zstd  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        from backports import zstd  # type: ignore[import-not-found, no-redef, unused-ignore]
    data = body
    while data:
        decompressor = zstd.ZstdDecompressor()
        out.add(decompressor.decompress(data, max_length=_CHUNK))
        while not decompressor.eof and not decompressor.needs_input:
            out.add(decompressor.decompress(b"", max_length=_CHUNK))
        if not decompressor.eof:
            raise _Cut
        data = decompressor.unused_data


#: The codings decompressed here, by their ``Content-Encoding`` name (Scrapy's).
DECODERS: dict[bytes, Callable[[bytes, _Output], None]] = {
    b"gzip": _gunzip,
    b"x-gzip": _gunzip,
    b"deflate": _inflate,
    b"br": _unbrotli,
    b"zstd": _unzstd,
}


def decompress(coding: bytes, body: bytes, max_size: int = 0) -> bytes | None:
    """*body* decompressed from *coding*, once.  :class:`TruncatedBody` when its stream
    stops before its end; Scrapy's ``_DecompressionMaxSizeExceeded`` as soon as more than
    *max_size* bytes (0: no limit) come out; None when it cannot be told here (an unknown
    coding, an empty body, bytes that are not data of that coding)."""
    decoder = DECODERS.get(coding)
    if decoder is None or not body:
        return None
    out = _Output(max_size)
    try:
        decoder(body, out)
    except _Cut:
        raise TruncatedBody(
            f"{coding.decode('latin-1')} body cut before its end ({len(body)} bytes received, "
            f"{out.size} decompressed)"
        ) from None
    except _DecompressionMaxSizeExceeded:
        raise
    except Exception:  # not data of that coding (zlib.error, brotli's and zstd's errors)
        return None
    return out.value()


class DecompressionMiddleware(HttpCompressionMiddleware):
    """Scrapy's ``HttpCompressionMiddleware``, each coding decompressed once by
    :func:`decompress`, which refuses a stream cut before its end."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler=crawler)
        self.crawler = crawler
        self.retry_enabled = crawler.settings.getbool("RETRY_ENABLED")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DecompressionMiddleware:
        if not crawler.settings.getbool("COMPRESSION_ENABLED"):
            raise NotConfigured("COMPRESSION_ENABLED is off")
        return cls(crawler)

    def process_response(  # type: ignore[override]  # no spider argument (deprecated)
        self, request: Request, response: Response
    ) -> Request | Response:
        try:
            return super().process_response(request, response)
        except IgnoreRequest as exc:
            if isinstance(exc.__cause__, _DecompressionMaxSizeExceeded):
                # Scrapy's refusal (logged by Scrapy), as a failure of kind too_large.
                raise DecompressedTooLarge(str(exc)) from None
            raise
        except TruncatedBody:
            self.crawler.stats.inc_value("compression/truncated")
            # A network error of its server (max_net_errors), as a connection reset is,
            # and retried as one is (RetryMiddleware never sees what process_response
            # raises): RETRY_TIMES, or the request's max_retry_times, then the failure.
            count_net_error(self.crawler, request, "reset")
            spider = self.crawler.spider
            if self.retry_enabled and spider is not None:
                retry = get_retry_request(
                    request, spider=spider, reason="truncated compressed body"
                )
                if retry is not None:
                    return retry
            raise

    def _decode(self, body: bytes, encoding: bytes, max_size: int) -> bytes:  # type: ignore[override]
        decoded = decompress(encoding, body, max_size)
        if decoded is None:  # Scrapy's decoder decides, as it always did
            return HttpCompressionMiddleware._decode(body, encoding, max_size)
        return decoded
