"""The report of ``benchmarks/crawl.py``: its table of runs, and the product's rates over
the baseline's against the targets (stored 5x, searchable 3x)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawl import RunResult

STORED_TARGET = 5.0
SEARCHABLE_TARGET = 3.0

COLUMNS = (
    ("run", "run", "{}"),
    ("responses", "responses", "{:,}"),
    ("documents", "documents", "{:,}"),
    ("elapsed_s", "elapsed s", "{:.1f}"),
    ("pages_per_s", "pages/s", "{:.1f}"),
    ("stored_per_s", "stored pages/s", "{:.1f}"),
    ("searchable_per_s", "searchable pages/s", "{:.1f}"),
    ("peak_rss_mb", "peak RSS MB", "{:.0f}"),
)


def fmt(value: Any, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def print_table(results: list[RunResult]) -> None:
    rows = [[header for _, header, _ in COLUMNS]]
    rows += [[fmt(getattr(r, key), pattern) for key, _, pattern in COLUMNS] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        print("  ".join(cells))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def ratios(baseline: RunResult | None, product: RunResult | None) -> dict[str, Any]:
    """The product's stored and searchable rates over the baseline's pages/s."""
    out: dict[str, Any] = {}
    base = baseline.pages_per_s if baseline else None
    for name, attr, target in (
        ("stored", "stored_per_s", STORED_TARGET),
        ("searchable", "searchable_per_s", SEARCHABLE_TARGET),
    ):
        value = getattr(product, attr) if product else None
        ratio = value / base if value is not None and base else None
        out[name] = {
            "ratio": ratio,
            "target": target,
            "met": None if ratio is None else ratio >= target,
        }
    return out


def print_ratios(found: dict[str, Any]) -> None:
    print()
    for name, entry in found.items():
        ratio, target = entry["ratio"], entry["target"]
        if ratio is None:
            verdict = "n/a (needs both runs)"
        else:
            verdict = f"{ratio:.2f}x  ({'meets' if entry['met'] else 'below'} the target)"
        print(f"{name} pages/s vs baseline pages/s: {verdict}; target {target:g}x")
