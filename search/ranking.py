"""Scoring, as pure functions.

A hit's score is Whoosh's BM25F over the five section fields, where each query word's
contribution is multiplied by its *position weight*: the words typed first count most, as
in the design documents' vector-space ranking.

    score(d, q) = Σ_i  pw(i) · Σ_f  BM25(idf_f(t_i), tf_f(t_i, d), len_f(d), avglen_f)

    pw(i) = 1 / (1 + POSITION_DECAY · i)          i = 0 for the first query word

``tf_f`` is the word's count in section f times the server's weight for f (title 4, URL 2,
description 2, keywords 2, body 1 by default), so a word in the title counts four times.
With ``POSITION_DECAY = 0.25`` the first word weighs 1, the second 0.8, the third 0.67,
the fourth 0.57: enough to order results by what the user typed first, never enough for a
later word to be ignored.
"""

from __future__ import annotations

import math

#: How fast the weight of later query words decreases.
POSITION_DECAY = 0.25

#: BM25 parameters (Whoosh's defaults).
K1 = 1.2
B = 0.75


def position_weight(position: int, decay: float = POSITION_DECAY) -> float:
    """Weight of the query word at 0-based *position*."""
    if position < 0:
        raise ValueError("position must be >= 0")
    return 1.0 / (1.0 + decay * position)


def idf(doc_count: int, doc_freq: int) -> float:
    """Whoosh's BM25 idf: log(1 + (N - n + 0.5) / (n + 0.5))."""
    return math.log(1.0 + (doc_count - doc_freq + 0.5) / (doc_freq + 0.5))


def bm25(
    idf_value: float,
    tf: float,
    field_length: float,
    avg_length: float,
    b: float = B,
    k1: float = K1,
) -> float:
    """One term's BM25 contribution in one field."""
    if avg_length <= 0:
        avg_length = 1.0
    norm = tf / ((1 - b) + b * field_length / avg_length)
    return idf_value * ((k1 + 1) * norm) / (k1 + norm)
