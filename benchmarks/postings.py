"""What a page's postings cost the store on SQLite, as the crawl grows: the table by row id
with its primary key's index beside it (before migration 0011) against WITHOUT ROWID (since),
each page's rows in the analysis's order or in word-id order.

    python benchmarks/postings.py [--pages 30000] [--postings 385] [--batch 100] [--folder DIR]
                                  [--variant rowid|rowid-sorted|without|without-sorted]

Inserts ``--pages`` pages' postings (``--postings`` each, word ids drawn from 200,000 as a
site's vocabulary grows) into a SQLite table shaped like the product's ``postings`` (WAL,
``synchronous=NORMAL``, the primary key ``(document_id, word_id)``), one transaction per
``--batch`` pages as the worker stores them, and prints the CPU and wall-clock milliseconds
of the inserts a page over the last 10 % of the pages (making the rows is not timed), and
the database's size a page.  The variants: ``rowid``, the table by row id, each page's rows
in the order the analysis made them (the product before migration 0011); ``rowid-sorted``,
the same written in word-id order; ``without``, WITHOUT ROWID in the analysis's order (the
product since 0011); ``without-sorted``, the same in word-id order.  Run one variant a
process (each builds its own database in ``--folder``, the system's temporary folder by
default).
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
import time
from pathlib import Path

VARIANTS = ("rowid", "rowid-sorted", "without", "without-sorted")

_TABLE = """CREATE TABLE postings (
    document_id INTEGER NOT NULL, word_id INTEGER NOT NULL, surface VARCHAR(128) NOT NULL,
    body_count INTEGER NOT NULL, title_count INTEGER NOT NULL, url_count INTEGER NOT NULL,
    desc_count INTEGER NOT NULL, keywords_count INTEGER NOT NULL,
    boilerplate_count INTEGER DEFAULT '0' NOT NULL, weight FLOAT NOT NULL,
    CONSTRAINT pk_postings PRIMARY KEY (document_id, word_id))"""


def run(variant: str, pages: int, postings: int, batch: int, folder: Path) -> str:
    path = folder / f"postings-{variant}.db"
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    without = variant.startswith("without")
    conn.execute(_TABLE + (" WITHOUT ROWID" if without else ""))
    in_order = variant.endswith("-sorted")
    insert = "INSERT INTO postings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    rng = random.Random(1)
    last = int(pages // batch * 0.9)
    wall = cpu = 0.0
    for b in range(pages // batch):
        rows: list[tuple[object, ...]] = []
        for page in range(b * batch + 1, (b + 1) * batch + 1):
            words = rng.sample(range(1, 200_001), postings)
            if in_order:
                words.sort()
            rows += [(page, w, "surface", 2, 0, 0, 0, 0, 1, 1.75) for w in words]
        started_wall, started_cpu = time.perf_counter(), time.process_time()
        conn.execute("BEGIN")
        conn.executemany(insert, rows)
        conn.execute("COMMIT")
        if b >= last:
            wall += time.perf_counter() - started_wall
            cpu += time.process_time() - started_cpu
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    n = (pages // batch - last) * batch
    size = path.stat().st_size
    conn.close()
    return (
        f"{variant}: {pages:,} pages, last 10 %: {cpu / n * 1000:.3f} ms a page CPU, "
        f"{wall / n * 1000:.3f} ms wall clock; database {size / pages / 1000:.1f} kB a page"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=30_000, help="pages (30000)")
    parser.add_argument("--postings", type=int, default=385, help="postings a page (385)")
    parser.add_argument("--batch", type=int, default=100, help="pages a transaction (100)")
    parser.add_argument("--variant", choices=VARIANTS, default="without")
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    print(run(args.variant, args.pages, args.postings, args.batch, args.folder))


if __name__ == "__main__":
    main()
