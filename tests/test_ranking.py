"""search.ranking: query weights and pseudo-relevance feedback, worked out by hand."""

from __future__ import annotations

import pytest

from search.ranking import feedback_terms, position_weight, query_weights


def test_position_weight_is_capped() -> None:
    assert position_weight(4) == pytest.approx(0.5)  # 1 / (1 + 0.25 × 4)
    assert position_weight(30) == pytest.approx(0.5)


def test_query_weights_count_repeats_at_first_position() -> None:
    # vacuum: twice, position 0 -> 2 × 1; full: position 1 -> 0.8; lock: position 2 -> 1/1.5
    weights = query_weights(["vacuum", "full", "vacuum", "lock"])
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
