"""Decompressing a crawl's compressed pages: CPU time a page through the downloader
middlewares that decompress it.

    python benchmarks/decompression.py                    # the project's, and Scrapy's alone
    python benchmarks/decompression.py --repeat 9 --min-kb 150 --max-kb 800

The pages are the Python documentation's of ``../shared/corpus`` between ``--min-kb`` and
``--max-kb`` (a few hundred kB each: the pages where decompression costs most), each
compressed as a server would send it: gzip (level 6), deflate (zlib, level 6), brotli
(quality 5) and zstd (level 3).  Each chain of middlewares gets every page's response in
turn, as Scrapy hands it on (``process_response`` from the highest priority down); CPU time
(``time.process_time``) a page is the median of ``--repeat`` passes.

Chains: ``scrapy`` is Scrapy's ``HttpCompressionMiddleware`` alone (one decompression, no
check that the stream ends); ``project`` is the project's own, the compression middlewares
``spidersite/settings.py`` enables, in their order.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import tarfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scrapy import Request
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.http import Response
from scrapy.utils.misc import load_object
from scrapy.utils.test import get_crawler

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("SPIDERSITE_CORPUS", ROOT.parent / "shared" / "corpus"))


def pages(min_kb: int, max_kb: int) -> list[bytes]:
    with tarfile.open(CORPUS / "python-3.11-docs.tar.gz") as tar:
        found = []
        for member in tar:
            wanted = min_kb * 1000 <= member.size <= max_kb * 1000
            if member.isfile() and member.name.endswith(".html") and wanted:
                f = tar.extractfile(member)
                if f is not None:
                    found.append(f.read())
    return found


def compressors() -> dict[str, Callable[[bytes], bytes]]:
    import brotli

    try:
        from compression import zstd  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        from backports import zstd  # type: ignore[import-not-found, no-redef, unused-ignore]
    return {
        "gzip": lambda b: gzip.compress(b, 6),
        "deflate": lambda b: zlib.compress(b, 6),
        "br": lambda b: brotli.compress(b, quality=5),
        "zstd": lambda b: zstd.compress(b, 3),
    }


def project_chain(crawler: Any) -> list[Any]:
    """The project's compression middlewares, in the order process_response runs them."""
    from spidersite import settings

    names = {
        **settings.DOWNLOADER_MIDDLEWARES_BASE,
        **settings.DOWNLOADER_MIDDLEWARES,
    }
    chosen = [
        (order, path)
        for path, order in names.items()
        if order is not None and "ompress" in path.rsplit(".", 1)[-1]
    ]
    return [load_object(path).from_crawler(crawler) for _, path in sorted(chosen, reverse=True)]


def run(chain: list[Any], responses: list[tuple[Request, Response]]) -> float:
    """CPU seconds of one pass of every response through *chain*."""
    start = time.process_time()
    for request, response in responses:
        for mw in chain:
            response = mw.process_response(request, response)
        assert b"<html" in response.body[:2000].lower()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--min-kb", type=int, default=150)
    parser.add_argument("--max-kb", type=int, default=800)
    args = parser.parse_args()
    bodies = pages(args.min_kb, args.max_kb)
    total = sum(map(len, bodies))
    print(f"{len(bodies)} pages, {total / len(bodies) / 1000:.0f} kB a page on average")
    crawler = get_crawler(settings_dict={"DOWNLOAD_MAXSIZE": 32 * 1024 * 1024})
    crawler.stats.open_spider()
    chains = {
        "scrapy": [HttpCompressionMiddleware.from_crawler(crawler)],
        "project": project_chain(crawler),
    }
    print("project chain:", " -> ".join(type(mw).__name__ for mw in chains["project"]))
    print(f"{'coding':8} {'kB sent':>8} " + " ".join(f"{n + ' ms':>12}" for n in chains))
    for coding, compress in compressors().items():
        streams = [compress(body) for body in bodies]
        headers = {"Content-Type": "text/html", "Content-Encoding": coding}
        figures = []
        for chain in chains.values():
            times = []
            for _ in range(args.repeat):
                responses = []
                for i, stream in enumerate(streams):
                    request = Request(f"http://example.org/{i}.html")
                    responses.append((request, Response(request.url, body=stream, headers=headers)))
                times.append(run(chain, responses))
            figures.append(statistics.median(times) / len(streams) * 1000)
        sent = sum(map(len, streams)) / len(streams) / 1000
        print(f"{coding:8} {sent:8.0f} " + " ".join(f"{f:12.2f}" for f in figures))


if __name__ == "__main__":
    main()
