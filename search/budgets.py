"""Default sizes of the crawl's buffers and caches that more than one room reads: the
crawl's settings (:mod:`spidersite.crawlsettings`), the worker's configuration
(:mod:`search.worker`) and the module that uses each (:mod:`search.index`,
:mod:`search.store`).  This module imports nothing, so that the crawler reads them without
loading Whoosh, SQLAlchemy's models or numpy.
"""

from __future__ import annotations

#: Megabytes of postings a Whoosh writer holds in memory (its ``limitmb``: Whoosh counts
#: each posting's Python objects, within ~10 % of what they take); past it the writer sorts
#: them into a run on disk, and merges the runs when it commits.  Segment merges go through
#: the same buffer, so this bounds a merge's memory too (with the array postings' own
#: buffer, :data:`search.arrayfile.BUFFER_POSTINGS`).  It holds only the postings of the
#: fields other than ``words`` (each document's id and host: two a document), and a merge
#: into a segment of 85,000 documents held all of them under 32 MB: +35 MB at the
#: indexer's peak and +34 MB after it (freed objects in the allocator's arenas), measured
#: by ``benchmarks/indexmem.py``.  At 4 MB they go to runs on disk past ~23,000 postings,
#: and the merge takes no longer.
LIMITMB = 4

#: Bytes of the store's cache of stem ids (``STORE_WORD_CACHE``): ~130 a stem of 8
#: letters, so 8 MB hold ~60,000 stems (a language's common words; a stem past them is
#: read again from the database after the cache starts again).  (16 MB before
#: 2026-12-04: the analysis processes' memory took its place.  4 MB, tried 2026-12-05,
#: cost the worker 4 % more CPU a page on 5,000 pages of the synthetic site: the stems
#: of a batch read again after each new start.)
WORD_CACHE_BYTES = 8 * 1024 * 1024
