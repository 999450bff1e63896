"""``local_copy``: the merge's segment transaction LOADs load files through it, from either store
(a real moto S3 server on loopback for ``s3://``)."""

import os

import pytest

from mysql_cdc.storage import StorageError, StorageSpec, open_store


def test_local_store_gives_the_file_itself(tmp_path):
    store = open_store(f"file://{tmp_path}/root")
    store.put_bytes("p/merge-scratch/00001/000/part-00000.tsv", b"1\tone\n")
    with store.local_copy("p/merge-scratch/00001/000/part-00000.tsv") as path:
        assert path == str(tmp_path / "root/p/merge-scratch/00001/000/part-00000.tsv")
        assert open(path, "rb").read() == b"1\tone\n"
    assert os.path.exists(path), "the store's own file is not a temp copy: it stays"


def test_local_store_names_a_missing_object(tmp_path):
    store = open_store(f"file://{tmp_path}/root")
    with pytest.raises(StorageError, match="part-00007.tsv does not exist"):
        with store.local_copy("p/part-00007.tsv"):
            pass


def test_s3_store_downloads_to_a_temp_file_and_removes_it(s3_bucket):
    options = {k: s3_bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key")}
    store = open_store(StorageSpec(f"s3://{s3_bucket['bucket']}/root", options))
    store.put_bytes("p/part-00000.tsv", b"2\ttwo\n")
    with store.local_copy("p/part-00000.tsv") as path:
        assert open(path, "rb").read() == b"2\ttwo\n"
    assert not os.path.exists(path)


@pytest.mark.parametrize("uri, normalized", [
    ("file:///data/cdc/../batches/", "file:///data/batches"),
    ("file://localhost/data", "file:///data"),
    ("s3a://lake/cdc/", "s3://lake/cdc"),
    ("s3://lake", "s3://lake"),
])
def test_one_spelling_per_storage_root(uri, normalized):
    assert StorageSpec(uri).uri == normalized


@pytest.mark.parametrize("uri, message", [
    ("file://host/data", "write local storage as file:///absolute/path"),
    ("s3:///prefix", "names no bucket"),
    ("gs://bucket/x", "has scheme 'gs'"),
    ("", "non-empty string"),
])
def test_bad_storage_uris_say_how_to_write_them(uri, message):
    with pytest.raises(StorageError, match=message):
        StorageSpec(uri)


def test_a_spec_rejects_options_its_backend_does_not_take_and_hides_them():
    with pytest.raises(StorageError, match=r"unknown option\(s\) \['endpoint'\]; a s3:// store takes"):
        StorageSpec("s3://lake/cdc", {"endpoint": "http://x"})
    with pytest.raises(StorageError, match="a file:// store takes no options"):
        StorageSpec("file:///data", {"region_name": "eu-west-3"})
    spec = StorageSpec("s3://lake/cdc", {"aws_secret_access_key": "s3cr3t"})
    assert "s3cr3t" not in repr(spec)
    assert StorageSpec.from_json(spec.to_json()).options == {"aws_secret_access_key": "s3cr3t"}


def test_which_s3_failures_the_store_retries():
    from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

    from mysql_cdc.storage import transient_storage_error

    def answer(status: int, code: str) -> ClientError:
        return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")

    assert transient_storage_error(answer(503, "SlowDown")) == "503 SlowDown"
    assert transient_storage_error(answer(500, "InternalError")) == "500 InternalError"
    assert transient_storage_error(answer(403, "AccessDenied")) is None
    assert transient_storage_error(answer(404, "NoSuchKey")) is None
    assert transient_storage_error(ConnectionClosedError(endpoint_url="http://s3")).startswith("ConnectionClosedError")
    assert transient_storage_error(ReadTimeoutError(endpoint_url="http://s3")).startswith("ReadTimeoutError")
    try:  # s3transfer's own error, raised while handling the client's
        try:
            raise answer(503, "SlowDown")
        except ClientError:
            raise RuntimeError("Failed to upload /tmp/x to bucket/key")
    except RuntimeError as wrapped:
        assert transient_storage_error(wrapped) == "503 SlowDown"
    assert transient_storage_error(ValueError("bad")) is None
