"""Browser rendering at size: a synthetic site whose text and links are written by
JavaScript, crawled with ``render_js``, against the same site in plain HTML crawled without.

    python benchmarks/render.py [--pages 500] [--seed 1] [--skip-plain] [--json FILE]
                                [--set NAME=VALUE ...] [--keep] [--timeout S]

1. Two sites of ``--pages`` pages are generated once into ``benchmarks/.cache/render/``
   (reused while ``--pages`` and ``--seed`` match), the same text in both: each page has a
   title, ~300 words drawn from the Zipf vocabulary of ``benchmarks/_synthetic.py``, one
   marker word found on that page only, an image, and links to its parent
   ``(n - 1) // 8``, its children ``8n + 1 … 8n + 8`` and page ``n + 1``.  In ``js/`` the
   body is empty and an inline script writes the paragraphs and the links (the HTML has
   neither); in ``plain/`` they are in the HTML.
2. Both are served on 127.0.0.1 by nginx (installed when missing and we may, see
   ``_corpus.ensure_server_kind``).
3. The product crawls each (``scrapy crawl site``, one subprocess each, from page 0):
   ``js/`` with ``SERVER_DEFAULTS={"render_js": true}``, ``plain/`` as it is.  The RSS of
   the crawl's whole process tree (the crawl, its store and index workers, and for the
   rendered crawl Playwright's driver and every chromium process) is sampled every second
   (``_measure.run_measured``): peak, RSS at 25/50/75/100 % of the run, and the growth over
   its second half, with pages/s downloaded and searchable (as ``benchmarks/scale.py``);
   and the same figures for the tree's PSS (proportional set size, sampled every second
   by a thread here: chromium's processes share most of their pages, which a sum of RSS
   counts once per process, so PSS is what the tree really takes).
4. Correctness: every page is stored, and a sample of 50 markers is found in the
   ``words`` table of the page that holds it (the text the browser wrote was indexed).

Exit status 1 when a crawl fails or a check does, never because of a figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _corpus
import _measure
import crawl
import scale

from search import postingcodec

SITE_FORMAT = 1
FANOUT = 8
WORDS = 300
MARKERS = 50
SAMPLE_INTERVAL = 1.0
# 1x1 transparent GIF: every page has an image, which the browser is told not to fetch.
PIXEL = bytes.fromhex(
    "47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b"
)

SCRIPT = """<script>
(function () {{
  var data = {data};
  var app = document.getElementById("app");
  data.paragraphs.forEach(function (text) {{
    var p = document.createElement("p"); p.textContent = text; app.appendChild(p);
  }});
  var ul = document.createElement("ul");
  data.links.forEach(function (link) {{
    var li = document.createElement("li"), a = document.createElement("a");
    a.href = link[0]; a.textContent = link[1]; li.appendChild(a); ul.appendChild(li);
  }});
  app.appendChild(ul);
}})();
</script>"""


def page_path(n: int) -> str:
    return "/index.html" if n == 0 else f"/p/{n // 100}/{n}.html"


def site_dir(pages: int, seed: int) -> Path:
    return _corpus.BENCH_DIR / ".cache" / "render" / f"site-{pages}-{seed}-v{SITE_FORMAT}"


def _content(n: int, pages: int, words: scale._Words, rng: random.Random) -> dict[str, Any]:
    body = words.draw(WORDS)
    body.insert(rng.randrange(len(body) + 1), scale.marker(n))
    paragraphs = [" ".join(body[i : i + 60]).capitalize() + "." for i in range(0, len(body), 60)]
    targets = [] if n == 0 else [(n - 1) // FANOUT]
    targets += [c for c in range(FANOUT * n + 1, FANOUT * n + FANOUT + 1) if c < pages]
    if n + 1 < pages:
        targets.append(n + 1)
    links = [[page_path(t), " ".join(words.draw(2))] for t in targets]
    return {
        "title": " ".join(words.draw(rng.randint(3, 7))).capitalize(),
        "paragraphs": paragraphs,
        "links": links,
    }


def _html(content: dict[str, Any], rendered: bool) -> str:
    title = content["title"]
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n</head>\n<body>\n<h1>{title}</h1>\n"
        '<img src="/pixel.gif" alt="">\n'
    )
    if rendered:
        data = json.dumps(content).replace("</", "<\\/")
        return head + '<div id="app"></div>\n' + SCRIPT.format(data=data) + "\n</body></html>\n"
    paragraphs = "\n".join(f"<p>{p}</p>" for p in content["paragraphs"])
    links = "\n".join(f'<li><a href="{href}">{text}</a></li>' for href, text in content["links"])
    return head + f"{paragraphs}\n<ul>\n{links}\n</ul>\n</body></html>\n"


def generate_sites(pages: int, seed: int) -> Path:
    """The folder with ``js/`` and ``plain/``, generated unless a complete one is cached."""
    target = site_dir(pages, seed)
    if (target / "site.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    root.chmod(0o755)  # mkdtemp's 0700 would keep nginx's workers out
    words = scale._Words(seed)
    rng = random.Random(seed + 1)
    try:
        for kind in ("js", "plain"):
            (root / kind).mkdir()
            (root / kind / "robots.txt").write_text("User-agent: *\nAllow: /\n")
            (root / kind / "pixel.gif").write_bytes(PIXEL)
        for n in range(pages):
            content = _content(n, pages, words, rng)
            for kind in ("js", "plain"):
                path = root / kind / page_path(n).lstrip("/")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(_html(content, kind == "js"), encoding="utf-8")
        manifest = {"pages": pages, "seed": seed, "format": SITE_FORMAT}
        (root / "site.json").write_text(json.dumps(manifest) + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        root.rename(target)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return target


def check_markers(db: Path, base_url: str, pages: int, seed: int) -> dict[str, Any]:
    """A sample of markers, each stored as a word of its own page."""
    sample = random.Random(seed + 2).sample(range(pages), min(MARKERS, pages))
    missed = []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        for n in sample:
            url = urllib.parse.urljoin(base_url, page_path(n))
            row = conn.execute(
                "SELECT p.word_ids, w.id FROM postings p JOIN documents d ON d.id = "
                "p.document_id JOIN words w ON w.stem = ? WHERE d.url = ?",
                (scale.marker(n), url),
            ).fetchone()
            if row is None or row[1] not in postingcodec.decode_word_ids(row[0]):
                missed.append(n)
    return {"checked": len(sample), "found": len(sample) - len(missed), "missed": missed[:10]}


class PssSampler(threading.Thread):
    """Every second, the PSS of the crawl's whole process tree (found by its data folder
    on its command line): chromium's processes share most of their pages, which the RSS
    sum of ``_measure.run_measured`` counts once per process."""

    def __init__(self, marker: str) -> None:
        super().__init__(daemon=True)
        self.marker = marker
        self.timeline: list[tuple[float, float, float]] = []
        self.done = threading.Event()

    def _root(self) -> Any:
        import psutil

        for process in psutil.process_iter(["cmdline"]):
            cmdline = process.info.get("cmdline") or []
            if "scrapy" in cmdline and any(self.marker in part for part in cmdline):
                return process
        return None

    def run(self) -> None:
        import psutil

        started = time.monotonic()
        root = None
        while not self.done.wait(SAMPLE_INTERVAL):
            try:
                root = root if root is not None and root.is_running() else self._root()
                if root is None:
                    continue
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                root = None
                continue
            total = 0
            for process in tree:
                try:
                    total += process.memory_full_info().pss
                except psutil.Error:
                    continue
            self.timeline.append((time.monotonic() - started, total / 2**20, 0.0))


def run(
    name: str, root: Path, pages: int, seed: int, work: Path, settings: list[str], timeout: float
) -> tuple[dict[str, Any], list[str]]:
    problems: list[str] = []
    with _corpus.serve(root) as base_url:
        seeds = [urllib.parse.urljoin(base_url, page_path(0))]
        folder = work / name
        folder.mkdir()
        print(f"crawling {name} ({base_url}) ...", flush=True)
        sampler = PssSampler(str(folder / "product"))
        sampler.start()
        try:
            result = crawl.run_product(seeds, folder, timeout, SAMPLE_INTERVAL, settings)
        finally:
            sampler.done.set()
            sampler.join()
        figures = scale.run_figures(result)
        pss = scale.rss_profile(sampler.timeline)
        figures["pss"] = {
            "peak_mb": max((mb for _, mb, _ in sampler.timeline), default=None),
            "at_mb": pss.get("rss_at_mb"),
            "growth_second_half": pss.get("growth_second_half"),
            "timeline": [[round(t, 1), round(mb, 1)] for t, mb, _ in sampler.timeline],
        }
        stats = result.stats
        figures["stats"] = {
            k: v for k, v in stats.items() if k.startswith(("render/", "playwright/", "memusage/"))
        }
        if not result.ok:
            problems.append(f"{name}: {result.message}")
        elif result.documents != pages:
            problems.append(f"{name}: {result.documents} documents stored of {pages} pages")
        db = folder / "product" / "spidersite.db"
        if db.is_file():
            figures["markers"] = check_markers(db, base_url, pages, seed)
            if figures["markers"]["found"] != figures["markers"]["checked"]:
                problems.append(f"{name}: markers not found: {figures['markers']['missed']}")
    return figures, problems


def print_run(name: str, run: dict[str, Any]) -> None:
    fmt = scale.fmt
    print(f"\n{name}: {run['documents']} documents, {fmt(run['responses'], '{:,}')} responses")
    print(
        f"  elapsed {fmt(run['elapsed_s'])} s; pages/s downloaded {fmt(run['pages_per_s'])}, "
        f"searchable {fmt(run['searchable_per_s'])}"
    )
    print(
        f"  peak RSS {fmt(run['tree_peak_rss_mb'], '{:,.0f}')} MB whole tree, "
        f"{fmt(run['main_peak_rss_mb'], '{:,.0f}')} MB crawl process; RSS at "
        + ", ".join(f"{k} {v:,.0f}" for k, v in run.get("rss_at_mb", {}).items())
        + f" MB; growth over the second half {fmt(run.get('growth_second_half'), '{:+.0%}')}"
    )
    pss = run.get("pss") or {}
    if pss.get("peak_mb"):
        print(
            f"  PSS of the whole tree: peak {pss['peak_mb']:,.0f} MB; at "
            + ", ".join(f"{k} {v:,.0f}" for k, v in (pss.get("at_mb") or {}).items())
            + f" MB; growth over the second half {fmt(pss.get('growth_second_half'), '{:+.0%}')}"
        )
    if run.get("markers"):
        print(f"  markers: {run['markers']['found']}/{run['markers']['checked']} found")
    for key in sorted(run.get("stats", {})):
        if not key.startswith("playwright/request_count/resource_type") and key.count("/") < 3:
            print(f"  {key}: {run['stats'][key]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=500, help="pages of each site (500)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the sites' text (1)")
    parser.add_argument("--skip-plain", action="store_true", help="no crawl without render_js")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the logs and data folders")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per crawl (3600)")
    args = parser.parse_args(argv)
    root = generate_sites(args.pages, args.seed)
    server = _corpus.ensure_server_kind()
    work = Path(tempfile.mkdtemp(prefix="spidersite-bench-render-"))
    load_start = os.getloadavg()
    runs: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    rendered = ['SERVER_DEFAULTS={"render_js": true}', *args.set]
    figures, found = run(
        "rendered", root / "js", args.pages, args.seed, work, rendered, args.timeout
    )
    runs["rendered"], problems = figures, problems + found
    if not args.skip_plain:
        figures, found = run(
            "plain", root / "plain", args.pages, args.seed, work, list(args.set), args.timeout
        )
        runs["plain"], problems = figures, problems + found
    load_end = os.getloadavg()
    print(f"\n{args.pages:,} pages a site, served by {server}; load {load_start} -> {load_end}")
    for name, figures in runs.items():
        print_run(name, figures)
    if "plain" in runs and runs["plain"].get("pages_per_s") and runs["rendered"].get("pages_per_s"):
        ratio = runs["rendered"]["pages_per_s"] / runs["plain"]["pages_per_s"]
        print(f"\nrendered / plain pages/s: {ratio:.3f}")
    for problem in problems:
        print(f"\nproblem: {problem}")
    if args.json:
        report = {
            "benchmark": "render",
            "measured_at": datetime.now(tz=UTC).isoformat(timespec="seconds"),
            "machine": _measure.machine(),
            "pages": args.pages,
            "server": server,
            "load": [load_start, load_end],
            "runs": runs,
            "problems": problems,
        }
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.json}")
    if args.keep or problems:
        print(f"\nlogs and data kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
