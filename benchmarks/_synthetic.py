"""Synthetic text shared by the benchmarks: a Zipf vocabulary of pseudo-words, queries.

- :func:`vocabulary` makes *n* distinct pronounceable pseudo-words (never containing the
  letter ``q``, so words with a ``q`` can serve as unique markers);
- :func:`zipf_cum_weights` gives the cumulative weights of a Zipf law over its ranks (for
  ``random.choices(cum_weights=...)``, or ``numpy.searchsorted``);
- :func:`make_queries` draws queries of 1–5 words the way people type them.

``benchmarks/query.py`` (documents for an index) and ``benchmarks/scale.py`` (pages of a
web site) both draw from them.
"""

from __future__ import annotations

import random

VOCABULARY = 60_000
"""Distinct words of the vocabulary."""
ZIPF_S = 1.07
"""Exponent of the Zipf law over the vocabulary's ranks."""

_ONSETS = "b c d f g h j k l m n p r s t v z br ch dr gr kl pl sh st tr".split()
_VOWELS = "a e i o u ai ea ou".split()
_CODAS = ["", "", "n", "r", "s", "l", "m", "k", "nd", "st"]


def vocabulary(n: int, rng: random.Random) -> list[str]:
    """*n* distinct pronounceable pseudo-words (2–4 syllables), rank order random."""
    words: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        syllables = rng.choice((2, 2, 3, 3, 3, 4))
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)
        )
        if word not in words:
            words.add(word)
            out.append(word)
    return out


def zipf_cum_weights(n: int, s: float = ZIPF_S) -> list[float]:
    """Cumulative weights ``sum(1 / r**s for r <= rank)`` of ranks 1..*n*."""
    cum: list[float] = []
    total = 0.0
    for r in range(1, n + 1):
        total += 1.0 / r**s
        cum.append(total)
    return cum


def make_queries(vocab: list[str], count: int, seed: int) -> list[str]:
    """*count* queries of 1–5 words (30 %, 30 %, 20 %, 12 %, 8 %): 80 % of the words from
    mid-frequency ranks (300–20,000), 20 % from frequent ones (20–300); the few hundred
    most frequent words are never typed."""
    rng = random.Random(seed + 1000)
    queries = []
    for _ in range(count):
        n = rng.choices((1, 2, 3, 4, 5), weights=(30, 30, 20, 12, 8))[0]
        words = []
        for _ in range(n):
            if rng.random() < 0.8:
                words.append(vocab[rng.randint(300, 20_000)])
            else:
                words.append(vocab[rng.randint(20, 300)])
        queries.append(" ".join(words))
    return queries
