"""search.ranking: query weights and pseudo-relevance feedback, worked out by hand."""

from __future__ import annotations

import pytest

from search.ranking import (
    bo1_terms,
    bo1_weight,
    feedback_terms,
    position_weight,
    query_weights,
    rm3_terms,
)


def test_position_weight_is_capped() -> None:
    assert position_weight(4, 0.25) == pytest.approx(0.5)  # 1 / (1 + 0.25 × 4)
    assert position_weight(30, 0.25) == pytest.approx(0.5)


def test_query_weights_count_repeats_at_first_position() -> None:
    # vacuum: twice, position 0 -> 2 × 1; full: position 1 -> 0.8; lock: position 2 -> 1/1.5
    weights = query_weights(["vacuum", "full", "vacuum", "lock"], decay=0.25)
    assert weights == pytest.approx({"vacuum": 2.0, "full": 0.8, "lock": 1 / 1.5})


def test_feedback_terms_by_hand() -> None:
    query = {"a": 1.0, "b": 0.5}
    docs = [{"a": 2.0, "x": 4.0, "y": 1.0}, {"x": 2.0, "y": 1.0, "only": 9.0}]
    # means: x 3, y 1; a (1) and only (4.5) are in one document only: dropped
    # scale = 0.5 × max qw 1 / heaviest 3 = 1/6
    expanded = feedback_terms(docs, query, terms=2, beta=0.5)
    assert expanded == pytest.approx({"a": 1.0, "b": 0.5, "x": 0.5, "y": 1 / 6})


def test_feedback_terms_nothing_to_add() -> None:
    assert feedback_terms([], {"a": 1.0}) == {"a": 1.0}
    assert feedback_terms([{"a": 1.0}], {"a": 1.0}, beta=0) == {"a": 1.0}


def test_rm3_terms_by_hand() -> None:
    query = {"a": 1.0, "b": 0.5}  # Σ qw = 1.5
    docs = [{"a": 2.0, "x": 4.0, "y": 1.0, "z": 1.0}, {"x": 1.0, "y": 1.0}]
    scores = [3.0, 1.0]
    # The whole document models: d1 / 8, d2 / 2.
    # P(t|R) ∝ Σ P(t|d) · score(d): x 4/8·3 + 1/2·1 = 2, a 2/8·3 = 0.75,
    # y 1/8·3 + 1/2·1 = 0.875, z 1/8·3 = 0.375
    # the 2 heaviest: x 2, y 0.875 (total 2.875); weight 0.5: scale = 1 × 1.5 / 2.875
    expanded = rm3_terms(docs, scores, query, terms=2, weight=0.5)
    scale = 1.5 / 2.875
    assert expanded == pytest.approx({"a": 1.0, "b": 0.5, "x": scale * 2.0, "y": scale * 0.875})


def test_rm3_terms_whole_document_lengths() -> None:
    """A document's length counts the stems left out of its vector (frequent ones), and a
    stem tied at the cut with many others is not chosen by its spelling alone: every
    stem of a document counts, not only its heaviest few."""
    query = {"a": 1.0}
    # "m" occurs once in each of the two documents, each of the others once in one:
    # cut to 2 stems per document first, "m" would lose to "b", "c" by spelling.
    docs = [{"b": 1.0, "c": 1.0, "m": 1.0}, {"d": 1.0, "e": 1.0, "m": 1.0}]
    expanded = rm3_terms(docs, [1.0, 1.0], query, terms=1, weight=0.5, doc_lengths=[6.0, 3.0])
    # m: 1/6 + 1/3 = 0.5, the only term; weight 0.5: scale = 1 × 1 / 0.5
    assert expanded == pytest.approx({"a": 1.0, "m": 1.0})


def test_rm3_terms_weight_of_the_query() -> None:
    query = {"a": 1.0}
    docs = [{"x": 1.0}]
    # q' = w · q / Σq + (1 − w) · P(t|R), scaled by Σq / w: x gets (1 − w) / w
    assert rm3_terms(docs, [2.0], query, weight=0.25) == pytest.approx({"a": 1.0, "x": 3.0})
    assert rm3_terms(docs, [2.0], query, weight=1.0) == query
    assert rm3_terms([], [], query) == query
    assert rm3_terms([{}], [1.0], query) == query


def test_bo1_weight_by_hand() -> None:
    # tfx 4, Pn = 4 / 10: 4 · log2(1.4 / 0.4) + log2(1.4)
    assert bo1_weight(4.0, 4.0, 10) == pytest.approx(4 * 1.8073549 + 0.4854268)
    # Pn 1: tfx · 1 + 1
    assert bo1_weight(3.0, 10.0, 10) == pytest.approx(4.0)


def test_bo1_terms_by_hand() -> None:
    query = {"a": 2.0, "b": 1.0}  # max qw 2
    docs = [{"a": 2.0, "x": 3.0, "y": 1.0}, {"x": 1.0, "y": 2.0, "z": 5.0}, {"y": 1.0, "a": 1.0}]
    cf = {"a": 10.0, "x": 4.0, "y": 20.0, "z": 50.0}
    # z is in one feedback document only: no candidate.  tfx: a 3, x 4, y 4; Pn = cf / 10
    # w(x) = 4 · log2(1.4 / 0.4) + log2(1.4) = 7.714847, w(a) = 3 · log2(2) + log2(2) = 4,
    # w(y) = 4 · log2(3 / 2) + log2(3) = 3.924813: the two heaviest x, a, scaled 2 / w(x)
    wx = 4 * 1.8073549 + 0.4854268
    expanded = bo1_terms(docs, cf, 10, query, terms=2)
    assert expanded == pytest.approx({"a": 2.0 + 2 * 4 / wx, "b": 1.0, "x": 2.0}, rel=1e-6)
    three = bo1_terms(docs, cf, 10, query, terms=3)
    assert three["y"] == pytest.approx(2 * (4 * 0.5849625 + 1.5849625) / wx, rel=1e-6)
    assert "z" not in three
    assert bo1_terms([], cf, 10, query) == query


def test_query_weights_decay_keyword_queries_only() -> None:
    # Three distinct words decay (the default limit); a fourth makes every word weigh alike,
    # repeats still counted; decay_words 0 decays every query.
    assert query_weights(["a", "b", "c"]) == pytest.approx({"a": 1.0, "b": 0.8, "c": 1 / 1.5})
    four = ["a", "b", "c", "a", "d"]
    assert query_weights(four) == {"a": 2.0, "b": 1.0, "c": 1.0, "d": 1.0}
    assert query_weights(four, 0.25, 4) == pytest.approx(
        {"a": 2.0, "b": 0.8, "c": 1 / 1.5, "d": 1 / 1.75}
    )
    assert query_weights(four, 0.25, 0) == query_weights(four, 0.25, 4)


def test_query_weights_without_decay_count_only_repeats() -> None:
    assert query_weights(["vacuum", "full", "vacuum", "lock"], decay=0.0) == {
        "vacuum": 2.0,
        "full": 1.0,
        "lock": 1.0,
    }
