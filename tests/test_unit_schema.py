"""The database schema (search.db.migrate): a new database is created from the models and
stamped at the last migration, an older one is upgraded by the Alembic migrations, and
both ways give the same schema, on SQLite and on PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from search import db
from search.models import Base
from tests.conftest import ROOT


def schema_diff(engine: Any) -> list[Any]:
    """What differs between the database's schema and the models' (Alembic's autogenerate
    comparison: tables, columns, types, nullability, server defaults, indexes, unique and
    foreign keys)."""
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": True}
        )
        return list(compare_metadata(context, Base.metadata))


def without_sqlite_clone_fk(engine: Any, diff: list[Any]) -> list[Any]:
    """*diff* less the one difference migration 0002 documents: SQLite cannot add a foreign
    key to an existing table, so a database migrated there lacks ``documents.clone_of_id``'s
    (ON DELETE SET NULL), which a new one has, as on PostgreSQL."""
    if engine.dialect.name != "sqlite":
        return diff
    return [
        d
        for d in diff
        if not (
            d[0] == "add_fk"
            and d[1].table.name == "documents"
            and [c.name for c in d[1].columns] == ["clone_of_id"]
        )
    ]


def test_schema_revision_is_the_last_migration() -> None:
    config = Config()
    config.set_main_option("script_location", "search:migrations")
    assert ScriptDirectory.from_config(config).get_current_head() == db.SCHEMA_REVISION


def test_the_migrations_make_the_models_schema(db_url: str) -> None:
    """The whole chain of migrations, as an existing database went through it, ends at
    the schema a new database is created with."""
    engine = db.create(db_url)
    try:
        db.run_migrations(engine)
        assert db.schema_revision(engine) == db.SCHEMA_REVISION
        assert without_sqlite_clone_fk(engine, schema_diff(engine)) == []
    finally:
        engine.dispose()


def test_a_new_database_is_created_from_the_models_and_stamped(db_url: str) -> None:
    engine = db.connect(db_url)
    try:
        assert db.schema_revision(engine) == db.SCHEMA_REVISION
        assert schema_diff(engine) == []
        assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
        db.migrate(engine)  # up to date: nothing to do, and no error
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
    finally:
        engine.dispose()


def test_an_older_database_is_upgraded_by_the_migrations(db_url: str) -> None:
    engine = db.create(db_url)
    try:
        db.run_migrations(engine, "0005")
        columns = {c["name"] for c in inspect(engine).get_columns("postings")}
        assert "boilerplate_count" not in columns
        db.migrate(engine)
        assert db.schema_revision(engine) == db.SCHEMA_REVISION
        columns = {c["name"] for c in inspect(engine).get_columns("postings")}
        assert columns == {"document_id", "word_ids", "surfaces", "counts", "weights"}
        assert without_sqlite_clone_fk(engine, schema_diff(engine)) == []
    finally:
        engine.dispose()


def test_a_database_without_tables_is_new_and_one_of_something_else_refused(
    db_url: str,
) -> None:
    """A database without a table is a new one: a command that only reads finds it empty
    (:class:`search.db.EmptyDatabase`), a crawl's :func:`search.db.migrate` creates the
    schema in it.  One that holds another application's tables and no revision is
    refused in one line naming them, and nothing is added to it; one whose creation was
    cut short (some of this project's tables, no revision) is completed."""
    engine = db.create(db_url)
    try:
        with pytest.raises(db.EmptyDatabase):
            db.stored_revision(engine)
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE invoices (id INTEGER PRIMARY KEY)"))
        for step in (db.stored_revision, db.migrate):
            with pytest.raises(db.DatabaseError, match=r"not spidersite's \(invoices\)") as info:
                step(engine)
            assert not isinstance(info.value, db.EmptyDatabase)
        assert inspect(engine).get_table_names() == ["invoices"]
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE invoices"))
        Base.metadata.tables["servers"].create(engine)  # a creation cut short
        with pytest.raises(db.DatabaseError, match="cut short"):
            db.stored_revision(engine)
        db.migrate(engine)
        assert db.stored_revision(engine) == db.SCHEMA_REVISION
        assert schema_diff(engine) == []
    finally:
        engine.dispose()


def test_the_tables_of_an_extension_do_not_make_a_database_someone_elses(pg_url: str) -> None:
    """PostgreSQL extensions may keep tables in the default schema (PostGIS's
    ``spatial_ref_sys``): a database with no other table is a new one, and a crawl
    creates the schema beside them; another application's table is still refused.

    No extension of this server's contrib creates a table (they create functions, types
    and views), so the table is made a member of one (``hstore``, created in the test's
    own database) by ``ALTER EXTENSION … ADD TABLE``: the catalog records it as it records
    a table an extension's script creates (``pg_depend``, ``deptype = 'e'``), and
    ``DROP EXTENSION`` drops it."""
    engine = db.create(pg_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE EXTENSION hstore"))
            conn.execute(text("CREATE TABLE spatial_ref_sys (srid INTEGER PRIMARY KEY)"))
            conn.execute(text("ALTER EXTENSION hstore ADD TABLE spatial_ref_sys"))
        with pytest.raises(db.EmptyDatabase):
            db.stored_revision(engine)
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE invoices (id INTEGER PRIMARY KEY)"))
        with pytest.raises(db.DatabaseError, match=r"not spidersite's \(invoices\)"):
            db.migrate(engine)
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE invoices"))
        db.migrate(engine)
        assert db.stored_revision(engine) == db.SCHEMA_REVISION
        assert "spatial_ref_sys" in inspect(engine).get_table_names()
        with engine.begin() as conn:  # it was the extension's: it goes with it
            conn.execute(text("DROP EXTENSION hstore"))
        assert "spatial_ref_sys" not in inspect(engine).get_table_names()
        assert schema_diff(engine) == []
    finally:
        engine.dispose()


def test_opening_a_new_or_current_database_does_not_load_alembic(tmp_path: Path) -> None:
    """A new database is created in one step and an up-to-date one only read: neither
    loads Alembic (half a second of every crawl's start-up)."""
    url = f"sqlite:///{tmp_path / 'new.db'}"
    code = (
        "import sys; from search import db\n"
        "for _ in range(2):\n"
        "    db.connect(sys.argv[1]).dispose()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, url], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_what_the_store_writes_a_page_keeps_no_index_at_random_places(tmp_path: Path) -> None:
    """A stored page's exact-duplicate lookup reads the checksum's index, not a scan of
    the documents (per batch: quadratic in the crawl); its postings go into no index by
    stem (its upkeep at random places was most of a page's store at size)."""
    from search.duplicates import with_checksums

    engine = db.connect(f"sqlite:///{tmp_path / 'plan.db'}")
    statement = with_checksums(["a" * 64, "b" * 64]).compile(
        engine, compile_kwargs={"literal_binds": True}
    )
    with engine.connect() as conn:
        plan = " ".join(
            str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}")
        )
    assert "USING INDEX ix_documents_checksum" in plan
    indexes = {i["name"] for i in inspect(engine).get_indexes("postings")}
    assert "ix_postings_word_id" not in indexes
    # Nor its links into an index by target (the links by target are rebuilt after).
    links = [i["column_names"][0] for i in inspect(engine).get_indexes("links")]
    assert links == ["from_id"]


def test_the_upgrade_to_links_by_target_builds_them(db_url: str) -> None:
    """Migration 0010 drops the index of the links by target URL and builds the table of
    the links by target document from the links stored so far."""
    from search.crawldb import CrawlDB
    from tests.rowpostings import RowPostingsStore
    from tests.test_unit_crawldb import page

    engine = db.create(db_url)
    try:
        db.run_migrations(engine, "0009")
        one, two = "http://a.example/1", "http://a.example/2"
        RowPostingsStore(engine).write_batch([page(one, links=[(two, "to two", False)]), page(two)])
        assert "ix_links_to_url" in {i["name"] for i in inspect(engine).get_indexes("links")}
        db.migrate(engine)
        assert "ix_links_to_url" not in {i["name"] for i in inspect(engine).get_indexes("links")}
        with engine.connect() as conn:
            two_id = conn.execute(text("SELECT id FROM documents WHERE url = :u"), {"u": two})
            [(linked_from, anchor)] = [
                (r.url, r.anchor) for r in CrawlDB(engine).inbound(two_id.scalar_one())
            ]
        assert (linked_from, anchor) == (one, "to two")
        assert without_sqlite_clone_fk(engine, schema_diff(engine)) == []
    finally:
        engine.dispose()


def _postings_sql(engine: Any) -> str:
    with engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'postings'"
        ).scalar_one()


def test_postings_without_rowid_on_sqlite_upgraded(tmp_path: Path) -> None:
    """Migration 0011 keeps the postings (then a row a stem) in their primary key's b-tree
    (WITHOUT ROWID), copying every posting over; its downgrade gives the table by row id
    back, postings and all.  Since 0014 a new database's postings are a row a document,
    kept by row id (the document's id is the row id)."""
    from tests.rowpostings import RowPostingsStore
    from tests.test_unit_crawldb import page

    new = db.connect(f"sqlite:///{tmp_path / 'new.db'}")
    try:
        assert not _postings_sql(new).rstrip().endswith("WITHOUT ROWID")
    finally:
        new.dispose()
    engine = db.create(f"sqlite:///{tmp_path / 'old.db'}")
    try:
        db.run_migrations(engine, "0010")
        RowPostingsStore(engine).write_batch(
            [page("http://a.example/1"), page("http://a.example/2")]
        )

        def postings() -> list[Any]:
            with engine.connect() as conn:
                query = "SELECT * FROM postings ORDER BY document_id, word_id"
                return [tuple(r) for r in conn.exec_driver_sql(query)]

        before = postings()
        assert before and not _postings_sql(engine).rstrip().endswith("WITHOUT ROWID")
        db.run_migrations(engine, "0011")
        assert _postings_sql(engine).rstrip().endswith("WITHOUT ROWID")
        assert postings() == before
        _downgrade(engine, "0010")
        assert not _postings_sql(engine).rstrip().endswith("WITHOUT ROWID")
        assert postings() == before
    finally:
        engine.dispose()


def _downgrade(engine: Any, revision: str, **attributes: Any) -> None:
    from alembic import command

    config = Config()
    config.attributes["engine"] = engine
    config.attributes.update(attributes)
    with db._migrations_folder() as folder:
        config.set_main_option("script_location", folder)
        command.downgrade(config, revision)


def _foreign_keys(engine: Any) -> dict[str, list[tuple[list[str], str]]]:
    inspector = inspect(engine)
    return {
        table: sorted(
            (fk["constrained_columns"], fk["referred_table"])
            for fk in inspector.get_foreign_keys(table)
        )
        for table in ("postings", "links")
    }


def test_postings_and_links_without_foreign_keys_new_or_upgraded(db_url: str) -> None:
    """A page's postings and links carry no foreign key, in a new database and after
    migration 0012, which drops them on PostgreSQL and edits the table definitions in
    place on SQLite, every row kept; its downgrade puts them back."""
    from tests.rowpostings import RowPostingsStore
    from tests.test_unit_crawldb import page

    none: dict[str, list[Any]] = {"postings": [], "links": []}
    engine = db.create(db_url)
    try:
        db.run_migrations(engine, "0011")
        one, two = "http://a.example/1", "http://a.example/2"
        RowPostingsStore(engine).write_batch([page(one, links=[(two, "to two", False)]), page(two)])
        keys = {
            "postings": [(["document_id"], "documents"), (["word_id"], "words")],
            "links": [(["from_id"], "documents")],
        }
        assert _foreign_keys(engine) == keys

        def rows() -> list[Any]:
            with engine.connect() as conn:
                return [
                    [tuple(r) for r in conn.exec_driver_sql(f"SELECT * FROM {t} ORDER BY 1, 2")]
                    for t in ("postings", "links")
                ]

        before = rows()
        assert before[0] and before[1]
        db.run_migrations(engine, "0012")
        assert _foreign_keys(engine) == none
        assert rows() == before
        # The store still writes through the edited tables (a page stored again).
        RowPostingsStore(engine).write_batch([page(one, links=[(two, "again", False)])])
        if engine.dialect.name == "sqlite":
            with engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
        _downgrade(engine, "0011")
        assert _foreign_keys(engine) == keys
        if engine.dialect.name == "sqlite":
            with engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
                assert list(conn.exec_driver_sql("PRAGMA foreign_key_check")) == []
    finally:
        engine.dispose()


def test_a_new_database_has_no_foreign_keys_per_posting(db_url: str) -> None:
    engine = db.connect(db_url)
    try:
        assert _foreign_keys(engine) == {"postings": [], "links": []}
    finally:
        engine.dispose()


def _persistence(engine: Any) -> str | None:
    """``inlinks``' persistence on PostgreSQL (``u``: unlogged, ``p``: logged)."""
    with engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT relpersistence FROM pg_class WHERE relname = 'inlinks'"
        ).scalar()


def test_a_new_database_keeps_the_links_by_target_without_log(db_url: str) -> None:
    """A new PostgreSQL database's ``inlinks`` is ``UNLOGGED``; SQLite has no such tables
    and makes a plain one."""
    engine = db.connect(db_url)
    try:
        assert inspect(engine).has_table("inlinks")
        if engine.dialect.name == "postgresql":
            assert _persistence(engine) == "u"
    finally:
        engine.dispose()


def test_the_upgrade_keeps_the_links_by_target_without_log(db_url: str) -> None:
    """Migration 0013 makes PostgreSQL's ``inlinks`` ``UNLOGGED``, its rows kept; its
    downgrade logs it again.  On SQLite both are no-ops."""
    from alembic import command

    engine = db.create(db_url)
    try:
        db.run_migrations(engine, "0012")
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO inlinks (to_id, link_id) VALUES (1, 2), (1, 3)")
        postgresql = engine.dialect.name == "postgresql"
        if postgresql:
            assert _persistence(engine) == "p"
        db.run_migrations(engine, "0013")
        assert db.schema_revision(engine) == "0013"
        if postgresql:
            assert _persistence(engine) == "u"
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM inlinks").scalar() == 2
        config = Config()
        config.attributes["engine"] = engine
        with db._migrations_folder() as folder:
            config.set_main_option("script_location", folder)
            command.downgrade(config, "0012")
        if postgresql:
            assert _persistence(engine) == "p"
    finally:
        engine.dispose()


def _row_postings(engine: Any) -> list[tuple[Any, ...]]:
    """The postings of a database before migration 0014, a row a stem: (document, stem,
    surface, six counts, weight)."""
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT p.document_id, w.stem, p.surface, p.body_count, p.title_count, "
            "p.url_count, p.desc_count, p.keywords_count, p.boilerplate_count, p.weight "
            "FROM postings p JOIN words w ON w.id = p.word_id"
        )
        return sorted(tuple(r) for r in rows)


def test_the_upgrade_packs_a_documents_postings_into_one_row(db_url: str, tmp_path: Path) -> None:
    """Migration 0014 converts a row a stem into a row a document, in batches of a few
    postings (a document's rows across a batch's bound, a document of more rows than a
    batch): every stem's surface form, counts and weight are kept, and the index rebuilt
    from the converted rows is the one the old rows made, byte for byte.  The downgrade
    gives the rows a stem back."""
    import random

    from search.index import Index
    from search.reindex import reindex
    from tests.conftest import posting_rows
    from tests.rowpostings import RowPostingsStore
    from tests.test_unit_rebuild import added_one_by_one, page, reference_docs, segment_files

    engine = db.create(db_url)
    try:
        db.run_migrations(engine, "0013")
        rng = random.Random(14)
        words = [f"word{i}" for i in range(200)] + ["Über", "naïve", "café", "日本語"]
        rows = [
            page(f"http://a.example/p{n}", " ".join(rng.choices(words, k=rng.randint(0, 40))))
            for n in range(30)
        ]
        rows.append(page("http://a.example/p30", "zebra " * 300))  # a count of two bytes
        rows.append(page("http://a.example/p31", " ".join(words)))  # more than a batch
        nothing = page("http://a.example/file", "")
        nothing.words = None  # a document without postings
        rows.append(nothing)
        RowPostingsStore(engine).write_batch(rows)
        before = _row_postings(engine)
        assert len({r[0] for r in before}) == 32 and max(r[3] for r in before) == 300
        expected = reference_docs(
            engine,
            postings=[(r[0], r[1], tuple(r[3:9])) for r in before],
        )
        added_one_by_one(tmp_path / "before", expected)

        db.run_migrations(engine, "0014")  # default batches
        _downgrade(engine, "0013")
        assert _row_postings(engine) == before
        config = Config()
        config.attributes["engine"] = engine
        config.attributes["postings_batch"] = 37
        from alembic import command

        with db._migrations_folder() as folder:
            config.set_main_option("script_location", folder)
            command.upgrade(config, "0014")
        assert db.schema_revision(engine) == db.SCHEMA_REVISION
        assert without_sqlite_clone_fk(engine, schema_diff(engine)) == []
        after = [
            (p.document_id, p.stem, p.surface, *p.counts, p.weight) for p in posting_rows(engine)
        ]
        assert after == before
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM postings").scalar() == 32
        index = Index(tmp_path / "after")
        assert reindex(engine, index, batch_size=7) == len(expected)
        assert segment_files(index.path) == segment_files(tmp_path / "before")

        _downgrade(engine, "0013", postings_batch=3)
        assert _row_postings(engine) == before
    finally:
        engine.dispose()
