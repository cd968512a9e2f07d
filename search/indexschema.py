"""The index's schema: the document's id, URL and host, and the one scored field,
``words``, fed with a document's stems already analyzed (:class:`PreAnalyzed`: per stem its
weighted count, rounded and exact, and its weighted count per section, in one fixed-size
value Whoosh keeps through segment merges).  The rest of the Whoosh adapter is
:mod:`search.index`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from whoosh.fields import ID, STORED, FieldType, Schema
from whoosh.formats import Frequency
from whoosh.system import unpack_uint

from search.arrayfile import FIELD, VALUE_SIZE, section_value

#: The one scored field: every section's stems, weighted.
WORDS_FIELD = FIELD


def _pre_analyzed(value: Any) -> dict[str, tuple[int, float, Sequence[float] | None]]:
    if isinstance(value, str):  # a plain string: one term per whitespace-separated word
        counts: dict[str, int] = {}
        for word in value.split():
            counts[word] = counts.get(word, 0) + 1
        return {w: (c, float(c), None) for w, c in counts.items()}
    return {k: (v[0], v[1], v[2] if len(v) > 2 else None) for k, v in value.items()}


class SectionFrequency(Frequency):
    """Whoosh's frequency format, whose value also carries the posting's weighted count
    per section (:func:`search.arrayfile.section_value`): fixed-size, so that Whoosh
    keeps it through segment merges."""

    posting_size = VALUE_SIZE

    def decode_frequency(self, valuestring: bytes) -> int:
        return int(unpack_uint(valuestring[:4])[0])

    def decode_weight(self, valuestring: bytes) -> float:
        return self.decode_frequency(valuestring) * self.field_boost


class PreAnalyzed(FieldType):
    """A text field fed with ``{stem: (freq, weight, weighted count per section)}``
    instead of a string (the sections may be left out: the weight counts as body)."""

    def __init__(self) -> None:
        self.format = SectionFrequency()
        self.analyzer = None
        self.scorable = True
        self.stored = False
        self.unique = False
        self.vector = None
        self.column_type = None

    def index(self, value: Any, **kwargs: Any) -> Iterator[tuple[bytes, int, float, bytes]]:
        for stem, (count, weight, sections) in _pre_analyzed(value).items():
            # The value is fixed-size (a varint breaks segment merges).
            yield stem.encode("utf-8"), count, weight, section_value(count, weight, sections)

    def process_text(self, qstring: str, mode: str = "", **kwargs: Any) -> Iterator[str]:
        # Query terms are analyzed by search.analysis before they reach Whoosh.
        return iter(qstring.split())

    def self_parsing(self) -> bool:
        return False


def make_schema() -> Schema:
    fields: dict[str, Any] = {
        "docid": ID(stored=True, unique=True),
        "url": STORED(),
        "host": ID(),
    }
    fields[WORDS_FIELD] = PreAnalyzed()
    return Schema(**fields)


def postings(
    weights: Mapping[str, float], sections: Mapping[str, Sequence[float]] | None = None
) -> dict[str, tuple[int, float, Sequence[float] | None]]:
    """The ``words`` field of a document: per stem, (rounded, exact) weighted count and
    its weighted count per section (None: not given, the weight counts as body)."""
    sections = sections or {}
    return {s: (max(1, round(w)), w, sections.get(s)) for s, w in weights.items() if w > 0}
