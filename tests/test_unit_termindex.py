"""The term index of every segment the codec writes (search.arraycodec): Whoosh's
``OrderedHashWriter`` whose 256 buckets keep each key's hash and position in arrays
(search.w3terms.HashBucket) instead of a tuple a key, from its first key; the file is
Whoosh's, byte for byte."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

from whoosh.filedb.filestore import FileStorage
from whoosh.filedb.filetables import OrderedHashReader, OrderedHashWriter

from search.w3terms import HashBucket


def keys(n: int, seed: int = 3) -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    words = {
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyzé日") for _ in range(rng.randint(1, 12)))
        for _ in range(n)
    }
    return [(w.encode(), rng.randbytes(rng.randint(1, 30))) for w in sorted(words)]


def write(path: Path, items: list[tuple[bytes, bytes]], compact: bool) -> bytes:
    storage = FileStorage(str(path.parent))
    writer = OrderedHashWriter(storage.create_file(path.name))
    if compact:
        writer.buckets = [HashBucket() for _ in range(256)]
    for key, value in items:
        writer.add(key, value)
    writer.close()
    return path.read_bytes()


def test_the_term_index_is_whooshs(tmp_path: Path) -> None:
    items = keys(5000)
    ours = write(tmp_path / "ours.trm", items, compact=True)
    assert ours == write(tmp_path / "whoosh.trm", items, compact=False)
    storage = FileStorage(str(tmp_path))
    reader = OrderedHashReader(storage.open_file("ours.trm"))
    for key, value in items[::97]:
        assert reader[key] == value
    assert reader.closest_key(items[10][0] + b"\0") == items[11][0]
    reader.close()


def test_an_empty_term_index_is_whooshs(tmp_path: Path) -> None:
    assert write(tmp_path / "a.trm", [], compact=True) == write(
        tmp_path / "b.trm", [], compact=False
    )


def test_the_term_index_holds_a_few_bytes_a_key(tmp_path: Path) -> None:
    """Whoosh's buckets hold a tuple of two ints a key (~120 bytes): at a merge of 85,000
    pages, ~300,000 keys, ~37 MB until the segment is closed."""
    items = keys(40_000)
    storage = FileStorage(str(tmp_path))
    held = {}
    for compact in (False, True):
        writer = OrderedHashWriter(storage.create_file(f"{compact}.trm"))
        if compact:
            writer.buckets = [HashBucket() for _ in range(256)]
        tracemalloc.start()
        for key, value in items:
            writer.add(key, value)
        held[compact] = tracemalloc.get_traced_memory()[0] / len(items)
        tracemalloc.stop()
        writer.close()
    assert held[True] < 30 < 90 < held[False], held
