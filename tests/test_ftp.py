"""FTP: a crawl of a local FTP server (pyftpdlib on 127.0.0.1) lists its folders, indexes
its text and HTML files, records its other files with type and size, logs a missing file,
and logs in as the server's basic_auth user; listings without MLSD are read from LIST."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer

from spidersite.ftp import listing_html
from spidersite.ftpclient import Entry, parse_list_line
from tests.conftest import run_crawl


class LocalFTP:
    """An FTP server on 127.0.0.1 in a thread: anonymous on *public*, ``reader:secret``
    on *private*; without MLSD when *mlsd* is false."""

    def __init__(self, public: Path, private: Path, mlsd: bool = True) -> None:
        authorizer = DummyAuthorizer()
        authorizer.add_anonymous(str(public))
        authorizer.add_user("reader", "secret", str(private), perm="elr")
        attrs: dict[str, Any] = {"authorizer": authorizer, "banner": "test ftpd"}
        if not mlsd:
            attrs["proto_cmds"] = {
                k: v for k, v in FTPHandler.proto_cmds.items() if k not in ("MLSD", "MLST")
            }
        handler = type("Handler", (FTPHandler,), attrs)
        self.server = FTPServer(("127.0.0.1", 0), handler)
        self.port = self.server.address[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.server.serve_forever(timeout=0.05, blocking=False)
        self.server.close_all()

    @property
    def url(self) -> str:
        return f"ftp://127.0.0.1:{self.port}/"


def _tree(root: Path) -> None:
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "readme.txt").write_text("plain aardvark words in a text file\n")
    (root / "docs" / "guide.html").write_text(
        "<html><head><title>Zebra guide</title></head><body><p>zebra stripes</p>"
        '<a href="ftp://127.0.0.1:1/elsewhere.txt">offsite</a></body></html>'
    )
    (root / "docs" / "deep" / "notes.txt").write_text("quokka notes, three folders down\n")
    (root / "docs" / "deep" / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(1000))
    (root / "data.bin").write_bytes(bytes(range(256)) * 8)


@pytest.fixture
def ftpd(tmp_path: Path) -> Iterator[LocalFTP]:
    logging.getLogger("pyftpdlib").setLevel(logging.WARNING)
    public, private = tmp_path / "ftp-public", tmp_path / "ftp-private"
    public.mkdir()
    private.mkdir()
    _tree(public)
    (private / "secret.txt").write_text("walrus secrets for the reader only\n")
    server = LocalFTP(public, private)
    server.thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.thread.join(5)


def test_a_crawl_lists_folders_indexes_text_and_html_and_records_files(
    ftpd: LocalFTP, crawl: Any
) -> None:
    missing = f"{ftpd.url}docs/missing.txt"
    folder = f"{ftpd.url}docs/deep"  # a folder named without its "/"
    result = crawl("-a", f"seeds={ftpd.url},{missing},{folder}")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.log
    base = ftpd.url
    pages = result.urls("page")
    assert {
        base,
        f"{base}docs/",
        f"{base}docs/deep/",
        f"{base}readme.txt",
        f"{base}docs/guide.html",
        f"{base}docs/deep/notes.txt",
    } <= pages
    files = {
        r.url: (r.content_type, r.size)
        for r in result.rows("SELECT url, content_type, size FROM documents WHERE kind = 'file'")
    }
    assert files[f"{base}docs/deep/image.png"] == ("image/png", 1008)
    assert files[f"{base}data.bin"] == ("application/octet-stream", 2048)
    title = result.scalar("SELECT title FROM documents WHERE url = :u", u=f"{base}docs/guide.html")
    assert title == "Zebra guide"
    assert (missing, "http", "HTTP 404") in [(e.url, e.kind, e.message) for e in result.errors()]
    for word, url in [
        ("aardvark", "readme.txt"),
        ("zebra", "docs/guide.html"),
        ("quokka", "docs/deep/notes.txt"),
    ]:
        found = result.search(word)
        assert found.returncode == 0, found.stderr
        assert f"{base}{url}" in found.stdout, (word, found.stdout)
    stats = result.stats
    assert stats["ftp/listings"] == 4  # docs/deep listed twice: as a seed, and as a link
    assert stats["ftp/files"] == 5  # three read, two sized (HEAD: nothing downloaded)
    assert stats["ftp/errors"] == 1  # the missing file (a missing robots.txt is none)
    assert stats["site/offsite"] >= 1


def test_basic_auth_logs_in_as_the_user(ftpd: LocalFTP, crawl: Any, tmp_path: Path) -> None:
    sites = tmp_path / "sites.toml"
    sites.write_text(f'[[server]]\nurl = "{ftpd.url}"\nbasic_auth = "reader:secret"\n')
    result = crawl("-a", f"sites={sites}")
    assert result.returncode == 0, result.stderr
    assert f"{ftpd.url}secret.txt" in result.urls("page")
    assert "walrus" in result.search("walrus").stdout

    wrong = tmp_path / "wrong.toml"
    wrong.write_text(f'[[server]]\nurl = "{ftpd.url}"\nbasic_auth = "reader:nope"\n')
    result = run_crawl(tmp_path / "wrong", "-a", f"sites={wrong}")
    assert result.returncode == 0, result.stderr
    assert (ftpd.url, "http", "HTTP 401") in [(e.url, e.kind, e.message) for e in result.errors()]


def test_without_mlsd_a_listing_is_read_from_list_and_bounded(tmp_path: Path, crawl: Any) -> None:
    public, private = tmp_path / "p", tmp_path / "q"
    public.mkdir()
    private.mkdir()
    _tree(public)
    server = LocalFTP(public, private, mlsd=False)
    server.thread.start()
    try:
        result = crawl(
            "-a",
            f"seeds={server.url}",
            settings={
                "SERVER_DEFAULTS": '{"maxhops": 2, "deny": ["\\\\.bin$"], "max_size": 100}',
                "FTP_MAX_ENTRIES": 2,
            },
        )
    finally:
        server.stop.set()
        server.thread.join(5)
    assert result.returncode == 0, result.stderr
    # The root lists data.bin, docs/, readme.txt (from LIST): the first two are kept, and
    # data.bin is denied; docs/ (1 hop) lists deep/ and guide.html (2 hops), whose own
    # entries (3 hops) are beyond maxhops; guide.html is bigger than max_size.
    base = server.url
    assert result.urls() == {base, f"{base}docs/", f"{base}docs/deep/"}
    assert [e.kind for e in result.errors() if e.url == f"{base}docs/guide.html"] == ["too_large"]
    assert result.stats["ftp/entries_dropped"] == 1


# -- the pure parts ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "entry"),
    [
        ("drwxr-xr-x   2 ftp  ftp      4096 Mar 01 12:00 pub", Entry("pub", True)),
        ("-rw-r--r--   1 0    0      123456 Jan  5  2024 big file.iso", None),
        ("-rw-r--r--   1 ftp  ftp        42 Jan  5  2024 a b.txt", Entry("a b.txt", False, 42)),
        ("lrwxrwxrwx   1 ftp  ftp         7 Jan  5 10:00 latest -> v1.2", Entry("latest", False)),
        ("01-05-24  10:00AM       <DIR>          Folder", Entry("Folder", True)),
        ("01-05-24  10:00AM                  512 notes.txt", Entry("notes.txt", False, 512)),
        ("total 12", None),
        ("drwxr-xr-x   2 ftp  ftp      4096 Mar 01 12:00 ..", None),
    ],
)
def test_list_lines_in_unix_and_dos_formats(line: str, entry: Entry | None) -> None:
    parsed = parse_list_line(line)
    if "big file.iso" in line:
        assert parsed == Entry("big file.iso", False, 123456)
    else:
        assert parsed == entry


def test_a_listing_page_links_every_entry_quoted() -> None:
    body = listing_html(
        "ftp://f.example/pub/", [Entry("a b.txt", False, 3), Entry("sub", True)]
    ).decode()
    assert "<title>Index of /pub/</title>" in body
    assert 'href="ftp://f.example/pub/a%20b.txt"' in body
    assert 'href="ftp://f.example/pub/sub/"' in body
