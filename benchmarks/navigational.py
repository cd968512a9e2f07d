"""Mean reciprocal rank of navigational queries, with and without the link-graph prior.

Run on a crawl of a corpus site (its data folder), with a file of ``query<TAB>page`` lines
(``tests/navigational.tsv`` for the PostgreSQL documentation,
``benchmarks/navigational-python.tsv`` for the Python documentation)::

    scrapy crawl site -a seeds=http://127.0.0.1:8000/postgresql-15-docs/index.html
    python -m search reindex            # or update_linkrank(): the linkranks
    python benchmarks/navigational.py --data-dir data tests/navigational.tsv

Prints, for each prior weight (``Params.linkrank``), the MRR, how many queries find their
page first and in the top 3, then a two-fold cross-validation of the weight (queries dealt
alternately into two folds; each fold ranked with the weight of best MRR on the other).
A query names its page by the end of its URL path.  ``--vary proximity`` varies the
weight of the term-proximity bonus instead (``Params.proximity``, the prior at its
default); ``--proximity W`` sets it while the prior's weight varies; ``--vary
fb_min_words`` varies the fewest distinct words of a query expanded (``Params.fb_min_words``,
1 to 5: which keyword queries query expansion rewrites); ``--vary w_title`` the title's
weight scale (``Params.w_title``: 1 is the servers' weight, 4 by default); ``--vary k1``
and ``--vary b`` BM25's parameters (every section's b).  ``--set NAME=VALUE`` (repeatable)
sets any other parameter for every run (``--set expansion=bo1 --vary fb_min_words``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from search import db, ranking
from search.index import Index
from search.query import parse_query
from search.searcher import Searcher

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
#: The values each varied parameter takes; the first is the "off" the held-out line names.
VALUES: dict[str, tuple[float, ...]] = {
    "linkrank": WEIGHTS,
    "proximity": WEIGHTS,
    "fb_min_words": (5, 4, 3, 2, 1),
    # The title's weight scale (1: the servers' weight, 4 by default).
    "w_title": (1.0, 0.25, 0.5, 0.75, 1.5, 2.0),
    # BM25's saturation and length normalisation (the defaults first).
    "k1": (1.2, 0.9, 1.6, 2.0, 3.0, 4.0),
    "b": (0.75, 0.3, 0.4, 0.5, 0.6, 0.9),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("queries", type=Path)
    p.add_argument("--data-dir", type=Path, default=Path("data"))
    p.add_argument(
        "--bm25f", choices=ranking.BM25F_FORMS, default=ranking.DEFAULT.bm25f, help="BM25F form"
    )
    p.add_argument("--vary", choices=tuple(VALUES), default="linkrank")
    p.add_argument("--proximity", type=float, default=ranking.DEFAULT.proximity)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another ranking parameter (ranking.Params' names: expansion=bo1), repeatable",
    )
    args = p.parse_args()
    others = dict(item.split("=", 1) for item in args.set)
    base = ranking.DEFAULT.with_values(bm25f=args.bm25f, proximity=args.proximity, **others)
    name = args.vary
    lines = args.queries.read_text(encoding="utf-8").splitlines()
    rows = [line.split("\t") for line in lines if line and not line.startswith("#")]
    engine = db.create(f"sqlite:///{args.data_dir / 'spidersite.db'}")
    searcher = Searcher(engine, Index(args.data_dir / "index"))
    reciprocal: dict[float, list[float]] = {}
    values = VALUES[name]
    for weight in values:
        with searcher.session(base.with_values(**{name: weight})) as session:
            ranks = []
            for query, page in rows:
                urls = [r.url for r in session.rank(parse_query(query), 1000)]
                found = [i for i, url in enumerate(urls, 1) if url.endswith("/" + page.strip())]
                ranks.append(1.0 / found[0] if found else 0.0)
        reciprocal[weight] = ranks
        first = sum(r == 1 for r in ranks)
        top3 = sum(r >= 1 / 3 for r in ranks)
        print(f"{name} {weight:<5} MRR {mean(ranks):.3f}  first {first}  top 3 {top3}/{len(ranks)}")
    folds = [list(range(0, len(rows), 2)), list(range(1, len(rows), 2))]
    held: list[float] = []
    for i, test in enumerate(folds):
        train = folds[1 - i]
        best = max(values, key=lambda w: (mean([reciprocal[w][j] for j in train]), -w))
        fitted = mean([reciprocal[best][j] for j in train])
        out = [reciprocal[best][j] for j in test]
        held += out
        print(f"fold {i + 1}: {name} {best}, MRR fitted {fitted:.3f}, held out {mean(out):.3f}")
    off = values[0]
    print(f"held out: MRR {mean(held):.3f} ({name} {off}: {mean(reciprocal[off]):.3f})")


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


if __name__ == "__main__":
    main()
