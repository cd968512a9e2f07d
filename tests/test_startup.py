"""What a crawl's processes load at start-up: only what they use (every crawl pays for
each import, a few tenths of a second each, before it fetches anything)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, Site, _env, count_documents, crawl_command

#: Packages the crawler process does not use on an ordinary crawl: Scrapy's telnet console
#: (Twisted's conch) and remote control (aiohttp), both off; Alembic (the worker creates or
#: migrates the schema); scipy (no longer used); trafilatura (the worker extracts content);
#: Playwright and scrapy-playwright (only for servers with render_js); scrapy-redis and redis
#: (only with a shared frontier, SCALEOUT_REDIS_URL); Scrapy's cookies middleware and the
#: tldextract, requests and urllib3 it imports (only with COOKIES_ENABLED); warcio (only
#: with PAGESTORE_ENABLED).
NOT_IN_THE_CRAWLER = (
    "twisted.conch",
    "aiohttp",
    "alembic",
    "scipy",
    "trafilatura",
    "playwright",
    "scrapy_playwright",
    "scrapy_redis",
    "redis",
    "scrapy.downloadermiddlewares.cookies",
    "tldextract",
    "requests",
    "urllib3",
    "warcio",
)

#: Runs ``scrapy crawl`` as ``python -m scrapy`` does, and writes the names of the modules
#: the process loaded, when it exits, to the file argv[1].
_PROBE = """
import atexit, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
sys.argv[0] = "scrapy"
runpy.run_module("scrapy", run_name="__main__", alter_sys=True)
"""


def loaded(modules: set[str], packages: tuple[str, ...]) -> set[str]:
    return {m for m in modules for p in packages if m == p or m.startswith(p + ".")}


def test_the_crawler_process_loads_only_what_it_uses(site: Site, tmp_path: Path) -> None:
    site.page("/", "Zebra", "Welcome to the zebra pages.")
    data = tmp_path / "data"
    listing = tmp_path / "modules.txt"
    cmd = crawl_command(data, "-a", f"seeds={site.url}")
    assert cmd[1:4] == ["-m", "scrapy", "crawl"]
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(listing), *cmd[3:]],
        cwd=ROOT,
        env=_env(data, None),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert count_documents(f"sqlite:///{data / 'spidersite.db'}") == 1
    modules = set(listing.read_text().split())
    assert "scrapy.crawler" in modules and "spidersite.pipelines" in modules
    assert loaded(modules, NOT_IN_THE_CRAWLER) == set()


def test_pagerank_does_not_load_scipy() -> None:
    code = (
        "import sys, numpy as np; from search.linkrank import pagerank\n"
        "ranks, _ = pagerank(np.array([0, 1]), np.array([1, 2]), 3)\n"
        "print(round(float(ranks.sum()), 6), 'scipy' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1.0", "False"]
