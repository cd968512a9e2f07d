"""search.simhash: fingerprints, distances, the band index."""

from __future__ import annotations

from search.simhash import (
    NEAR_DUPLICATE_BITS,
    SimhashIndex,
    distance,
    simhash,
    to_signed,
    to_unsigned,
)


def test_distance_counts_differing_bits() -> None:
    assert distance(0b1011, 0b0001) == 2
    assert distance(0, (1 << 64) - 1) == 64


def test_signed_round_trip() -> None:
    for value in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
        signed = to_signed(value)
        assert -(1 << 63) <= signed < 1 << 63
        assert to_unsigned(signed) == value


def test_similar_pages_are_close_and_different_pages_far() -> None:
    page = {f"w{i}": float(1 + i % 5) for i in range(200)}
    edited = dict(page, extra=1.0)
    other = {f"x{i}": float(1 + i % 5) for i in range(200)}
    assert distance(simhash(page), simhash(edited)) <= NEAR_DUPLICATE_BITS
    assert distance(simhash(page), simhash(other)) > 10
    assert simhash({}) == 0


def test_index_finds_the_earliest_near_duplicate() -> None:
    base = simhash({f"w{i}": 1.0 for i in range(100)})
    index = SimhashIndex([(5, base), (9, base ^ 0b111), (12, base ^ ((1 << 20) - 1))])
    assert index.nearest(base ^ 0b1) == 5
    assert index.nearest(base, exclude=5) == 9
    assert index.nearest(base ^ ((1 << 64) - 1)) is None
