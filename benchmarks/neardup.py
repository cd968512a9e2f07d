"""The store's near-duplicate step per page, at a given number of stored pages.

Pages of the synthetic site's kind (``_synthetic``: ~600 words of a Zipf vocabulary) are
fingerprinted and looked up in a :class:`search.simhash.SimhashIndex` the way
``DuplicateMarker.mark_near_duplicates`` does (fingerprint, ``nearest``, ``add``), without
the database.  At each checkpoint the next ``--window`` pages are timed.  Prints the time
per page, the candidates compared and the pages marked::

    python benchmarks/neardup.py --pages 20000 --at 1000,20000

The fingerprint is taken from the code under test: the shingle fingerprint of the page's
text (``search.simhash.fingerprint``), or, on older code that has none, the simhash of the
page's weighted stems (the analysis itself is not timed).
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import _synthetic

from search import simhash as sh
from search.analysis import analyze_document


def pages(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    vocab = _synthetic.vocabulary(_synthetic.VOCABULARY, rng)
    cum = _synthetic.zipf_cum_weights(_synthetic.VOCABULARY)
    return [
        " ".join(rng.choices(vocab, cum_weights=cum, k=max(50, int(rng.lognormvariate(6.4, 0.25)))))
        for _ in range(count)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--at", default="1000,20000", help="stored pages at which to time")
    parser.add_argument("--window", type=int, default=300, help="pages timed per checkpoint")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    checkpoints = sorted(int(x) for x in args.at.split(","))
    texts = pages(max(checkpoints) + args.window, args.seed)
    shingled = hasattr(sh, "fingerprint")

    def prepare(text: str) -> Any:
        if shingled:
            return text
        sections = {"body": text, "title": "", "url": "", "desc": "", "keywords": ""}
        return {stem: rec.weight for stem, rec in analyze_document(sections).items()}

    def value_of(page: Any) -> int:
        return sh.fingerprint(page) if shingled else sh.simhash(page)  # type: ignore[no-any-return]

    index = sh.SimhashIndex()
    marked = 0
    done = 0
    for at in checkpoints:
        while done < at:  # fill to the checkpoint, untimed
            index.add(done + 1, value_of(prepare(texts[done])))
            done += 1
        window = [prepare(t) for t in texts[done : done + args.window]]
        compared = 0
        start = time.perf_counter()
        for page in window:
            done += 1
            value = value_of(page)
            if index.nearest(value, exclude=done) is not None:
                marked += 1
            index.add(done, value)
        seconds = time.perf_counter() - start
        if hasattr(index, "candidates"):
            compared = sum(len(index.candidates(value_of(p))) for p in window[:50]) // 50
        print(
            f"{at:>7,} stored: {seconds / len(window) * 1000:.3f} ms a page "
            f"({'shingles' if shingled else 'heaviest stems'}), "
            f"{compared or '?'} candidates a lookup, {marked} marked so far"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
