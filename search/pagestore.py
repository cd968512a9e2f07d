"""Reading the page store: fetched responses kept in WARC files (written by the crawler's
``spidersite.pagestore.PageStore`` extension when ``PAGESTORE_ENABLED`` is on)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed


class PageStoreError(Exception):
    """The stored copy cannot be read (the message is meant for users)."""


@dataclass(slots=True)
class StoredResponse:
    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    date: str | None


def read_response(path: str | Path, offset: int) -> StoredResponse:
    """The WARC ``response`` record at *offset* of *path*."""
    try:
        with open(path, "rb") as stream:
            stream.seek(offset)
            for record in ArchiveIterator(stream):
                if record.rec_type != "response":
                    break
                status_line = record.http_headers.get_statuscode() if record.http_headers else "0"
                headers = list(record.http_headers.headers) if record.http_headers else []
                return StoredResponse(
                    url=record.rec_headers.get_header("WARC-Target-URI"),
                    status=int(status_line or 0),
                    headers=headers,
                    body=record.content_stream().read(),
                    date=record.rec_headers.get_header("WARC-Date"),
                )
    except OSError as exc:
        raise PageStoreError(f"cannot read the page store file {path}: {exc.strerror}") from None
    except ArchiveLoadFailed:
        raise PageStoreError(f"{path} is not a WARC file (at offset {offset})") from None
    raise PageStoreError(f"no response record at offset {offset} of {path}")
