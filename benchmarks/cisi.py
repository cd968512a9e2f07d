"""Search quality on CISI through the whole product: crawl the CISI site, then evaluate.

    python benchmarks/cisi.py [--eval DIR] [--keep] [--per-query] [--no-expand]

``../shared/eval/cisi-site.tar.gz`` is unpacked into a temporary folder and served on
127.0.0.1 (Python's ``http.server``, HTTP/1.1 keep-alive, Nagle off); ``scrapy crawl site``
crawls it into a temporary data folder; ``python -m search eval`` ranks the 76 judged queries
and prints MAP (top 1000), nDCG@10 and P@10.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class _Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Without this, small writes wait for delayed ACKs and the crawl is 10x slower.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


def crawl_site(site: Path, data: Path, start: str = "index.html") -> tuple[int, float]:
    """Serve the folder *site* on 127.0.0.1 and crawl it from *start* into the data folder
    *data* with ``scrapy crawl site``: (the crawl's exit status, its seconds)."""
    handler = functools.partial(_Handler, directory=str(site))
    server = _Server(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{start}"
    env_args = ["-s", f"SPIDERSITE_DATA_DIR={data}", "-s", "LOG_LEVEL=WARNING"]
    started = time.perf_counter()
    try:
        crawl = subprocess.run(
            [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"seeds={url}", *env_args],
            cwd=ROOT,
        )
    finally:
        server.shutdown()
    return crawl.returncode, time.perf_counter() - started


def eval_command(data: Path, eval_dir: Path) -> list[str]:
    """``python -m search eval`` of CISI's judged queries on the data folder *data*."""
    return [
        sys.executable,
        "-m",
        "search",
        "eval",
        "--data-dir",
        str(data),
        "--queries",
        str(eval_dir / "cisi-queries.tsv"),
        "--qrels",
        str(eval_dir / "cisi-qrels.txt"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval", default=str(ROOT.parent / "shared" / "eval"), metavar="DIR")
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    parser.add_argument("--per-query", action="store_true")
    parser.add_argument("--no-expand", action="store_true")
    args = parser.parse_args()
    eval_dir = Path(args.eval)
    work = Path(tempfile.mkdtemp(prefix="cisi-"))
    with tarfile.open(eval_dir / "cisi-site.tar.gz") as tar:
        tar.extractall(work / "site", filter="data")
    data = work / "data"
    code, crawled = crawl_site(work / "site" / "cisi", data)
    if code:
        print(f"the crawl failed (exit status {code})", file=sys.stderr)
        return 1
    print(f"crawl: {crawled:.1f} s ({data})")
    cmd = eval_command(data, eval_dir)
    if args.per_query:
        cmd.append("--per-query")
    if args.no_expand:
        cmd.append("--no-expand")
    started = time.perf_counter()
    code = subprocess.run(cmd, cwd=ROOT).returncode
    print(f"eval: {time.perf_counter() - started:.1f} s")
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
