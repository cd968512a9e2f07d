"""The analyzer's CPU time per page, on the corpus's real pages.

    python benchmarks/analysiscost.py                 # every page of the three sites
    python benchmarks/analysiscost.py --pages 200     # 200 pages a site (fixed seed)
    python benchmarks/analysiscost.py --texts         # Analyzer.words of French, Hindi, NFD
    python benchmarks/analysiscost.py --differ --baseline DIR   # pages read differently

What a crawl's analysis process does with a page once it is extracted: the words of its
main content and of its whole text (:func:`search.content.split_content`'s two calls of
:meth:`search.analysis.Analyzer.words`), its boilerplate as the words of the one less the
other, and its records (:func:`search.analysis.analyze_packed`: folded, counted, stemmed,
weighed).  The pages are extracted first (``extract_html`` and trafilatura's main text,
not timed); one pass warms the caches (stems, jieba's dictionary), then ``--rounds``
passes are timed with ``time.process_time`` (CPU time: a busy machine slows the figure
less than wall time), per site: ms a page, and µs a word read.

``--baseline DIR`` measures the analyzer of another checkout beside this one, in the same
process (``DIR/search/analysis.py`` loaded as a module of its own; it must not import
modules this checkout lacks), the two in turn, round by round: a busy machine then slows
both alike.  The ratio is this checkout's time over the baseline's.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from search import analysis
from search.content import main_text
from spidersite.extract import extract_html

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extraction import site_pages

ROOT = Path(__file__).resolve().parents[1]
SITES = {
    "python-3.11-docs": "en",
    "postgresql-15-docs": "en",
    "debian-reference-zh-cn": "zh",
}

Page = tuple[str, str, str, str]  # url, title, whole text, main text


def load(corpus: Path, per_site: int) -> dict[str, list[Page]]:
    """Each site's pages, extracted: (url, title, whole text, main text)."""
    rng = random.Random(1)
    out: dict[str, list[Page]] = {}
    for site in SITES:
        chosen = site_pages(corpus, site, per_site, rng)
        pages = []
        for name, html in chosen:
            url = f"http://corpus.example/{name}"
            ex = extract_html(url, html, "utf-8")
            main = main_text(html, "utf-8") or ex.text
            pages.append((url, ex.title or "", ex.text, main))
        out[site] = pages
    return out


def analyze(module: ModuleType, page: Page, language: str) -> int:
    """The analysis of one page by the analyzer *module*, as an analysis process makes it;
    the words read."""
    url, title, text, main = page
    analyzer = module.get_analyzer(language)
    main_words = analyzer.words(main)
    whole = analyzer.words(text)
    boilerplate = module.remainder_words(whole, main_words)
    sections = module.page_sections(url, title, main_words, None, None, boilerplate)
    module.analyze_packed(sections, None, language)
    return len(main_words) + len(whole)


def records(module: ModuleType, page: Page, language: str) -> dict[str, tuple[Any, ...]]:
    """The records of *page* by the analyzer *module*, as plain tuples (two modules'
    records are objects of two classes)."""
    url, title, text, main = page
    analyzer = module.get_analyzer(language)
    main_words = analyzer.words(main)
    boilerplate = module.remainder_words(analyzer.words(text), main_words)
    sections = module.page_sections(url, title, main_words, None, None, boilerplate)
    packed = module.analyze_packed(sections, None, language)
    return {k: (r.stem, r.surface, r.counts, r.weight) for k, r in packed.records().items()}


def differ(modules: dict[str, ModuleType], sites: dict[str, list[Page]]) -> None:
    """How many pages of each site the two analyzers analyze differently, and the stems
    that only one of them gives."""
    old, new = modules.values()
    for site, pages in sites.items():
        changed = 0
        only: set[str] = set()
        for page in pages:
            before, after = records(old, page, SITES[site]), records(new, page, SITES[site])
            if before != after:
                changed += 1
                only |= set(before).symmetric_difference(after)
        print(f"{site:<24} {len(pages):>6} pages, {changed} analyzed differently; stems of one")
        print(f"  analyzer only: {' '.join(sorted(only)) or '-'}")


def baseline(folder: Path) -> ModuleType:
    """The analyzer module of the checkout in *folder*."""
    spec = importlib.util.spec_from_file_location(
        "baseline_analysis", folder / "search" / "analysis.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def timed(module: ModuleType, pages: list[Page], language: str) -> tuple[float, int]:
    """CPU seconds of one pass over *pages*, and the words read."""
    words = 0
    t0 = time.process_time()
    for page in pages:
        words += analyze(module, page, language)
    return time.process_time() - t0, words


#: Texts of other scripts and forms than the corpus's, ~10,000 words each: its words
#: repeated (the analyzer's caches then hold them all, as on a real site's pages).
TEXTS = {
    "French (accents, NFC)": "Les élèves étudient à l’école, où les professeurs expliquent "
    "les leçons de français et d’histoire ; après les cours, ils déjeunent au café près "
    "de la bibliothèque municipale, puis révisent leurs exercices préférés.",
    "Hindi (Devanagari)": "हिन्दी भारत की राजभाषा है और इसे देवनागरी लिपि में लिखा जाता है। "
    "भाषा के विकास में साहित्य, पत्रकारिता और शिक्षा का महत्वपूर्ण योगदान रहा है।",
    "English (ASCII)": "The planner chooses an index scan when the table is large and the "
    "condition selects few rows; otherwise a sequential scan reads every page once.",
}


def text_rows(modules: dict[str, ModuleType], rounds: int) -> None:
    """:meth:`Analyzer.words` of each text of :data:`TEXTS`, and of the French one in
    decomposed form (NFD), by each analyzer: µs a word."""
    import unicodedata

    texts = {name: " ".join([text] * 400) for name, text in TEXTS.items()}
    french = texts["French (accents, NFC)"]
    texts["French (accents, NFD)"] = unicodedata.normalize("NFD", french)
    for name, text in texts.items():
        results: dict[str, list[float]] = {label: [] for label in modules}
        n = 1
        for _ in range(rounds):
            for label, module in modules.items():
                analyzer = module.get_analyzer("fr" if "French" in name else "en")
                analyzer.words(text)
                t0 = time.process_time()
                n = len(analyzer.words(text))
                results[label].append(time.process_time() - t0)
        medians = {label: statistics.median(r) for label, r in results.items()}
        for label, seconds in medians.items():
            ratio = seconds / medians["baseline"] if "baseline" in medians else 1.0
            per_word = 1e6 * seconds / n
            print(f"{name:<24} {label:<9} {n:>6} words {per_word:>8.3f} µs/word {ratio:>6.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--pages", type=int, default=0, help="pages a site (0: all)")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes")
    parser.add_argument("--baseline", type=Path, help="a checkout to compare with")
    parser.add_argument(
        "--texts", action="store_true", help="Analyzer.words of other scripts' texts only"
    )
    parser.add_argument(
        "--differ", action="store_true", help="the pages the two analyzers read differently"
    )
    args = parser.parse_args()
    if args.differ and not args.baseline:
        parser.error("--differ compares with a --baseline")
    if args.texts:
        modules = {"this": analysis}
        if args.baseline:
            modules = {"baseline": baseline(args.baseline), **modules}
        text_rows(modules, max(args.rounds, 5))
        return
    sites = load(args.corpus, args.pages)
    modules = {"this": analysis}
    if args.baseline:
        modules = {"baseline": baseline(args.baseline), **modules}
    if args.differ:
        differ(modules, sites)
        return
    for module in modules.values():  # the warm-up pass
        for site, pages in sites.items():
            timed(module, pages, SITES[site])
    print(f"{'site':<24} {'analyzer':<9} {'pages':>6} {'ms/page':>8} {'µs/word':>8} {'ratio':>6}")
    for site, pages in sites.items():
        rounds: dict[str, list[float]] = {name: [] for name in modules}
        words = 0
        for _ in range(args.rounds):
            for name, module in modules.items():
                seconds, words = timed(module, pages, SITES[site])
                rounds[name].append(seconds)
        medians = {name: statistics.median(r) for name, r in rounds.items()}
        for name, seconds in medians.items():
            ratio = seconds / medians["baseline"] if "baseline" in medians else 1.0
            print(
                f"{site:<24} {name:<9} {len(pages):>6} {1000 * seconds / len(pages):>8.3f} "
                f"{1e6 * seconds / max(words, 1):>8.3f} {ratio:>6.3f}"
            )


if __name__ == "__main__":
    main()
