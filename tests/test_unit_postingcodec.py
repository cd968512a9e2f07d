"""A document's postings packed into one row (search.postingcodec): the stored bytes, and
back."""

from __future__ import annotations

import numpy as np
import pytest

from search import postingcodec
from search.postingcodec import decode, encode


def test_a_documents_postings_are_packed_in_word_id_order() -> None:
    packed = encode([7, 2], ["Vacuums", "lock"], [3, 0, 1, 0, 0, 0, 1, 4, 0, 0, 0, 2], [5.5, 17.25])
    assert packed.word_ids == bytes([2, 0, 0, 0, 7, 0, 0, 0])
    assert packed.surfaces == b"lock\x00Vacuums"
    assert packed.counts == bytes([1, 1, 4, 0, 0, 0, 2, 3, 0, 1, 0, 0, 0])
    assert packed.weights == np.array([17.25, 5.5], dtype="<f8").tobytes()
    got = decode(packed.word_ids, packed.counts, packed.surfaces, packed.weights)
    assert got.word_ids.tolist() == [2, 7]
    assert got.surfaces == ["lock", "Vacuums"]
    assert got.counts.tolist() == [[1, 4, 0, 0, 0, 2], [3, 0, 1, 0, 0, 0]]
    assert got.weights is not None and got.weights.tolist() == [17.25, 5.5]
    only = decode(packed.word_ids, packed.counts)
    assert only.surfaces is None and only.weights is None and len(only) == 2


@pytest.mark.parametrize(("top", "width"), [(255, 1), (256, 2), (65535, 2), (65536, 4)])
def test_counts_take_the_width_of_the_largest(top: int, width: int) -> None:
    packed = encode([1, 2], ["a", "b"], [top, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0], [1.0, 2.0])
    assert packed.counts[0] == width and len(packed.counts) == 1 + 12 * width
    assert decode(packed.word_ids, packed.counts).counts[0, 0] == top


def test_surface_forms_round_trip_cut_and_without_zero_bytes() -> None:
    surfaces = ["naïve", "日本語", "", "x" * 200, "a\x00b"]
    packed = encode(range(1, 6), surfaces, [1] * 30, [1.0] * 5)
    got = decode(packed.word_ids, packed.counts, packed.surfaces).surfaces
    assert got == ["naïve", "日本語", "", "x" * postingcodec.SURFACE_CHARS, "ab"]
    one = encode([9], [""], [0] * 6, [0.0])
    assert decode(one.word_ids, one.counts, one.surfaces).surfaces == [""]


def test_bad_postings_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        encode([3, 1, 3], ["a", "b", "c"], [0] * 18, [0.0] * 3)
    with pytest.raises(ValueError, match="4 bytes"):
        encode([1], ["a"], [2**32, 0, 0, 0, 0, 0], [0.0])
    with pytest.raises(ValueError, match="negative"):
        encode([1], ["a"], [-1, 0, 0, 0, 0, 0], [0.0])
    with pytest.raises(ValueError, match="differ in length"):
        encode([1, 2], ["a"], [0] * 12, [0.0, 0.0])
    with pytest.raises(ValueError, match="unknown width"):
        decode(bytes(4), bytes([3]) + bytes(6))
    with pytest.raises(ValueError, match="rows of counts"):
        decode(bytes(8), bytes([1]) + bytes(6))
