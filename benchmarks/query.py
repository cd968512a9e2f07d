"""Query latency: the product's ranking against stock Whoosh BM25F, on synthetic documents.

    python benchmarks/query.py [--docs 100000] [--queries 300] [--seed 1] [--rebuild]
                               [--rebuild-product] [--json FILE]

Builds (once; cached under ``benchmarks/.cache/query-<docs>-<seed>/``) two indexes of the
same synthetic documents:

- the product's: each document goes through the product's own index path, the analyzer
  (:func:`search.analysis.analyze_document`, title and body with the default section
  weights) then :meth:`search.index.IndexDoc.from_records` and :class:`search.index.Index`'s
  one writer (batches of 5,000 documents, ``limitmb=256``);
- a stock Whoosh index: ``title`` and ``body`` as ``TEXT`` fields (the default analyzer).

Documents: a Zipf vocabulary (exponent 1.07 over 60,000 pronounceable pseudo-words); body
lengths log-normal with a median of 300 words (σ = 0.8: a long tail, 1 % above ~1,900
words); titles of 3–9 words.  Queries are typed the way people type them: 1–5 words
(30 %, 30 %, 20 %, 12 %, 8 %), 80 % of the words drawn from mid-frequency ranks
(300–20,000, uniformly), 20 % from the frequent ranks (20–300); the few hundred most frequent
words act as stop words and are never typed.

Then each query runs, in the same process, through

- the product: :meth:`search.searchsession.SearchSession.rank` for the top 10 (what ``python -m
  search`` and the web page do before they read the database for titles and snippets), and
  separately the hit count (:meth:`SearchSession.count`) that a result page also shows
  (counted on the scores the ranking kept),
  and the top 10 without query expansion (``expand=False``: the same OR of the typed words
  that stock runs; queries of 4+ words are expanded by default);
- stock Whoosh: an OR of every query word in ``title`` and ``body``, ``BM25F`` defaults,
  ``limit=10``;
- the reference: the product's formula computed by another implementation, Whoosh's own
  matchers with the product's weighting model (:class:`search.reference.ReferenceSession`),
  exhaustively (``optimize=False``: no block skipping), with query expansion computed from
  that exhaustive top 10 by the pure-Python feedback of :mod:`search.ranking` (the
  documents' term vectors read from the array postings' forward index, or from Whoosh's
  term vectors in an index cached before they were dropped).

The product ranks on its array postings (:mod:`search.arrays`); ``--rebuild-product``
rebuilds its cached index alone after a change of the index format.

It prints p50/p95 of each, the p95 ratio stock / product (target ≥ 10), and the share of
queries whose product top 10 equals the reference top 10 (target ≥ 95 %; two lists are equal
when they hold the same documents in the same order, ties of equal score in any order).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _synthetic import VOCABULARY, ZIPF_S, make_queries, vocabulary, zipf_cum_weights  # noqa: E402
from whoosh import index as whoosh_index  # noqa: E402
from whoosh import query as wq  # noqa: E402
from whoosh import scoring  # noqa: E402
from whoosh.fields import ID, STORED, TEXT, Schema  # noqa: E402

from search.analysis import analyze_document  # noqa: E402
from search.index import Index, IndexDoc  # noqa: E402
from search.indexquery import BM25, build_query, weighted_query  # noqa: E402
from search.query import parse_query  # noqa: E402
from search.reference import ReferenceSession  # noqa: E402
from search.results import Ranked  # noqa: E402
from search.searchsession import SearchSession  # noqa: E402

CACHE = ROOT / "benchmarks" / ".cache"
MEDIAN_WORDS = 300
SIGMA = 0.8
BATCH = 5_000


def documents(n: int, seed: int) -> tuple[list[str], list[tuple[str, str]]]:
    """The vocabulary (rank order) and *n* (title, body) pairs."""
    rng = random.Random(seed)
    vocab = vocabulary(VOCABULARY, rng)
    cum = zipf_cum_weights(VOCABULARY, ZIPF_S)
    docs = []
    for _ in range(n):
        length = max(20, int(rng.lognormvariate(math.log(MEDIAN_WORDS), SIGMA)))
        body = " ".join(rng.choices(vocab, cum_weights=cum, k=length))
        title = " ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(3, 9)))
        docs.append((title, body))
    return vocab, docs


def build(folder: Path, docs: list[tuple[str, str]], stock: bool = True) -> dict[str, float]:
    """Both indexes of *docs* (with *stock* False, the product's only); the seconds each
    build took."""
    if stock and folder.exists():
        shutil.rmtree(folder)
    if (folder / "product").exists():
        shutil.rmtree(folder / "product")
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    index = Index(folder / "product")
    for start in range(0, len(docs), BATCH):
        with index.writer(limitmb=256) as writer:
            for docid in range(start, min(start + BATCH, len(docs))):
                title, body = docs[docid]
                records = analyze_document({"title": title, "body": body})
                writer.add(
                    IndexDoc.from_records(
                        docid,
                        f"http://bench.example/{docid}",
                        "bench.example",
                        records.values(),
                    ),
                    update=False,
                )
        print(f"  product index: {min(start + BATCH, len(docs)):,} documents", flush=True)
    product = time.perf_counter() - started
    if not stock:
        return {"product_build_s": product}
    started = time.perf_counter()
    schema = Schema(docid=ID(stored=True), url=STORED(), title=TEXT(), body=TEXT())
    (folder / "stock").mkdir()
    ix = whoosh_index.create_in(str(folder / "stock"), schema)
    w = ix.writer(limitmb=512)
    for docid, (title, body) in enumerate(docs):
        w.add_document(
            docid=str(docid), url=f"http://bench.example/{docid}", title=title, body=body
        )
        if docid % 10_000 == 9_999:
            print(f"  stock index: {docid + 1:,} documents", flush=True)
    w.commit()
    return {"product_build_s": product, "stock_build_s": time.perf_counter() - started}


def exhaustive(session: ReferenceSession, weights: dict[str, float], limit: int) -> list[Ranked]:
    """The product's scoring without any pruning: every matching document scored."""
    present = {s: w for s, w in weights.items() if session.df(s)}
    if not present:
        return []
    results = session.s.search(weighted_query(present), limit=limit, optimize=False)
    out = []
    for score, docnum in results.top_n:
        fields = session.s.stored_fields(docnum)
        out.append(Ranked(float(score), int(fields["docid"]), fields["url"], docnum))
    return sorted(out, key=lambda h: (-h.score, h.docnum))


def reference(session: ReferenceSession, text: str, limit: int = 10) -> list[Ranked]:
    q = parse_query(text)
    weights = build_query(q, session.params.decay).weights
    if session.expands(weights):
        feedback = exhaustive(session, weights, session.params.fb_docs)
        weights = session.expand(weights, feedback)
    return exhaustive(session, weights, limit)


def same_ranking(a: list[Ranked], b: list[Ranked]) -> bool:
    """Same documents in the same order; ties (scores equal to 1e-9) in any order."""
    if len(a) != len(b):
        return False

    def key(hits: list[Ranked]) -> list[tuple[float, int]]:
        return sorted((-round(h.score, 9), h.docid) for h in hits)

    if key(a) == key(b):
        return True
    return [h.docid for h in a] == [h.docid for h in b]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rebuild", action="store_true", help="rebuild both cached indexes")
    parser.add_argument(
        "--rebuild-product",
        action="store_true",
        help="rebuild the product's index only (after a change to its index format)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)

    folder = CACHE / f"query-{args.docs}-{args.seed}"
    meta_path = folder / "meta.json"
    started = time.perf_counter()
    vocab, docs = documents(args.docs, args.seed)
    print(f"{args.docs:,} documents generated in {time.perf_counter() - started:.0f} s")
    if args.rebuild or not meta_path.exists():
        print(f"building the indexes in {folder} …", flush=True)
        meta = build(folder, docs)
        meta["tokens"] = sum(len(b.split()) + len(t.split()) for t, b in docs)
        meta_path.write_text(json.dumps(meta))
    elif args.rebuild_product:
        print(f"building the product's index in {folder} …", flush=True)
        meta = json.loads(meta_path.read_text())
        meta.update(build(folder, docs, stock=False))
        meta_path.write_text(json.dumps(meta))
    meta = json.loads(meta_path.read_text())
    del docs
    queries = make_queries(vocab, args.queries, args.seed)

    product_ix = Index(folder / "product").open()
    stock_ix = whoosh_index.open_dir(str(folder / "stock"))
    product_s = product_ix.searcher(weighting=BM25())
    stock_s = stock_ix.searcher(weighting=scoring.BM25F())
    session = SearchSession(product_s)
    # The reference runs on Whoosh's matchers: an implementation of the formula
    # independent of the array postings the product ranks with.
    reference_session = ReferenceSession(product_s)
    print(
        "product ranks on "
        + ("the array postings" if session.arrays is not None else "Whoosh's matchers")
        + " (rebuild with --rebuild-product if the index predates them)"
    )
    stock_analyzer = stock_ix.schema["body"].analyzer

    # Warm up both (open posting files, load term infos).
    for text in queries[:20]:
        session.rank(parse_query(text), 10)
        stock_s.search(wq.Or([wq.Term("body", t.text) for t in stock_analyzer(text)]), limit=10)

    rank_ms, plain_ms, count_ms, stock_ms, equal = [], [], [], [], 0
    mismatches: list[str] = []
    for text in queries:
        t0 = time.perf_counter()
        q = parse_query(text)
        wquery = session.query(q)
        hits = session.rank(q, 10, wquery=wquery)
        t1 = time.perf_counter()
        session.count(q, wquery)  # of the scores the ranking kept, as a result page counts
        t2 = time.perf_counter()
        session.rank(q, 10, expand=False)
        plain_ms.append((time.perf_counter() - t2) * 1000)
        words = [t.text for t in stock_analyzer(text)]
        stock_q = wq.Or([wq.Term(f, w) for w in words for f in ("title", "body")])
        t3 = time.perf_counter()
        stock_s.search(stock_q, limit=10)
        t4 = time.perf_counter()
        rank_ms.append((t1 - t0) * 1000)
        count_ms.append((t2 - t1) * 1000)
        stock_ms.append((t4 - t3) * 1000)
        if same_ranking(hits, reference(reference_session, text)):
            equal += 1
        else:
            mismatches.append(text)

    figures = {
        "docs": args.docs,
        "queries": len(queries),
        **meta,
        "product_rank_p50_ms": statistics.median(rank_ms),
        "product_rank_p95_ms": pct(rank_ms, 0.95),
        "product_plain_p50_ms": statistics.median(plain_ms),
        "product_plain_p95_ms": pct(plain_ms, 0.95),
        "product_count_p50_ms": statistics.median(count_ms),
        "product_count_p95_ms": pct(count_ms, 0.95),
        "stock_p50_ms": statistics.median(stock_ms),
        "stock_p95_ms": pct(stock_ms, 0.95),
        "same_top10_share": equal / len(queries),
        "product_segments": len(product_s.reader().leaf_readers()),
    }
    figures["p95_ratio"] = figures["stock_p95_ms"] / figures["product_rank_p95_ms"]
    figures["p95_ratio_no_expansion"] = figures["stock_p95_ms"] / figures["product_plain_p95_ms"]
    print(
        f"\n{args.docs:,} documents, {meta['tokens']:,} words; built in "
        f"{meta['product_build_s']:.0f} s (product), {meta['stock_build_s']:.0f} s (stock)"
    )
    print(
        f"{len(queries)} queries of 1–5 words; the product's index has "
        f"{figures['product_segments']} segments\n"
    )
    print(f"{'':28s}{'p50 ms':>10s}{'p95 ms':>10s}")
    print(
        f"{'product, top 10':28s}{figures['product_rank_p50_ms']:10.1f}"
        f"{figures['product_rank_p95_ms']:10.1f}"
    )
    print(
        f"{'product, no expansion':28s}{figures['product_plain_p50_ms']:10.1f}"
        f"{figures['product_plain_p95_ms']:10.1f}"
    )
    print(
        f"{'product, hit count':28s}{figures['product_count_p50_ms']:10.1f}"
        f"{figures['product_count_p95_ms']:10.1f}"
    )
    print(
        f"{'stock Whoosh BM25F (OR)':28s}{figures['stock_p50_ms']:10.1f}"
        f"{figures['stock_p95_ms']:10.1f}"
    )
    print(
        f"\np95 stock / product top 10: {figures['p95_ratio']:.1f}x (target ≥ 10x); "
        f"without query expansion {figures['p95_ratio_no_expansion']:.1f}x"
    )
    print(
        f"same top 10 as the exhaustive reference: {equal}/{len(queries)} "
        f"({100 * figures['same_top10_share']:.1f} %, target ≥ 95 %)"
    )
    if mismatches:
        print("  differing queries (first 5):", "; ".join(mismatches[:5]))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
