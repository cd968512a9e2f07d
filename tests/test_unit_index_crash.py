"""The Whoosh index after a writer was killed in its commit: what it left is ignored, then
removed, and a complete commit is on disk before the writer returns (search.index)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from search.index import Index, IndexDoc
from tests.conftest import ROOT

#: A child process that adds documents 100..104 and is killed (its process group, as
#: SPIDERSITE_KILL_AT does) at the named moment of its commit.
WRITE = """
import sys
from search.index import Index, IndexDoc
with Index(sys.argv[1]).writer() as w:
    for n in range(100, 105):
        w.add(IndexDoc(n, f"http://h/{n}", "h", {"kestrel": 1.0, f"w{n}": 2.0}))
"""


def add(index: Index, ids: range) -> None:
    with index.writer() as w:
        for n in ids:
            w.add(IndexDoc(n, f"http://h/{n}", "h", {"kestrel": 1.0, f"w{n}": 2.0}))


def killed_writer(path: Path, moment: str) -> None:
    child = subprocess.run(
        [sys.executable, "-c", WRITE, str(path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SPIDERSITE_KILL_AT": moment},
        start_new_session=True,  # the child kills its own process group
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()


@pytest.mark.parametrize("moment", ["index_commit", "merge"])
def test_a_writer_killed_in_its_commit_leaves_the_index_as_it_was(
    tmp_path: Path, moment: str
) -> None:
    index = Index(tmp_path / "index")
    for start in range(0, 12, 3):  # four segments of three: the next commit merges
        add(index, range(start, start + 3))
    files = set(os.listdir(index.path))
    killed_writer(index.path, moment)
    assert set(os.listdir(index.path)) > files  # it left files behind
    assert index.docids() == set(range(12))  # ... which the index does not read

    add(index, range(100, 105))  # the next writer (its lock is free) commits
    assert index.docids() == set(range(12)) | set(range(100, 105))
    assert index.doc_count() == 17
    left = {n for n in os.listdir(index.path) if n.endswith(".tmp")}
    assert left == set(), "the killed writer's temporary folder is removed"


def test_the_temporary_table_of_contents_of_a_killed_writer_is_removed(
    tmp_path: Path,
) -> None:
    index = Index(tmp_path / "index")
    add(index, range(3))
    # A writer killed while it wrote its table of contents (Whoosh writes it under a
    # temporary name, then renames it; nothing of Whoosh removes the temporary one).
    temp = index.path / "_spidersite_2.toc.1796317095.25"
    temp.write_bytes(b"half a table of contents")
    assert index.docids() == {0, 1, 2}
    add(index, range(3, 5))
    assert not temp.exists()
    assert index.docids() == set(range(5))


def test_a_commit_is_flushed_to_disk_before_the_writer_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = Index(tmp_path / "index")
    add(index, range(3))
    before = set(os.listdir(index.path))
    synced: list[str] = []
    fsync = os.fsync

    def record(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", record)
    add(index, range(3, 6))
    new = set(os.listdir(index.path)) - before
    assert any(n.endswith(".toc") for n in new)  # the new table of contents
    assert any(not n.endswith(".toc") for n in new)  # the new segment
    assert {str(index.path / n) for n in new} <= set(synced)
    assert synced[-1] == str(index.path)  # and the folder, last
