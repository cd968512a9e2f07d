"""What an index of the links by target costs the store, per page, as the crawl grows.

    python benchmarks/linkindex.py [--pages 60000] [--links 30] [--batch 100]
                                   [--variant text|none|hash|cache] [--folder DIR]

Inserts ``--pages`` pages' links (``--links`` each, to random pages of the site, URLs
like the synthetic site's) into a SQLite table shaped like the product's ``links`` (WAL,
``synchronous=NORMAL``, the unique index on ``(from_id, to_url)``), one transaction per
``--batch`` pages as the worker stores them, and prints the wall-clock and CPU
milliseconds a page over the last 10 % of the pages, and the database's size.  The
variants: ``text``, the product's index on ``to_url``; ``none``, no index by target;
``hash``, an index on an 8-byte hash of the target instead; ``cache``, the ``to_url``
index with a 32 MB SQLite page cache (the default is 2 MB).  Run one variant a process
(each builds its own database in ``--folder``, the system's temporary folder by default).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sqlite3
import tempfile
import time
from pathlib import Path

VARIANTS = ("text", "none", "hash", "cache")


def url_hash(url: str) -> int:
    digest = hashlib.blake2b(url.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def run(variant: str, pages: int, links: int, batch: int, folder: Path) -> str:
    path = folder / f"linkindex-{variant}.db"
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    if variant == "cache":
        conn.execute("PRAGMA cache_size=-32768")
    hashed = variant == "hash"
    conn.execute(
        "CREATE TABLE links (id INTEGER PRIMARY KEY, from_id INTEGER NOT NULL, to_url TEXT "
        f"NOT NULL, anchor TEXT, nofollow BOOLEAN NOT NULL{', to_hash INTEGER' if hashed else ''})"
    )
    conn.execute("CREATE UNIQUE INDEX ix_links_from_to ON links (from_id, to_url)")
    if variant in ("text", "cache"):
        conn.execute("CREATE INDEX ix_links_to_url ON links (to_url)")
    if hashed:
        conn.execute("CREATE INDEX ix_links_to_hash ON links (to_hash)")
    columns = "from_id, to_url, anchor, nofollow" + (", to_hash" if hashed else "")
    marks = ", ".join("?" for _ in columns.split(","))
    insert = f"INSERT INTO links ({columns}) VALUES ({marks})"
    rng = random.Random(1)
    last = int(pages // batch * 0.9)
    mark_wall = mark_cpu = 0.0
    for b in range(pages // batch):
        if b == last:
            mark_wall, mark_cpu = time.perf_counter(), time.process_time()
        rows: list[tuple[object, ...]] = []
        for page in range(b * batch, (b + 1) * batch):
            for target in rng.sample(range(pages), links):
                url = f"http://127.0.0.1:8080/section-{target % 97}/page-{target}.html"
                row: tuple[object, ...] = (page, url, "anchor words here", False)
                rows.append((*row, url_hash(url)) if hashed else row)
        conn.execute("BEGIN")
        conn.executemany(insert, rows)
        conn.execute("COMMIT")
    wall, cpu = time.perf_counter() - mark_wall, time.process_time() - mark_cpu
    n = (pages // batch - last) * batch
    size = path.stat().st_size / 1e6
    conn.close()
    return (
        f"{variant}: {pages:,} pages, last 10 %: {wall / n * 1000:.3f} ms a page wall clock, "
        f"{cpu / n * 1000:.3f} ms CPU; database {size:,.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=60_000, help="pages (60000)")
    parser.add_argument("--links", type=int, default=30, help="links a page (30)")
    parser.add_argument("--batch", type=int, default=100, help="pages a transaction (100)")
    parser.add_argument("--variant", choices=VARIANTS, default="text", help="text (default)")
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    print(run(args.variant, args.pages, args.links, args.batch, args.folder))


if __name__ == "__main__":
    main()
