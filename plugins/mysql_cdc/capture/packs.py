"""Small tables' Parquet files stored together: a pack per row segment (``contracts.batch``).

An object store charges a request per object: tens of milliseconds of latency and milliseconds of
the client's CPU (boto3: 5-6 ms per small object's GET here). An OLTP interval touches hundreds of
tables with a few rows each; one object per table made capture pay a PUT and the merge a GET per
table, more than the rows themselves cost (1,000 tables on S3: the merge 14.4 s, capture 24.5 s;
in packs 2.9 s and 5.9 s). So a table whose whole segment is one
small Parquet file hands that file to the segment's ``TablePacks``: its bytes are appended, whole
and unchanged (still a Parquet file, footer included), to a pack, and the manifest records the
pack and the file's byte range in it (``TableChanges.spans``). The merge fetches a group of such
tables with one ranged GET (``merge.reader.fetch_packed``).
"""

from __future__ import annotations

import os
import shutil
from typing import BinaryIO

from ..storage import ObjectStore


class TablePacks:
    """The packs of one row segment. ``add`` appends a finished local Parquet file to the open
    pack (a local file) and gives the pack's name and the file's (offset, length) in it; a pack is
    uploaded once it holds ``pack_bytes`` and by ``close``, which the segment calls before its
    entry reaches the manifest (the manifest is written last: a pack it names always exists)."""

    def __init__(self, store: ObjectStore, batch_prefix: str, segment_dir: str, tmp_dir: str, pack_bytes: int):
        self.store, self.batch_prefix, self.segment_dir = store, batch_prefix, segment_dir
        self.tmp_dir, self.pack_bytes = tmp_dir, pack_bytes
        self.uploaded: list[str] = []
        self._file: BinaryIO | None = None
        self._local = ""
        self._size = 0

    @property
    def _name(self) -> str:
        return f"{self.segment_dir}/small-tables-{len(self.uploaded):05d}.pack"

    def add(self, local_path: str) -> tuple[str, tuple[int, int]]:
        """Move the Parquet file ``local_path`` into the open pack."""
        if self._file is None:
            self._local = os.path.join(self.tmp_dir, f"pack-{len(self.uploaded):05d}-{id(self)}")
            self._file = open(self._local, "wb")
            self._size = 0
        name, offset = self._name, self._size
        with open(local_path, "rb") as source:
            shutil.copyfileobj(source, self._file)
        length = self._file.tell() - offset
        os.unlink(local_path)
        self._size += length
        if self._size >= self.pack_bytes:
            self._upload()
        return name, (offset, length)

    def _upload(self) -> None:
        self._file.close()
        self._file = None
        self.store.put_file(self._local, f"{self.batch_prefix}/{self._name}")
        os.unlink(self._local)
        self.uploaded.append(self._name)

    def close(self) -> None:
        """Upload the open pack, if any."""
        if self._file is not None:
            self._upload()

    def discard(self) -> None:
        """Drop the open pack's local file (a failed extraction): nothing more is uploaded."""
        if self._file is not None:
            self._file.close()
            self._file = None
            if os.path.exists(self._local):
                os.unlink(self._local)
