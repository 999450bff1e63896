"""Read units of a batch's Parquet files (``apply.reader``): a file split into several units is read
by each unit's row groups only, every row once, from either store (a real moto S3 server on
loopback for ``s3://``)."""

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mysql_cdc.apply.reader import read_units
from mysql_cdc.storage import StorageSpec, open_store

ROWS, GROUP_ROWS = 8_000, 1_000
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])


def parquet_bytes() -> bytes:
    table = pa.table({"id": pa.array(range(ROWS), pa.int64()), "v": [f"value-{i:06d}" * 4 for i in range(ROWS)]},
                     schema=SCHEMA)
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=GROUP_ROWS, compression="none")
    return out.getvalue()


@pytest.fixture(params=["file", "s3"])
def storage(request, tmp_path) -> StorageSpec:
    if request.param == "file":
        return StorageSpec(f"file://{tmp_path}/root")
    bucket = request.getfixturevalue("s3_bucket")
    options = {k: bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key")}
    return StorageSpec(f"s3://{bucket['bucket']}/root", options)


@pytest.mark.parametrize("parts", [1, 3, 8])
def test_the_units_of_a_file_read_every_row_once(storage, parts):
    storage.open().put_bytes("batch/seg-00000/t.parquet", parquet_bytes())
    units = [("seg-00000/t.parquet", p, parts) for p in range(parts)]
    ids = []
    for index in range(parts):
        batches = read_units(storage, "batch", SCHEMA, units, iter([pa.record_batch([pa.array([index])], ["i"])]))
        ids += [i for b in batches for i in b.column("id").to_pylist()]
    assert sorted(ids) == list(range(ROWS))


def test_an_s3_unit_downloads_its_row_groups_not_the_whole_file(s3_bucket):
    options = {k: s3_bucket[k] for k in ("endpoint_url", "region_name", "aws_access_key_id", "aws_secret_access_key")}
    store = open_store(StorageSpec(f"s3://{s3_bucket['bucket']}/root", options))
    data = parquet_bytes()
    store.put_bytes("batch/t.parquet", data)
    with store.open_reader("batch/t.parquet") as source:
        group = pq.ParquetFile(source).read_row_group(5)
        fetched = source.fetched
    assert group.column("id").to_pylist() == list(range(5 * GROUP_ROWS, 6 * GROUP_ROWS))
    # one of 8 groups and the footer: far from the whole object
    assert fetched < len(data) / 2, (fetched, len(data))
