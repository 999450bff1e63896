"""Object storage for change batches: ``s3://bucket/prefix`` through boto3, or ``file:///path``.

A store's whole configuration is one value, ``StorageSpec``: the root URI (normalized here, the
one place that knows URI rules) and the backend's options (S3: endpoint, region, credentials).
The Airflow side builds it from the pipelines file and its connection; the Spark job receives it
in its secrets file; executors receive it in their closures. A new backend is a class here with
``OPTIONS`` and ``from_spec``, an entry in ``_BACKENDS``, and (when it needs credentials) the
lines of ``hooks/storage.py`` that fill its options from an Airflow connection.

S3 answers 500 and 503 now and then, and connections drop; S3 asks its clients to retry those
with backoff. Every request the product makes through boto3 is retried here, by one policy
(``storage_retry``: up to ``STORAGE_ATTEMPTS`` tries, exponential backoff with jitter), and each
retry is logged with what failed; botocore's own retries are turned off (``client_config``) so
there is one layer of them, and its timeouts are set, not left to defaults.

Both stores speak in keys relative to the storage root. Writes of whole objects are atomic on
both (S3 PUT is atomic; the file store writes a temp file and renames it), which is what makes
"manifest.json written last" a commit marker.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import os
import random
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, ContextManager, Iterator, Mapping, Protocol, TypeVar
from urllib.parse import urlparse

from .contracts import MANIFEST_NAME, ChangeBatch, batch_prefix, batches_prefix
from .errors import PermanentError
from .retry_policy import causes

log = logging.getLogger("mysql_cdc.storage")
T = TypeVar("T")

STORAGE_ATTEMPTS = 6  # tries of one request (5 retries: about 6 s of backoff in all)
_FIRST_BACKOFF, _MAX_BACKOFF = 0.2, 3.0  # seconds
CONNECT_TIMEOUT, READ_TIMEOUT = 10.0, 60.0  # seconds, unless the spec's options say otherwise
# S3's answers that ask for a retry (its "500 InternalError", "503 SlowDown" and throttling)
_RETRYABLE_STATUS = frozenset({500, 502, 503, 504})
_RETRYABLE_CODES = frozenset({"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "Throttling",
                              "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"})


def transient_storage_error(exc: BaseException) -> str | None:
    """What made an S3 request fail, when a retry may fix it (None: it will not). Looks through the
    chain: s3transfer wraps the client's error in its own."""
    from botocore.exceptions import ClientError, HTTPClientError

    for cause in causes(exc):
        if isinstance(cause, ClientError):
            error = cause.response.get("Error", {})
            status = cause.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status in _RETRYABLE_STATUS or error.get("Code") in _RETRYABLE_CODES:
                return f"{status} {error.get('Code')}"
            return None
        if isinstance(cause, HTTPClientError):  # connection refused, reset, closed, timed out, body cut short
            return f"{type(cause).__name__}: {cause}"
    return None


def storage_retry(what: str, call: Callable[[], T],
                  transient: Callable[[BaseException], str | None] = transient_storage_error) -> T:
    """``call()`` retried with exponential backoff and jitter while it fails with an error
    ``transient`` describes (a ``transient_storage_error`` by default; another client's errors
    read by its own classifier), at most ``STORAGE_ATTEMPTS`` tries; each retry logged naming
    ``what`` (the request) and the failure."""
    for attempt in range(1, STORAGE_ATTEMPTS + 1):
        try:
            return call()
        except Exception as exc:
            why = transient(exc)
            if why is None or attempt == STORAGE_ATTEMPTS:
                raise
            delay = min(_MAX_BACKOFF, _FIRST_BACKOFF * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            log.warning("object storage: %s failed (%s); retrying in %.1f s (try %d of %d)", what, why, delay,
                        attempt + 1, STORAGE_ATTEMPTS)
            time.sleep(delay)
    raise AssertionError("unreachable")


def client_config(read_timeout: float | None = None):
    """botocore's settings for the product's S3 clients: no retries of its own (``storage_retry``
    makes them, and says so), and explicit timeouts."""
    from botocore.config import Config

    return Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=CONNECT_TIMEOUT,
                  read_timeout=read_timeout or READ_TIMEOUT)


class StorageError(ValueError, PermanentError):
    """A storage URI or setting that cannot work; the message says how to fix it."""


def normalize_uri(uri: str) -> str:
    """One spelling per storage root: ``file:///absolute/path`` (``..`` folded) or
    ``s3://bucket/prefix`` (``s3a://``, Hadoop's name, written ``s3://``), no trailing slash."""
    if not isinstance(uri, str) or not uri.strip():
        raise StorageError(f"storage URI must be a non-empty string, got {uri!r}")
    uri = uri.strip()
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise StorageError(f"storage URI {uri!r}: write local storage as file:///absolute/path")
        # normpath folds the '..' of a ${PIPELINES_DIR}/../x default: manifests and asset URIs
        # carry this root, and one directory must have one spelling.
        return f"file://{os.path.normpath(parsed.path)}"
    if parsed.scheme in ("s3", "s3a"):
        if not parsed.netloc:
            raise StorageError(f"storage URI {uri!r} names no bucket; write s3://bucket/prefix")
        path = parsed.path.strip("/")
        return f"s3://{parsed.netloc}/{path}" if path else f"s3://{parsed.netloc}"
    raise StorageError(
        f"storage URI {uri!r} has scheme {parsed.scheme!r}; use s3://bucket/prefix or file:///absolute/path"
    )


def uri_scheme(uri: str) -> str:
    """``file`` or ``s3`` for a storage URI (normalized first, so ``s3a`` is ``s3``)."""
    return urlparse(normalize_uri(uri)).scheme


@dataclass(frozen=True)
class StorageSpec:
    """Where a pipeline's batches live and how to reach them. ``options`` hold credentials, so
    they are kept out of repr(): a spec may be logged, its secrets never are."""

    uri: str
    options: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "uri", normalize_uri(self.uri))
        backend = _BACKENDS[self.scheme]
        unknown = sorted(set(self.options) - set(backend.OPTIONS))
        if unknown:
            raise StorageError(
                f"storage {self.uri}: unknown option(s) {unknown}; a {self.scheme}:// store takes "
                f"{sorted(backend.OPTIONS) or 'no options'}"
            )
        object.__setattr__(self, "options", {k: v for k, v in self.options.items() if v is not None})

    @property
    def scheme(self) -> str:
        return urlparse(self.uri).scheme

    def open(self, client: Any = None) -> "ObjectStore":
        """The store. ``client`` is a ready-made client for the backend (the Airflow side passes
        the amazon provider's boto3 client); without one the backend builds it from the options."""
        return _BACKENDS[self.scheme].from_spec(self, client)

    def to_json(self) -> dict[str, Any]:
        return {"uri": self.uri, "options": dict(self.options)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "storage") -> "StorageSpec":
        if not isinstance(data, Mapping) or set(data) - {"uri", "options"} or "uri" not in data:
            found = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise StorageError(f"{where}: expected {{'uri': ..., 'options': {{...}}}}, got {found}")
        return cls(data["uri"], dict(data.get("options") or {}))


@dataclass(frozen=True)
class StoredObject:
    """An object as a listing gives it: its key, size in bytes and when it was last written (UTC)."""

    key: str
    size: int
    modified: dt.datetime


class ObjectStore(Protocol):
    uri: str

    def put_file(self, local_path: str, key: str) -> None: ...
    def put_bytes(self, key: str, data: bytes) -> None: ...
    def get_bytes(self, key: str) -> bytes: ...
    def get_range(self, key: str, offset: int, length: int) -> bytes: ...
    def exists(self, key: str) -> bool: ...
    def list_keys(self, prefix: str) -> list[str]: ...
    def list_objects(self, prefix: str) -> list[StoredObject]: ...
    def delete_prefix(self, prefix: str) -> None: ...
    def uri_of(self, key: str) -> str: ...
    def local_copy(self, key: str) -> ContextManager[str]: ...
    def open_reader(self, key: str) -> ContextManager[BinaryIO]: ...


class LocalStore:
    OPTIONS: tuple[str, ...] = ()

    @classmethod
    def from_spec(cls, spec: StorageSpec, client: Any = None) -> "LocalStore":
        return cls(urlparse(spec.uri).path)

    def __init__(self, root: str):
        self.root = Path(root)
        self.uri = f"file://{self.root}"
        self._resolved_root = self.root.resolve()  # once: resolving walks every directory
        self._root_text = str(self._resolved_root)
        self._root_prefix = self._root_text.rstrip(os.sep) + os.sep

    def _path(self, key: str) -> Path:
        # lexical: the keys are ours, so ".." (or an absolute key) is the only way out of the root;
        # resolving every key through the file system cost a merge of a thousand small tables seconds
        # (string operations: pathlib's parents cost a quarter of a millisecond per key)
        path = os.path.normpath(os.path.join(self._root_text, key))
        if path != self._root_text and not path.startswith(self._root_prefix):
            raise StorageError(f"key {key!r} escapes the storage root {self.root}")
        return Path(path)

    def put_file(self, local_path: str, key: str) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        shutil.copyfile(local_path, tmp)
        os.replace(tmp, target)

    def put_bytes(self, key: str, data: bytes) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)  # atomic: readers see the old object or the new one, never half

    def get_bytes(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        with open(self._path(key), "rb") as fh:
            fh.seek(offset)
            data = fh.read(length)
        if len(data) != length:
            raise StorageError(f"{self.uri_of(key)} has {offset + len(data)} bytes, not the {offset + length} "
                               "its manifest names: the batch's files were changed after it was written")
        return data

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list_keys(self, prefix: str) -> list[str]:
        base = self._path(prefix) if prefix else self.root
        start = base if base.is_dir() else base.parent
        if not start.exists():
            return []
        keys = []
        for dirpath, _, files in os.walk(start):
            for name in files:
                if name.startswith("."):
                    continue  # temp files of an in-flight write
                key = str(Path(dirpath, name).relative_to(self.root))
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

    def list_objects(self, prefix: str) -> list[StoredObject]:
        objects = []
        for key in self.list_keys(prefix):
            try:
                stat = self._path(key).stat()
            except FileNotFoundError:  # deleted since it was listed
                continue
            objects.append(StoredObject(key, stat.st_size,
                                        dt.datetime.fromtimestamp(stat.st_mtime, dt.timezone.utc)))
        return objects

    def delete_prefix(self, prefix: str) -> None:
        path = self._path(prefix)
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()

    def uri_of(self, key: str) -> str:
        return f"{self.uri}/{key}"

    @contextmanager
    def local_copy(self, key: str) -> Iterator[str]:
        """A local path holding the object: the file itself, no copy."""
        path = self._path(key)
        if not path.is_file():
            raise StorageError(f"{self.uri_of(key)} does not exist")
        yield str(path)

    @contextmanager
    def open_reader(self, key: str) -> Iterator[BinaryIO]:
        """The object as a seekable binary file: the file itself."""
        with open(self._path(key), "rb") as fh:
            yield fh


class S3Store:
    # read_timeout: seconds an answer may take (READ_TIMEOUT by default)
    OPTIONS = ("endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
               "read_timeout")

    @classmethod
    def from_spec(cls, spec: StorageSpec, client: Any = None) -> "S3Store":
        if client is None:
            import boto3  # here: executors import this module without touching S3 when file://

            options = {k: v for k, v in spec.options.items() if k != "read_timeout"}
            client = boto3.client("s3", config=client_config(spec.options.get("read_timeout")), **options)
        parsed = urlparse(spec.uri)
        return cls(parsed.netloc, parsed.path, client)

    def __init__(self, bucket: str, prefix: str, client):
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = client
        self.uri = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_file(self, local_path: str, key: str) -> None:
        storage_retry(f"PUT {self.uri_of(key)}", lambda: self.client.upload_file(local_path, self.bucket, self._key(key)))

    def put_bytes(self, key: str, data: bytes) -> None:
        storage_retry(f"PUT {self.uri_of(key)}",
                      lambda: self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data))

    def get_bytes(self, key: str) -> bytes:
        # the body is read inside the retry: a connection cut in the middle of it is retried too
        return storage_retry(f"GET {self.uri_of(key)}", lambda: self.client.get_object(
            Bucket=self.bucket, Key=self._key(key))["Body"].read())

    def get_range(self, key: str, offset: int, length: int) -> bytes:
        data = storage_retry(f"GET {self.uri_of(key)} bytes {offset}-{offset + length - 1}", lambda: self.client.get_object(
            Bucket=self.bucket, Key=self._key(key), Range=f"bytes={offset}-{offset + length - 1}")["Body"].read())
        if len(data) != length:
            raise StorageError(f"{self.uri_of(key)}: bytes {offset}-{offset + length - 1} gave {len(data)} bytes: "
                               "the object is shorter than its manifest says (changed after it was written)")
        return data

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            storage_retry(f"HEAD {self.uri_of(key)}", lambda: self.client.head_object(Bucket=self.bucket,
                                                                                      Key=self._key(key)))
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    def _objects(self, prefix: str) -> list[StoredObject]:
        def listing() -> list[StoredObject]:
            paginator = self.client.get_paginator("list_objects_v2")
            strip = len(self.prefix) + 1 if self.prefix else 0
            return [StoredObject(obj["Key"][strip:], obj["Size"], obj["LastModified"].astimezone(dt.timezone.utc))
                    for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix))
                    for obj in page.get("Contents", [])]

        return storage_retry(f"LIST {self.uri_of(prefix)}", listing)

    def list_keys(self, prefix: str) -> list[str]:
        return sorted(o.key for o in self._objects(prefix))

    def list_objects(self, prefix: str) -> list[StoredObject]:
        return sorted(self._objects(prefix), key=lambda o: o.key)

    def delete_prefix(self, prefix: str) -> None:
        keys = [{"Key": self._key(o.key)} for o in self._objects(prefix)]
        for i in range(0, len(keys), 1000):  # DeleteObjects takes at most 1000 keys
            storage_retry(f"DELETE {len(keys[i:i + 1000])} objects under {self.uri_of(prefix)}",
                          lambda part=keys[i : i + 1000]: self.client.delete_objects(
                              Bucket=self.bucket, Delete={"Objects": part}))

    def uri_of(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    @contextmanager
    def local_copy(self, key: str) -> Iterator[str]:
        """A local path holding the object: downloaded to a temp file, removed on exit."""
        fd, path = tempfile.mkstemp(prefix="mysql-cdc-", suffix=".part")
        os.close(fd)
        try:
            storage_retry(f"GET {self.uri_of(key)}",
                          lambda: self.client.download_file(self.bucket, self._key(key), path))
            yield path
        finally:
            os.unlink(path)

    @contextmanager
    def open_reader(self, key: str) -> Iterator[BinaryIO]:
        """The object as a seekable binary file that fetches only the byte ranges read (one ranged
        GET per read): a Parquet reader reads the footer and then only the row groups it is
        asked for, not the whole object. Unbuffered: a Parquet reader asks for exactly the column
        chunks it needs, and a buffer would only read ahead into groups it does not."""
        with _S3RangeReader(self, key) as reader:
            yield reader


class _S3RangeReader(io.RawIOBase):
    """An S3 object read by byte ranges; ``fetched``: the bytes it has downloaded."""

    def __init__(self, store: S3Store, key: str):
        super().__init__()
        self.store, self.key = store, key
        self.size = storage_retry(f"HEAD {store.uri_of(key)}", lambda: store.client.head_object(
            Bucket=store.bucket, Key=store._key(key))["ContentLength"])
        self.offset = 0
        self.fetched = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.offset

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.offset, io.SEEK_END: self.size}[whence]
        self.offset = max(0, base + offset)
        return self.offset

    def readinto(self, buffer) -> int:
        length = min(len(buffer), self.size - self.offset)
        if length <= 0:
            return 0
        data = self.store.get_range(self.key, self.offset, length)
        buffer[:len(data)] = data
        self.offset += len(data)
        self.fetched += len(data)
        return len(data)


_BACKENDS = {"file": LocalStore, "s3": S3Store}


def open_store(spec: StorageSpec | str, client: Any = None) -> ObjectStore:
    """The store behind a spec, or behind a bare URI (no options: boto3's default chain for S3)."""
    return (spec if isinstance(spec, StorageSpec) else StorageSpec(spec)).open(client)


def split_manifest_uri(manifest_uri: str) -> tuple[str, str]:
    """``<root>/<pipeline>/batches/<id>/manifest.json`` -> (root URI, batch prefix)."""
    marker = "/batches/"
    if not manifest_uri.endswith("/" + MANIFEST_NAME) or marker not in manifest_uri:
        raise StorageError(
            f"{manifest_uri!r} is not a batch manifest URI "
            f"(expected <root>/<pipeline>/batches/<batch id>/{MANIFEST_NAME})"
        )
    head, _, tail = manifest_uri.rpartition(marker)
    root, _, pipeline = head.rpartition("/")
    batch_id = tail[: -len("/" + MANIFEST_NAME)]
    return root, batch_prefix(pipeline, batch_id)


def batches_uri(storage_uri: str, pipeline: str) -> str:
    """The pipeline's batch directory as a URI, with no I/O (DAG files call it at parse time)."""
    return f"{normalize_uri(storage_uri)}/{batches_prefix(pipeline).rstrip('/')}"


def read_manifest(store: ObjectStore, manifest_uri: str) -> ChangeBatch:
    """The batch a manifest URI names; it must live under ``store``'s root and exist."""
    root, prefix = split_manifest_uri(manifest_uri)
    if normalize_uri(root) != normalize_uri(store.uri):
        raise StorageError(f"manifest {manifest_uri} is not under the pipeline's storage root {store.uri}")
    batch = read_batch(store, prefix)
    if batch is None:
        from .batch_retention import deleted_batch_note  # (it lists the store: it imports this module)

        pipeline, _, batch_id = prefix.partition("/batches/")
        raise StorageError(
            f"no batch at {manifest_uri}: its manifest.json does not exist "
            f"({deleted_batch_note(store, pipeline, batch_id)})"
        )
    return batch


def commit_batch(store: ObjectStore, prefix: str, batch: ChangeBatch, manifest_name: str = MANIFEST_NAME) -> None:
    """Write the batch's manifest at ``prefix``, after everything it lists: the batch exists from
    this moment on (``manifest_name``: another name commits a part of a batch, which is not one).
    The one place a batch is committed: the binlog reader, a parallel read's combined parts and
    a snapshot's copy all end here."""
    store.put_bytes(f"{prefix}/{manifest_name}", batch.to_json().encode())


def read_batch(store: ObjectStore, prefix: str) -> ChangeBatch | None:
    """The batch at ``prefix``, or None when its manifest is absent (the batch does not exist)."""
    key = f"{prefix}/{MANIFEST_NAME}"
    if not store.exists(key):
        return None
    return ChangeBatch.from_json(store.get_bytes(key))


def list_batches(store: ObjectStore, pipeline: str) -> list[ChangeBatch]:
    """Committed batches of a pipeline in binlog order; directories without a manifest are skipped."""
    manifests = [k for k in store.list_keys(batches_prefix(pipeline)) if k.endswith("/" + MANIFEST_NAME)]
    return [ChangeBatch.from_json(store.get_bytes(k)) for k in sorted(manifests)]


def local_temp_dir() -> str:
    return tempfile.mkdtemp(prefix="mysql-cdc-")
