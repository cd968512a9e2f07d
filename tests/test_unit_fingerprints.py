"""The crawl's set of scheduled URLs as 8-byte fingerprints (search/fingerprints.py)."""

from __future__ import annotations

import random

import pytest

from search import fingerprints
from search.fingerprints import FingerprintSet


def test_behaves_as_a_set_across_merges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fingerprints, "PENDING", 64)  # many merges on a small set
    rng = random.Random(7)
    urls = [f"http://example.org/p/{i}.html" for i in range(2000)]
    seen = FingerprintSet()
    model: set[str] = set()
    for _ in range(6000):
        url = rng.choice(urls)
        if rng.random() < 0.2:
            seen.discard(url)
            model.discard(url)
        else:
            seen.add(url)
            model.add(url)
        assert len(seen) == len(model)
    assert all((url in seen) == (url in model) for url in urls)
    assert "http://example.org/elsewhere" not in seen
    assert 1 not in seen  # not a URL


def test_costs_about_eight_bytes_a_url() -> None:
    seen = FingerprintSet(f"http://example.org/{i}" for i in range(3 * fingerprints.PENDING))
    assert len(seen) == 3 * fingerprints.PENDING
    # Everything merged but the last batch: 8 bytes each in the sorted array.
    assert seen.nbytes == 8 * (len(seen) - len(seen._added))
    assert len(seen._added) < fingerprints.PENDING
