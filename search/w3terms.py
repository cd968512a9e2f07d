"""Whole posting lists written in Whoosh's W3 format (:func:`write_terms`), for the codec's
field writer (:meth:`search.arraycodec._FieldWriter.add_terms`): the bytes that Whoosh's
``start_term``, one ``add`` a posting and ``finish_term`` write (its posting blocks, of
128 postings at most, pickled and compressed, and the term index's entry of each term),
byte for byte, with the per-term bookkeeping done in one loop and each file written once
a call, instead of through Whoosh's objects term after term.

What it reproduces is Whoosh 2.7's ``W3PostingsWriter._write_block``,
``W3PostingsWriter.finish_postings``, ``W3TermInfo.add_block`` and ``to_bytes``, and
``OrderedHashWriter.add``; ``tests/test_unit_indexwriter.py`` and
``tests/test_unit_rebuild.py`` compare the files with Whoosh's own.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from whoosh.codec.whoosh3 import WHOOSH3_HEADER_MAGIC, W3TermInfo
from whoosh.compat import dumps
from whoosh.system import pack_int, pack_long, pack_ushort
from whoosh.util.numeric import length_to_byte

#: A term index entry's key and value lengths (``whoosh.filedb.filetables._lengths``).
_LENGTHS = struct.Struct("!ii")
_TERMINFO = W3TermInfo._struct


class HashBucket:
    """One of the 256 buckets of Whoosh's term index (``HashWriter.buckets``): each key's
    hash (32 bits) and position, in the order they were added, in two arrays: 12 bytes a
    term instead of a tuple of two ints (~125 bytes), for a table that holds every term of
    the segment until it is closed.  ``HashWriter`` appends ``(hash, position)`` pairs
    and reads them back in that order when it writes its hash tables, as from a list."""

    __slots__ = ("hashes", "positions")

    def __init__(self) -> None:
        self.hashes = array("I")
        self.positions = array("q")

    def append(self, entry: tuple[int, int]) -> None:
        self.hashes.append(entry[0])
        self.positions.append(entry[1])

    def __len__(self) -> int:
        return len(self.hashes)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self.hashes, self.positions, strict=True)


@dataclass(slots=True)
class _OpenTerm:
    """A term whose posting list goes on in the next call of :func:`write_terms`: where
    it starts in the postings file, its postings and first document so far, and its
    term information so far (Whoosh's ``W3TermInfo``)."""

    offset: int
    postings: int
    first: int
    weight: Any
    minlength: Any
    maxlength: Any
    maxweight: Any


def write_terms(
    fieldwriter: Any,
    texts: list[bytes],
    cuts: list[int],
    docs: np.ndarray,
    weights: np.ndarray,
    lengths: np.ndarray,
    values: bytes,
    vsize: int,
    more: bool = False,
) -> None:
    """Write the posting lists of the terms *texts* of the field being written by
    *fieldwriter* (a ``W3FieldWriter``): term ``texts[i]`` has the postings
    ``cuts[i]:cuts[i + 1]`` of the documents *docs* (ascending within a term), with
    their *weights* (``float64``), their documents' field *lengths* and their *values*
    (*vsize* bytes each, joined).

    With *more*, the last term goes on in the next call, whose first term it is: its
    postings here must be a whole number of blocks, and its entry in the term index is
    written when it ends (what it has so far is kept on *fieldwriter*)."""
    postwriter = fieldwriter._postwriter
    size = postwriter._blocklimit
    comp = postwriter._compression
    postfile = postwriter._postfile
    tindex = fieldwriter._tindex
    hashfn = tindex.hashfn
    buckets = tindex.buckets
    index_append = tindex.index.append
    fieldid = pack_ushort(fieldwriter._fieldid)

    docs64 = docs.astype(np.int64)
    # Each block's ids: its first document, then the differences (Whoosh's delta_encode).
    deltas = np.diff(docs64, prepend=0)
    n = len(docs64)
    firsts = np.zeros(n, dtype=bool)
    cut_a = np.asarray(cuts, dtype=np.int64)
    of_term = np.repeat(np.arange(len(texts)), np.diff(cut_a))
    firsts[(np.arange(n) - cut_a[of_term]) % size == 0] = True
    deltas[firsts] = docs64[firsts]
    deltas_l = deltas.tolist()
    docs_l = docs64.tolist()
    w64 = weights.tolist()
    w32 = weights.astype(np.float32).tolist()
    lengths_l = np.asarray(lengths, dtype=np.int64).tolist()

    post_pos = postfile.tell()
    term_pos = tindex.dbfile.tell()
    posts: list[bytes] = []
    entries: list[bytes] = []
    key = tindex.lastkey
    going_on: _OpenTerm | None = getattr(fieldwriter, "_open_term", None)
    fieldwriter._open_term = None
    last = len(texts) - 1
    for i, btext in enumerate(texts):
        start, end = cuts[i], cuts[i + 1]
        ends = not (more and i == last)
        if not ends and (end - start) % size:
            raise ValueError(f"a term goes on after {end - start} postings, not whole blocks")
        if i == 0 and going_on is not None:
            startoffset, before, first_doc = going_on.offset, going_on.postings, going_on.first
            t_weight: Any = going_on.weight
            t_minlength: Any = going_on.minlength
            t_maxlength: Any = going_on.maxlength
            t_maxweight: Any = going_on.maxweight
        else:
            startoffset, before, first_doc = post_pos, 0, docs_l[start]
            t_weight, t_minlength, t_maxlength, t_maxweight = 0, None, 0, 0
            posts.append(WHOOSH3_HEADER_MAGIC)
            post_pos += len(WHOOSH3_HEADER_MAGIC)
        lo = start
        while lo < end:
            hi = min(lo + size, end)
            ws = w32[lo:hi]
            first = ws[0]
            if ws.count(first) == len(ws):
                mini = None if first == 1.0 else first
            else:
                mini = tuple(ws)
            data = zlib.compress(
                dumps((tuple(deltas_l[lo:hi]), mini, values[vsize * lo : vsize * hi]), 2), comp
            )
            chunk = lengths_l[lo:hi]
            minlength, maxlength = min(chunk), max(0, max(chunk))
            maxweight = max(0.0, max(w64[lo:hi]))
            info = dumps(
                (
                    hi - lo,
                    docs_l[hi - 1],
                    maxweight,
                    comp,
                    length_to_byte(minlength),
                    length_to_byte(maxlength),
                ),
                2,
            )
            blocklength = len(info) + len(data)
            posts.append(pack_int(-blocklength if hi == end and ends else blocklength))
            posts.append(info)
            posts.append(data)
            post_pos += 4 + blocklength
            # W3TermInfo.add_block
            t_weight += sum(ws)
            t_minlength = minlength if t_minlength is None else min(t_minlength, minlength)
            t_maxlength = max(t_maxlength, maxlength)
            t_maxweight = max(t_maxweight, maxweight)
            lo = hi
        if not ends:
            fieldwriter._open_term = _OpenTerm(
                startoffset,
                before + end - start,
                first_doc,
                t_weight,
                t_minlength,
                t_maxlength,
                t_maxweight,
            )
            break
        value = (
            _TERMINFO.pack(
                0,
                t_weight,
                before + end - start,
                0 if t_minlength is None else length_to_byte(t_minlength),
                length_to_byte(t_maxlength),
                t_maxweight,
                first_doc,
                docs_l[end - 1],
            )
            + pack_long(startoffset)
            + pack_int(post_pos - startoffset)
        )
        # OrderedHashWriter.add
        new_key = fieldid + btext
        if new_key <= key:
            raise ValueError(f"Keys must increase: {key!r}..{new_key!r}")
        key = new_key
        index_append(term_pos)
        entries.append(_LENGTHS.pack(len(key), len(value)))
        entries.append(key)
        entries.append(value)
        h = hashfn(key)
        buckets[h & 255].append((h, term_pos))
        term_pos += _LENGTHS.size + len(key) + len(value)
    postfile.write(b"".join(posts))
    tindex.dbfile.write(b"".join(entries))
    tindex.lastkey = key
