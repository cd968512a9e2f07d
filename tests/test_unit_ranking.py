"""Unit tests for search.ranking: position weights, idf and BM25 worked out by hand."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from search.ranking import DEFAULT, K1, Params, bm25, idf, position_weight


def test_defaults_are_the_published_ones() -> None:
    # BM25's k1 1.2, b 0.75 (Robertson's, Whoosh's); RM3 as Anserini runs it (fbDocs 10,
    # fbTerms 10, originalQueryWeight 0.5); decay 0.25 on keyword queries of up to 3
    # distinct words (CISI's questions measure decays 0 to 0.4 alike; the design documents'
    # rule stays where the first word is the topic); the link-graph prior at 0.5 (the
    # navigational test's cross-validated weight).
    assert Params(1.2, 0.75, 0.25, "rm3", 10, 10, 0.5, 0.5) == DEFAULT
    assert DEFAULT.decay_words == 3
    # Expansion of queries of 4 distinct words or more (short queries are most queries,
    # and an expanded one is ranked twice: at 100,000 pages every query expanded puts the
    # web API's p95 above its target), on indexes of 100 documents or more (10 feedback
    # documents are a tenth of it) ...
    assert (DEFAULT.fb_min_words, DEFAULT.fb_min_docs) == (4, 100)
    # ... but for a query whose first ranking's best page holds every one of its words
    # (navigational queries, short or long, lose their page when expanded).
    assert DEFAULT.fb_skip_held == 1
    # BM25F in Robertson & Zaragoza's per-field form, every section's b the same 0.75.
    assert DEFAULT.bm25f == "per-field"
    assert DEFAULT.section_b() == (0.75,) * 6
    # BM25F alone: DPH and fusion are options.
    assert (DEFAULT.model, DEFAULT.fuse) == ("bm25", "none")


def test_section_scale_of_each_section() -> None:
    assert DEFAULT.section_scale() is None  # the servers' weights as they are
    # body, title, url, desc, keywords, boilerplate
    assert Params(w_title=2, w_boilerplate=0).section_scale() == (1, 2, 1, 1, 1, 0)
    assert DEFAULT.with_values(w_url="0.5").section_scale() == (1, 1, 0.5, 1, 1, 1)
    with pytest.raises(ValueError, match="w_title must be >= 0"):
        Params(w_title=-1)
    with pytest.raises(ValueError, match="per-field form"):
        Params(w_title=2, bm25f="merged")
    with pytest.raises(ValueError, match="per-field form"):
        Params(w_title=2, model="dph")
    assert Params(w_title=2, model="dph", fuse="bm25").section_scale() is not None


@pytest.mark.parametrize("name", [f.name for f in fields(Params) if f.type == "float"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_params_must_be_finite(name: str, value: float) -> None:
    """Every comparison with NaN is false: a NaN k1 or decay would pass every range check
    and rank nothing; an infinite linkrank would put Infinity in JSON."""
    with pytest.raises(ValueError, match=f"^{name} must be a finite number, not "):
        Params(**{name: value})
    with pytest.raises(ValueError, match="must be a finite number"):
        DEFAULT.with_values(**{name: str(value)})


def test_section_b_of_each_section_or_b() -> None:
    p = Params(b=0.5, b_title=0.2, b_boilerplate=0.0)
    # body, title, url, desc, keywords, boilerplate
    assert p.section_b() == (0.5, 0.2, 0.5, 0.5, 0.5, 0.0)
    assert Params(bm25f="merged", b_title=0.2).section_b() is None
    assert DEFAULT.with_values(bm25f="merged", b_url="0.3").b_url == 0.3


@pytest.mark.parametrize(
    "values",
    [
        {"k1": -1},
        {"b": 1.5},
        {"decay": -0.1},
        {"decay_words": -1},
        {"expansion": "x"},
        {"fb_docs": 0},
        {"fb_weight": 0},
        {"fb_min_words": 0},
        {"fb_min_docs": -1},
        {"bm25f": "fielded"},
        {"b_title": 1.5},
        {"model": "lm"},
        {"fuse": "tfidf"},
        {"model": "dph", "fuse": "dph"},
        {"model": "lgd", "fuse": "lgd"},
        {"lgd_c": 0},
        {"lgd_c": -1},
    ],
)
def test_params_out_of_range(values: dict) -> None:
    with pytest.raises(ValueError):
        Params(**values)


def test_params_with_values_converts_and_refuses_unknown_names() -> None:
    p = DEFAULT.with_values(k1="1.2", fb_docs="5", expansion="none")
    assert (p.k1, p.fb_docs, p.expansion, p.b) == (1.2, 5, "none", DEFAULT.b)
    with pytest.raises(ValueError, match="unknown ranking parameter k3"):
        DEFAULT.with_values(k3="1")


@pytest.mark.parametrize(
    ("position", "weight"),
    [
        (0, 1.0),  # 1 / (1 + 0.25×0)
        (1, 0.8),  # 1 / 1.25
        (2, 1 / 1.5),  # 1 / (1 + 0.5)
        (3, 1 / 1.75),  # 1 / (1 + 0.75)
        (4, 0.5),  # 1 / 2
    ],
)
def test_position_weight(position: int, weight: float) -> None:
    assert position_weight(position, decay=0.25) == pytest.approx(weight)


def test_position_weight_default() -> None:
    # decay 0.25: 1, 0.8, 2/3, 4/7, then 0.5 for every later word
    expected = [1.0, 0.8, 2 / 3, 4 / 7, 0.5, 0.5, 0.5]
    assert [position_weight(i) for i in range(7)] == pytest.approx(expected)


def test_position_weight_decreases_but_stays_positive() -> None:
    weights = [position_weight(i, decay=0.25) for i in range(20)]
    assert weights == sorted(weights, reverse=True)
    assert all(w > 0 for w in weights)


def test_position_weight_custom_decay() -> None:
    assert position_weight(2, decay=0.5) == pytest.approx(0.5)  # 1 / (1 + 0.5×2)
    assert position_weight(5, decay=0.0) == 1.0


def test_position_weight_negative_raises() -> None:
    with pytest.raises(ValueError, match="position"):
        position_weight(-1)


def test_idf_by_hand() -> None:
    # N = 10, n = 2: log(1 + (10 - 2 + 0.5) / (2 + 0.5)) = log(1 + 8.5 / 2.5) = log(4.4)
    assert idf(10, 2) == pytest.approx(math.log(4.4))
    # N = 1, n = 1: log(1 + 0.5 / 1.5) = log(4/3)
    assert idf(1, 1) == pytest.approx(math.log(4 / 3))
    # N = 100, n = 0: log(1 + 100.5 / 0.5) = log(202)
    assert idf(100, 0) == pytest.approx(math.log(202))


def test_idf_rarer_words_weigh_more_and_stays_positive() -> None:
    assert idf(1000, 1) > idf(1000, 10) > idf(1000, 999) > 0
    # Even a word in every document keeps a positive idf: log(1 + 0.5 / 1000.5)
    assert idf(1000, 1000) == pytest.approx(math.log(1 + 0.5 / 1000.5))


def test_bm25_by_hand() -> None:
    # idf = 1, tf = 2, field length 10, average 5, b = 0.75, k1 = 1.2:
    #   norm = 2 / (0.25 + 0.75 × 10/5) = 2 / 1.75 = 8/7
    #   bm25 = 1 × (2.2 × 8/7) / (1.2 + 8/7) = (17.6/7) / (16.4/7) = 17.6 / 16.4 = 44/41
    assert bm25(1.0, 2, 10, 5, b=0.75, k1=1.2) == pytest.approx(44 / 41)


def test_bm25_average_length_document() -> None:
    # field_length == avg: norm = tf = 3; bm25 = 2 × (2.2 × 3) / (1.2 + 3) = 13.2 / 4.2 = 22/7
    assert bm25(2.0, 3, 7, 7, k1=1.2) == pytest.approx(22 / 7)


def test_bm25_custom_b_and_k1() -> None:
    # b = 0 (no length normalisation), k1 = 1: norm = tf = 1; bm25 = 3 × 2×1 / (1 + 1) = 3
    assert bm25(3.0, 1, 1000, 1, b=0.0, k1=1.0) == pytest.approx(3.0)


def test_bm25_zero_average_length_counts_as_one() -> None:
    # avg 0 -> 1: norm = 1 / (0.25 + 0.75 × 2/1) = 1 / 1.75 = 4/7
    #   bm25 = (2.2 × 4/7) / (1.2 + 4/7) = (8.8/7) / (12.4/7) = 8.8 / 12.4 = 22/31
    assert bm25(1.0, 1, 2, 0, b=0.75, k1=1.2) == pytest.approx(22 / 31)
    assert bm25(1.0, 1, 2, -5, b=0.75, k1=1.2) == pytest.approx(22 / 31)


def test_bm25_zero_tf() -> None:
    assert bm25(5.0, 0, 10, 5) == 0.0


def test_bm25_saturates_below_idf_times_k1_plus_1() -> None:
    values = [bm25(1.0, tf, 5, 5) for tf in (1, 2, 4, 8, 1000)]
    assert values == sorted(values)
    assert values[-1] < 1.0 * (K1 + 1)


def test_bm25_longer_fields_score_lower() -> None:
    assert bm25(1.0, 2, 5, 10) > bm25(1.0, 2, 10, 10) > bm25(1.0, 2, 40, 10)
