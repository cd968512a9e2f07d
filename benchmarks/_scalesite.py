"""The synthetic site of ``benchmarks/scale.py``: its pages (title, meta description and
keywords, Zipf text, ~30 links, one marker word each), their paths, and the folder a site is
generated into once and cached.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import _corpus
import _synthetic
import numpy as np

SITE_FORMAT = 1
"""Bumped when the generated pages change, so that an old cached site is not reused."""
FANOUT = 8
LINKS = 30
MEDIAN_WORDS = 600
MARKERS = 100

_MARKER_LETTERS = "bcdfghjklmnprstvwxyz"


def marker(n: int) -> str:
    """Page *n*'s marker: ``q`` + *n* in base 20 + ``zq``. The vocabulary has no ``q``,
    and a ``zq`` ending is left alone by the stemmers."""
    digits = ""
    while True:
        n, digit = divmod(n, len(_MARKER_LETTERS))
        digits = _MARKER_LETTERS[digit] + digits
        if n == 0:
            return f"q{digits}zq"


def page_path(n: int) -> str:
    """Page *n*'s URL path."""
    return "/index.html" if n == 0 else f"/p/{n // 1000}/{n}.html"


def site_dir(pages: int, seed: int) -> Path:
    return _corpus.BENCH_DIR / ".cache" / "scale" / f"site-{pages}-{seed}-v{SITE_FORMAT}"


def _links(n: int, pages: int, rng: random.Random) -> list[int]:
    targets = [] if n == 0 else [(n - 1) // FANOUT]
    targets += [c for c in range(FANOUT * n + 1, FANOUT * n + FANOUT + 1) if c < pages]
    if n + 1 < pages:
        targets.append(n + 1)
    chosen = set(targets)
    while len(targets) < min(LINKS, pages - 1):
        t = rng.randrange(pages)
        if t != n and t not in chosen:
            chosen.add(t)
            targets.append(t)
    return targets


class Words:
    """Draws words of the vocabulary by their Zipf frequencies."""

    def __init__(self, seed: int) -> None:
        self.vocab = _synthetic.vocabulary(_synthetic.VOCABULARY, random.Random(seed))
        cum = np.array(_synthetic.zipf_cum_weights(_synthetic.VOCABULARY))
        self.cdf = cum / cum[-1]
        self.np_rng = np.random.default_rng(seed)

    def draw(self, k: int) -> list[str]:
        ranks = np.searchsorted(self.cdf, self.np_rng.random(k), side="right")
        return [self.vocab[i] for i in np.minimum(ranks, len(self.vocab) - 1).tolist()]


def _page_html(n: int, pages: int, words: Words, rng: random.Random) -> str:
    title = " ".join(words.draw(rng.randint(3, 9))).capitalize()
    description = " ".join(words.draw(rng.randint(12, 25))).capitalize() + "."
    keywords = ", ".join(words.draw(rng.randint(3, 6)))
    length = max(150, int(rng.lognormvariate(math.log(MEDIAN_WORDS), 0.25)))
    body = words.draw(length)
    body.insert(rng.randrange(len(body) + 1), marker(n))
    paragraphs = []
    start = 0
    while start < len(body):
        end = start + rng.randint(40, 120)
        paragraphs.append("<p>" + " ".join(body[start:end]).capitalize() + ".</p>")
        start = end
    links = "\n".join(
        f'<li><a href="{page_path(t)}">{" ".join(words.draw(rng.randint(1, 3)))}</a></li>'
        for t in _links(n, pages, rng)
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n"
        f'<meta name="description" content="{description}">\n'
        f'<meta name="keywords" content="{keywords}">\n'
        f"</head>\n<body>\n<h1>{title}</h1>\n" + "\n".join(paragraphs) + "\n"
        f"<ul>\n{links}\n</ul>\n</body>\n</html>\n"
    )


def generate_site(pages: int, seed: int) -> Path:
    """The site's folder, generated unless a complete one is cached.

    Pages are written into a temporary folder renamed when complete; ``site.json`` (its
    parameters) is the last file written.
    """
    target = site_dir(pages, seed)
    if (target / "site.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"generating {pages:,} pages into {target} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    words = Words(seed)
    rng = random.Random(seed + 1)
    root = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    root.chmod(0o755)  # mkdtemp's 0700 would keep nginx's workers out
    try:
        (root / "robots.txt").write_text("User-agent: *\nAllow: /\n", encoding="ascii")
        for n in range(pages):
            path = root / page_path(n).lstrip("/")
            if n == 1 or n % 1000 == 0:
                path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_page_html(n, pages, words, rng), encoding="utf-8")
        manifest = {"pages": pages, "seed": seed, "format": SITE_FORMAT}
        (root / "site.json").write_text(json.dumps(manifest) + "\n", encoding="utf-8")
        if target.exists():  # a partial folder left by something else
            shutil.rmtree(target)
        root.rename(target)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    print(f"  generated in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return target
