"""Re-crawl benchmark: crawl a corpus site, re-crawl it unchanged, then change a few pages
and re-crawl again.

    python benchmarks/recrawl.py                      # the PostgreSQL docs
    python benchmarks/recrawl.py --site python-3.11-docs --touch 25 --json recrawl.json

1. ``scrapy crawl site -a seeds=<site>/index.html``: the first crawl.
2. ``scrapy crawl site -a recrawl=all``: every stored page is asked for with
   If-None-Match / If-Modified-Since; an unchanged site answers 304 everywhere, so no body
   is downloaded. Target: zero bodies, and at least 3x faster than the first crawl.
3. ``--touch N`` pages get a new word and a new modification time, then
   ``recrawl=all`` again: exactly those N pages must be re-indexed (``recrawl/changed``),
   and the new word must find them.

The site is copied to a temporary folder (the touched pages must not leak into the
benchmark cache) and served from a separate process (nginx when installed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpus

MARK = "zyzzyvarecrawl"


def crawl(data: Path, *args: str) -> dict[str, Any]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SPIDERSITE_", "SCRAPY_")) and k != "DATABASE_URL"
    }
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "site",
        *args,
        "-s",
        f"SPIDERSITE_DATA_DIR={data}",
        "-s",
        "LOG_LEVEL=INFO",
        "-s",
        f"LOG_FILE={data / 'crawl.log'}",
    ]
    data.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=_corpus.REPO_ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"crawl failed ({proc.returncode}): {proc.stderr[-2000:]}")
    con = sqlite3.connect(data / "spidersite.db")
    stats = json.loads(
        con.execute("SELECT stats FROM crawls ORDER BY id DESC LIMIT 1").fetchone()[0]
    )
    con.close()
    return {"wall_s": wall, "stats": stats}


def search(data: Path, word: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "search", word, "--json", "-n", "1000", "--data-dir", str(data)],
        cwd=_corpus.REPO_ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return []
    return [h["url"] for h in json.loads(proc.stdout)["hits"]]


def figures(run: dict[str, Any]) -> dict[str, Any]:
    st = run["stats"]
    return {
        "wall_s": round(run["wall_s"], 2),
        "elapsed_s": round(st.get("elapsed_time_seconds", 0.0), 2),
        "responses": st.get("response_received_count", 0),
        "status_200": st.get("downloader/response_status_count/200", 0),
        "status_304": st.get("downloader/response_status_count/304", 0),
        "response_bytes": st.get("downloader/response_bytes", 0),
        "not_modified": st.get("recrawl/not_modified", 0),
        "unchanged": st.get("recrawl/unchanged", 0),
        "changed": st.get("recrawl/changed", 0),
        "new": st.get("recrawl/new", 0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", default="postgresql-15-docs", choices=_corpus.SITES)
    parser.add_argument("--touch", type=int, default=20, help="pages to change (default 20)")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    args = parser.parse_args()

    root = _corpus.corpus_root([args.site])
    with tempfile.TemporaryDirectory(prefix="recrawl-") as tmp:
        tmp_path = Path(tmp)
        tmp_path.chmod(0o755)  # nginx workers run as another user
        site_root = tmp_path / "www"
        shutil.copytree(root / args.site, site_root / args.site)
        data = tmp_path / "data"
        with _corpus.serve(site_root) as base:
            seed = f"{base}{args.site}/index.html"
            first = crawl(data, "-a", f"seeds={seed}")
            unchanged = crawl(data, "-a", "recrawl=all")
            pages = sorted((site_root / args.site).glob("*.html"))
            touched = random.Random(7).sample(pages, min(args.touch, len(pages)))
            for page in touched:
                text = page.read_text(encoding="utf-8", errors="replace")
                page.write_text(
                    text.replace("</body>", f"<p>{MARK}</p></body>", 1), encoding="utf-8"
                )
                os.utime(page, (time.time() + 5, time.time() + 5))
            changed = crawl(data, "-a", "recrawl=all")
            found = search(data, MARK)
        result = {
            "site": args.site,
            "server": _corpus.server_kind(),
            "first": figures(first),
            "recrawl_unchanged": figures(unchanged),
            "recrawl_touched": figures(changed),
            "touched": len(touched),
            "touched_found_by_search": len(found),
        }
    f, u, c = result["first"], result["recrawl_unchanged"], result["recrawl_touched"]
    speedup = f["elapsed_s"] / u["elapsed_s"] if u["elapsed_s"] else float("inf")
    result["speedup_unchanged"] = round(speedup, 2)
    print(f"site {args.site}, server {result['server']}")
    print(
        f"{'run':<22}{'elapsed s':>10}{'responses':>10}{'200':>6}{'304':>6}{'bytes':>12}"
        f"{'changed':>9}"
    )
    for name, r in (("first crawl", f), ("re-crawl, unchanged", u), ("re-crawl, touched", c)):
        print(
            f"{name:<22}{r['elapsed_s']:>10}{r['responses']:>10}{r['status_200']:>6}"
            f"{r['status_304']:>6}{r['response_bytes']:>12}{r['changed']:>9}"
        )
    ok_bodies = u["status_200"] == 0
    ok_speed = speedup >= 3
    ok_touched = c["changed"] == result["touched"] == result["touched_found_by_search"]
    print(
        f"unchanged re-crawl: {u['status_200']} bodies downloaded (target 0) "
        f"{'OK' if ok_bodies else 'MISSED'}; {speedup:.1f}x faster than the first crawl "
        f"(target 3x) {'OK' if ok_speed else 'MISSED'}"
    )
    print(
        f"touched {result['touched']} pages: {c['changed']} re-indexed, "
        f"{result['touched_found_by_search']} found by the new word "
        f"{'OK' if ok_touched else 'MISSED'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if ok_bodies and ok_speed and ok_touched else 1


if __name__ == "__main__":
    raise SystemExit(main())
