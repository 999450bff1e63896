"""``local_copy``: the merge's segment transaction LOADs load files through it, from either store
(a real moto S3 server on loopback for ``s3://``)."""

import os

import pytest

from mysql_cdc.storage import S3Settings, StorageError, open_store


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
    s3 = S3Settings(**{k: s3_bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id",
                                                   "aws_secret_access_key")})
    store = open_store(f"s3://{s3_bucket['bucket']}/root", s3)
    store.put_bytes("p/part-00000.tsv", b"2\ttwo\n")
    with store.local_copy("p/part-00000.tsv") as path:
        assert open(path, "rb").read() == b"2\ttwo\n"
    assert not os.path.exists(path)
