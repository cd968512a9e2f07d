"""``python -m search reindex`` at size, without crawling the size.

    python benchmarks/reindex.py --from DATA_DIR [--docs 100000] [--no-linkrank]
                                 [--processes N] [--keep] [--json FILE]

A crawl of ``benchmarks/scale.py``'s site at 100,000 pages takes hours on a loaded
two-core machine; the rebuild's cost depends only on what the database holds.  So this
takes the SQLite database of a smaller crawl (``DATA_DIR``: a product data folder that
``scale.py --keep`` left, or any data folder of the embedded default), copies it, and
replicates its documents until it holds ``--docs`` of them: each copy of a document has its
URL with ``?copy=…`` added, the same postings and links (to the copies of the same
pages), and one more stem of its own (a marker, as every page of the synthetic site has),
so that the dictionary grows with the documents as a crawl's does.  Then it runs
``python -m search reindex --quiet`` on the copy in a subprocess, sampling the RSS of the
process tree (``_measure.run_measured``), and prints documents/s: of the whole command (what
``scale.py`` reports), and of the rebuild alone (the command's time less the linkrank's,
which the command prints; with a reader process, ``--processes 2``, the default from 2,000
documents on two cores or more, the linkrank runs while the segment is written, so that
figure is a lower bound).  The CPU seconds are those of the command's whole process tree.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _measure  # noqa: E402

from search import postingcodec  # noqa: E402

TARGET = 1000.0


def add_marker_postings(cur: sqlite3.Cursor, first: int, last: int) -> None:
    """Give each document of an id in ``first + 1 … last`` its marker stem (``qcopy<id>``,
    a word of an id above all of its others) as one more posting, counted once in the
    body, of weight 1 (one postings row a document, :mod:`search.postingcodec`)."""
    markers = cur.execute(
        "SELECT d.id, w.id, w.stem FROM documents d JOIN words w ON w.stem = 'qcopy' || d.id "
        "WHERE d.id > ? AND d.id <= ?",
        (first, last),
    ).fetchall()
    for did, wid, stem in markers:
        row = cur.execute(
            "SELECT word_ids, surfaces, counts, weights FROM postings WHERE document_id = ?",
            (did,),
        ).fetchone()
        old = postingcodec.decode(row[0], row[2], row[1], row[3]) if row else None
        word_ids = [*(old.word_ids.tolist() if old else []), wid]
        surfaces = [*(old.surfaces or [] if old else []), stem]
        counts = [*(old.counts.ravel().tolist() if old else []), 1, 0, 0, 0, 0, 0]
        weights = [*(old.weights.tolist() if old and old.weights is not None else []), 1.0]
        packed = postingcodec.encode(word_ids, surfaces, counts, weights)
        cur.execute(
            "INSERT OR REPLACE INTO postings (document_id, word_ids, surfaces, counts, weights) "
            "VALUES (?, ?, ?, ?, ?)",
            (did, packed.word_ids, packed.surfaces, packed.counts, packed.weights),
        )


def replicate(db: Path, docs: int) -> dict[str, int]:
    """Grow the SQLite database *db* to *docs* documents by copies of its own."""
    con = sqlite3.connect(db)
    try:
        cur = con.cursor()
        (n0,) = cur.execute("SELECT count(*) FROM documents").fetchone()
        if n0 >= docs:
            return {}
        (top,) = cur.execute("SELECT max(id) FROM documents").fetchone()
        columns = [row[1] for row in cur.execute("PRAGMA table_info(documents)")]
        shifted = {"id", "clone_of_id", "near_duplicate_of_id"}
        # Every column of postings (one row a document since migration 0014).
        posting_columns = [row[1] for row in cur.execute("PRAGMA table_info(postings)")]
        posting_names = ", ".join(f'"{c}"' for c in posting_columns)
        posting_select = ", ".join(
            "document_id + ?" if c == "document_id" else f'"{c}"' for c in posting_columns
        )
        # The indexes that serve no copy are made again at the end (faster than kept).
        indexes = cur.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
            "AND tbl_name IN ('postings', 'links')"
        ).fetchall()
        for name, _ in indexes:
            cur.execute(f'DROP INDEX "{name}"')
        copy = 1
        total = n0
        while total < docs:
            off = copy * top
            take = min(n0, docs - total)
            select = ", ".join(
                f"{c} + {off}"
                if c in shifted
                else (f"url || '?copy={n0}-{copy}'" if c == "url" else f'"{c}"')
                for c in columns
            )
            names = ", ".join(f'"{c}"' for c in columns)
            cur.execute(
                f"INSERT INTO documents ({names}) SELECT {select} FROM documents "
                f"WHERE id <= ? ORDER BY id LIMIT ?",
                (top, take),
            )
            (last,) = cur.execute("SELECT max(id) FROM documents WHERE id > ?", (off,)).fetchone()
            cur.execute(
                f"INSERT INTO postings ({posting_names}) SELECT {posting_select} FROM postings "
                "WHERE document_id <= ?",
                (off, last - off),
            )
            cur.execute(
                "INSERT INTO links (from_id, to_url, anchor, nofollow) SELECT from_id + ?, "
                "to_url || ?, anchor, nofollow FROM links WHERE from_id <= ?",
                (off, f"?copy={n0}-{copy}", last - off),
            )
            cur.execute(
                "INSERT INTO words (stem) SELECT 'qcopy' || id FROM documents "
                "WHERE id > ? AND id <= ?",
                (off, last),
            )
            add_marker_postings(cur, off, last)
            con.commit()
            total += take
            copy += 1
            print(f"  {total:,} documents", flush=True)
        for _, sql in indexes:
            cur.execute(sql)
        con.commit()
        counts = {
            table: cur.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("documents", "postings", "words", "links")
        }
    finally:
        con.close()
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", type=Path, required=True, metavar="DATA_DIR")
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--no-linkrank", action="store_true", help="reindex --no-linkrank")
    parser.add_argument(
        "--processes", type=int, choices=(1, 2), help="reindex --processes N (default: its own)"
    )
    parser.add_argument("--work", type=Path, help="where to build the copy (kept)")
    parser.add_argument("--keep", action="store_true", help="keep the copy")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only-replicate", action="store_true", help="no reindex")
    parser.add_argument(
        "--code",
        type=Path,
        default=ROOT,
        help="the checkout whose reindex runs (default: this one)",
    )
    args = parser.parse_args(argv)

    work = args.work or Path(tempfile.mkdtemp(prefix="spidersite-bench-reindex-"))
    data = work / "data"
    db = data / "spidersite.db"
    if not db.exists():
        data.mkdir(parents=True, exist_ok=True)
        src = sqlite3.connect(args.source / "spidersite.db")
        dst = sqlite3.connect(db)
        src.backup(dst)
        src.close()
        dst.close()
    print(f"replicating {args.source} to {args.docs:,} documents in {data} ...", flush=True)
    started = time.monotonic()
    counts = replicate(db, args.docs)
    print(f"  done in {time.monotonic() - started:.0f} s: {counts}", flush=True)
    if args.only_replicate:
        return 0
    shutil.rmtree(data / "index", ignore_errors=True)
    cmd = [sys.executable, "-m", "search", "reindex", "--quiet", "--data-dir", str(data)]
    if args.no_linkrank:
        cmd.append("--no-linkrank")
    if args.processes:
        cmd += ["--processes", str(args.processes)]
    env = {**os.environ, "PYTHONPATH": str(args.code)}
    load = os.getloadavg()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    measured = _measure.run_measured(
        cmd,
        cwd=args.code,
        stdout_path=work / "reindex-stdout.txt",
        stderr_path=work / "reindex-stderr.txt",
        env=env,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)
    stdout = (work / "reindex-stdout.txt").read_text()
    if measured.returncode != 0:
        print(stdout, (work / "reindex-stderr.txt").read_text(), sep="\n")
        return 1
    done = int(re.search(r"Indexed (\d+) documents", stdout).group(1))  # type: ignore[union-attr]
    found = re.search(r"Linkrank of .* \(([\d.]+) s\)", stdout)
    linkrank_s = float(found.group(1)) if found else 0.0
    seconds = measured.wall_s
    figures: dict[str, Any] = {
        "benchmark": "reindex",
        "measured_at": datetime.now(tz=UTC).isoformat(timespec="seconds"),
        "documents": done,
        "seconds": seconds,
        "docs_per_s": done / seconds,
        "cpu_seconds": cpu_s,
        "linkrank_seconds": linkrank_s,
        "rebuild_docs_per_s": done / max(seconds - linkrank_s, 1e-9),
        "peak_rss_mb": measured.tree_peak_rss_mb,
        "code": str(args.code),
        "processes": args.processes,
        "load_start": load,
        "load_end": os.getloadavg(),
    }
    print(
        f"reindex of {done:,} documents: {seconds:.1f} s, {figures['docs_per_s']:,.0f} "
        f"documents/s (rebuild alone {figures['rebuild_docs_per_s']:,.0f}/s, linkrank "
        f"{linkrank_s:.1f} s), CPU {cpu_s:.1f} s, peak RSS {measured.tree_peak_rss_mb:.0f} MB; "
        f"load {load[0]:.1f}; target "
        f"≥ {TARGET:,.0f}/s: {'met' if figures['docs_per_s'] >= TARGET else 'NOT met'}"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if not (args.keep or args.work):
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
