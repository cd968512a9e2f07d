"""Main-content extraction: each extractor's CPU time per page and what it keeps.

    python benchmarks/extraction.py                  # 150 + 150 pages of the corpus
    python benchmarks/extraction.py --pages 0        # every page of both sites
    python benchmarks/extraction.py --costs-only     # only the crawl's costs per page

Pages are drawn (fixed seed) from the Python and PostgreSQL documentation of
``../shared/corpus``.  For each extractor: CPU time per page (``time.process_time``, so a
busy machine slows the figure less than wall time), and the words it keeps against a
reference main text read from each site's own markup (Sphinx's ``div[role=main]`` less its
navigation; DocBook's page less ``navheader`` and ``navfooter``): precision (its words that
are the reference's) and recall (the reference's words it keeps), as bags of words,
averaged over the pages.  Also the whole pipeline's costs per page: ``extract_html`` (the
reactor's), :func:`search.content.split_content` and the analysis (the worker's).

jusText and readability-lxml are measured when installed (they are not dependencies).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import tarfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import lxml.html

from search.analysis import analyze_document, page_sections
from search.content import main_text, split_content
from spidersite.extract import extract_html

ROOT = Path(__file__).resolve().parents[1]
SITES = ("python-3.11-docs", "postgresql-15-docs")
_WORD = re.compile(r"\w+")
_CHROME = (
    "//script|//style|//head|//div[@class='navheader']|//div[@class='navfooter']"
    "|//div[@class='related']|//div[@class='sphinxsidebar']|//div[@class='footer']"
)


def site_pages(
    corpus: Path, site: str, per_site: int, rng: random.Random
) -> list[tuple[str, bytes]]:
    """The HTML pages (name, bytes) of the corpus site *site*, by name; *per_site* of them
    drawn by *rng* when that is fewer (0: all). ``benchmarks/analysiscost.py`` reads the
    corpus through it too."""
    with tarfile.open(corpus / f"{site}.tar.gz") as tar:
        found = [
            (m.name, f.read())
            for m in tar
            if m.isfile() and m.name.endswith(".html")
            for f in [tar.extractfile(m)]
            if f is not None
        ]
    found.sort()
    return rng.sample(found, per_site) if 0 < per_site < len(found) else found


def load(corpus: Path, per_site: int) -> list[tuple[str, bytes]]:
    pages: list[tuple[str, bytes]] = []
    rng = random.Random(1)
    for site in SITES:
        pages += site_pages(corpus, site, per_site, rng)
    return pages


def reference(html: bytes) -> str:
    root = lxml.html.fromstring(html)
    for el in root.xpath(_CHROME):
        el.drop_tree()
    main = root.xpath("//div[@role='main']")
    return str((main[0] if main else root).text_content())


def bag(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text))


def extractors() -> dict[str, Callable[[bytes], str]]:
    out: dict[str, Callable[[bytes], str]] = {
        "whole page (extract_html)": lambda b: extract_html("http://x/", b, "utf-8").text,
        "trafilatura (fast), the product's": lambda b: main_text(b, "utf-8") or "",
    }
    try:
        import trafilatura

        out["trafilatura (with its fallbacks)"] = lambda b: (
            trafilatura.extract(b.decode("utf-8", "replace"), include_comments=False) or ""
        )
    except ImportError:
        pass
    try:
        import justext

        stop = justext.get_stoplist("English")
        out["jusText"] = lambda b: " ".join(
            p.text for p in justext.justext(b, stop) if not p.is_boilerplate
        )
    except ImportError:
        pass
    try:
        from readability import Document

        out["readability-lxml"] = lambda b: str(
            lxml.html.fromstring(Document(b.decode("utf-8", "replace")).summary()).text_content()
        )
    except ImportError:
        pass
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    p.add_argument("--pages", type=int, default=150, help="pages per site (0: all)")
    p.add_argument("--costs-only", action="store_true", help="only the pipeline's costs")
    args = p.parse_args()
    pages = load(args.corpus, args.pages)
    refs = [bag(reference(html)) for _, html in pages]
    print(f"{len(pages)} pages, {sum(len(h) for _, h in pages) / len(pages) / 1024:.0f} KB each")
    print("| extractor | CPU ms/page | words kept | precision | recall | recall < 0.5 |")
    print("|---|---|---|---|---|---|")
    for name, fn in ({} if args.costs_only else extractors()).items():
        fn(pages[0][1])  # imports, caches
        precision, recall, kept = [], [], []
        spent = 0.0
        for (_, html), ref in zip(pages, refs, strict=True):
            started = time.process_time()
            got = bag(fn(html))
            spent += time.process_time() - started
            common = sum((got & ref).values())
            precision.append(common / max(1, sum(got.values())))
            recall.append(common / max(1, sum(ref.values())))
            kept.append(sum(got.values()))
        print(
            f"| {name} | {1000 * spent / len(pages):.1f} | {statistics.mean(kept):.0f} "
            f"| {statistics.mean(precision):.3f} | {statistics.mean(recall):.3f} "
            f"| {sum(r < 0.5 for r in recall)} |"
        )
    # The pipeline: the reactor's parse, the worker's split and analysis; a first pass
    # warms the analyzer's stem cache, as a crawl's worker has it, and is not counted.
    costs: Counter[str] = Counter()
    for _, html in pages + pages:
        t0 = time.process_time()
        ex = extract_html("http://x/", html, "utf-8")
        t1 = time.process_time()
        whole = analyze_document(page_sections("http://x/", ex.title, ex.text))
        t2 = time.process_time()
        content = split_content(html, ex.text, "utf-8", "en")
        t3 = time.process_time()
        if content is not None:
            analyze_document(
                page_sections("http://x/", ex.title, content.main, boilerplate=content.boilerplate)
            )
        t4 = time.process_time()
        costs["reactor: extract_html"] += t1 - t0
        costs["worker, before: analysis of the whole text"] += t2 - t1
        costs["worker, after: split_content"] += t3 - t2
        costs["worker, after: analysis of main + boilerplate"] += t4 - t3
        del whole
        costs["pages"] += 1
        if costs["pages"] == len(pages):  # the warm-up pass ends
            costs.clear()
            costs["pages"] = len(pages)
    del costs["pages"]
    for name, seconds in costs.items():
        print(f"{name}: {1000 * seconds / len(pages):.1f} ms/page")


if __name__ == "__main__":
    main()
