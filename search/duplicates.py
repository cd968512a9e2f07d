"""Duplicates among stored pages, marked as each batch is stored (in its transaction):
exact duplicates by content checksum (``clone_of_id``: kept out of the index) and
near-duplicates by simhash (``near_duplicate_of_id``: recorded, still indexed; see
:mod:`search.simhash` for the fingerprint, the threshold and the bounded lookups).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, or_, select, update
from sqlalchemy.orm import aliased

from search.db import chunks
from search.models import Document
from search.rows import DocumentRow
from search.simhash import SimhashIndex, fingerprint, to_signed, to_unsigned


def with_checksums(checksums: Sequence[str]) -> Any:
    """The stored documents of *checksums*, by id: looked up by checksum alone (its index,
    migration 0009), the rest of a clone's test made by the caller.  Given
    ``clone_of_id IS NULL`` as well, SQLite chose that column's index, which nearly every
    page matches: a scan of the documents table for every batch stored."""
    return (
        select(
            Document.id, Document.checksum, Document.kind, Document.gone_at, Document.clone_of_id
        )
        .where(Document.checksum.in_(list(checksums)))
        .order_by(Document.id)
    )


def orphaned(originals: Sequence[int] | None = None) -> Any:
    """``(id, checksum, clone_of_id)`` of the live exact duplicates (of the documents
    *originals*, or of any) whose original no longer holds their content: it is gone, or
    no longer stored, its content changed, or it is now a duplicate itself."""
    original = aliased(Document)
    of = Document.clone_of_id
    return (
        select(Document.id, Document.checksum, of)
        .outerjoin(original, original.id == of)
        .where(
            # Without originals, a range of the index on clone_of_id (SQLite does not take
            # IS NOT NULL to it): a scan of the documents reads every page's text on SQLite.
            of > 0 if originals is None else of.in_(originals),
            Document.gone_at.is_(None),
            Document.checksum.is_not(None),
            or_(
                original.id.is_(None),
                original.gone_at.is_not(None),
                original.checksum.is_distinct_from(Document.checksum),
                original.clone_of_id.is_not(None),
            ),
        )
    )


class DuplicateMarker:
    """The duplicate marks of one store: the near-duplicate index of the stored pages'
    fingerprints is loaded from the database on first use and kept up to date."""

    def __init__(self) -> None:
        self._simhashes: SimhashIndex | None = None

    def forget(self) -> None:
        """Drop the fingerprints held in memory (a transaction that added some rolled
        back): they are loaded again from the database on next use."""
        self._simhashes = None

    def mark_clones(
        self, conn: Any, rows: list[DocumentRow], ids: dict[str, int]
    ) -> dict[int, int]:
        """Exact duplicates: a page whose content checksum equals an earlier page's is
        recorded as a clone of it (``clone_of_id``) and kept out of the index."""
        sums = {
            r.values["checksum"]
            for r in rows
            if r.values.get("checksum") and r.values.get("kind") == "page"
        }
        if not sums:
            return {}
        first: dict[str, int] = {}
        for part in chunks(sorted(sums)):
            for did, checksum, kind, gone_at, clone_of in conn.execute(with_checksums(part)):
                if kind == "page" and gone_at is None and clone_of is None:
                    first.setdefault(checksum, did)
        clones: dict[int, int] = {}
        for r in rows:
            did = ids[r.url]
            original = first.get(r.values.get("checksum") or "")
            if original is not None and original != did:
                clones[did] = original
        for did, original in clones.items():
            conn.execute(update(Document).where(Document.id == did).values(clone_of_id=original))
        return clones

    def promote_orphans(self, conn: Any, originals: Sequence[int]) -> list[int]:
        """The exact duplicates of the documents *originals* (just stored again, or gone)
        whose original no longer holds their content: it is gone, its content changed, or
        it is now a duplicate of another page.  Each such group of pages of one content
        gets a new original: a live original of that content stored since, else the
        group's first page, which is no longer a duplicate (it is to be indexed: its id
        is returned), the others its duplicates.  Without this, the page a site still
        serves stays out of the index once the page it copied is gone."""
        orphans: dict[str, list[int]] = {}
        for part in chunks(sorted(set(originals))):
            for did, checksum, _ in conn.execute(orphaned(part)):
                orphans.setdefault(checksum, []).append(did)
        promoted: list[int] = []
        for checksum, group in orphans.items():
            members = set(group)
            live = [
                did
                for did, _, kind, gone_at, clone_of in conn.execute(with_checksums([checksum]))
                if did not in members and kind == "page" and gone_at is None and clone_of is None
            ]
            new = live[0] if live else min(group)
            if not live:
                promoted.append(new)
                conn.execute(update(Document).where(Document.id == new).values(clone_of_id=None))
            rest = [did for did in group if did != new]
            for part in chunks(rest):
                conn.execute(update(Document).where(Document.id.in_(part)).values(clone_of_id=new))
        return promoted

    def load(self, conn: Any) -> None:
        """Read the stored pages' fingerprints into the near-duplicate index, unless held
        already (before a batch's own are written: they are added as it is marked)."""
        if self._simhashes is not None:
            return
        query = (
            select(Document.id, Document.simhash)
            .where(
                Document.simhash.is_not(None),
                Document.gone_at.is_(None),
                # A clone's fingerprint is its original's: not compared twice (as in a batch).
                Document.clone_of_id.is_(None),
            )
            .order_by(Document.id)
            .execution_options(yield_per=20_000)
        )
        self._simhashes = SimhashIndex(
            (did, to_unsigned(value)) for did, value in conn.execute(query)
        )

    def discard(self, doc_ids: Sequence[int]) -> None:
        """Hold no fingerprint of the documents *doc_ids* (gone), as :meth:`load` reads
        none of a gone page."""
        if self._simhashes is not None:
            for did in doc_ids:
                self._simhashes.discard(did)

    @staticmethod
    def fingerprints(rows: list[DocumentRow]) -> dict[str, int | None]:
        """The fingerprint (simhash of its body's word shingles; None for too few words,
        or none at all) of each page of *rows*, by URL: what its upsert writes as
        ``simhash`` (:func:`fingerprint_columns`) and :meth:`mark_near_duplicates` tests.
        A page stored again without words has none, and keeps none from before."""
        return {r.url: fingerprint(r.values.get("text")) if r.words else None for r in rows}

    def mark_near_duplicates(
        self,
        conn: Any,
        ids: dict[str, int],
        clones: dict[int, int],
        fingerprints: dict[str, int | None],
    ) -> dict[int, int]:
        """Record the earlier page each page of *fingerprints* (:meth:`fingerprints`, which
        their upsert wrote, the index read by :meth:`load` before it) nearly duplicates, if
        any (see :mod:`search.simhash` for the threshold and the bound on the candidates
        compared): only the pages with one are updated."""
        self.load(conn)
        assert self._simhashes is not None
        near: dict[int, int] = {}
        for url, value in fingerprints.items():  # in the batch's order
            did = ids[url]
            if value is None or did in clones:
                # An exact duplicate's fingerprint is its original's: not added twice (nor
                # kept from when the page held other content).
                self._simhashes.discard(did)
                continue
            other = self._simhashes.nearest(value, exclude=did)
            self._simhashes.add(did, value)
            if other is not None and other < did:
                near[did] = other
        if near:
            conn.execute(
                update(Document)
                .where(Document.id == bindparam("doc_id"))
                .values(near_duplicate_of_id=bindparam("near")),
                [{"doc_id": did, "near": other} for did, other in near.items()],
            )
        return near


def fingerprint_columns(value: int | None) -> dict[str, Any]:
    """What a page's upsert writes for the near-duplicate test: its fingerprint *value*,
    and no near-duplicate yet (:meth:`DuplicateMarker.mark_near_duplicates` writes the one
    it finds)."""
    return {"simhash": None if value is None else to_signed(value), "near_duplicate_of_id": None}
