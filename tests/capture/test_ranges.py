"""Ranges across binlog rotation, big transactions, re-extraction, storage backends."""

import io

import boto3
import pyarrow as pa
import pyarrow.parquet as pq

from mysql_cdc.merge.reader import parquet_files
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range, split_range
from mysql_cdc.capture.leader import BinlogFile
from mysql_cdc.capture.table_changes import WriterLimits
from mysql_cdc.contracts import BinlogPosition, PositionRange, RowSegment
from mysql_cdc.storage import list_batches, open_store, read_batch

from .conftest import leader_position


def test_range_across_rotation_and_a_20k_row_transaction(leader, leader_settings, capture, unique_name):
    db = unique_name
    big_insert = (
        f"INSERT INTO {db}.t (id, v) SELECT seq, CONCAT('row-', seq) FROM {db}.seq_1_to_20000"
    )
    captured = capture(
        [
            f"CREATE DATABASE {db}",
            f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))",
            f"INSERT INTO {db}.t VALUES (-1, 'before rotation')",
            "FLUSH BINARY LOGS",
            "BEGIN",
            big_insert,
            f"UPDATE {db}.t SET v = 'changed' WHERE id = -1",
            "COMMIT",
            "FLUSH BINARY LOGS",
            f"DELETE FROM {db}.t WHERE id <= 10",
        ],
        # small files so the 20k-row transaction rolls over several Parquet files
        limits=WriterLimits(chunk_rows=3000, file_rows=7000),
    )
    batch = captured.batch
    assert batch.end.sequence == batch.start.sequence + 2  # two rotations inside the range
    (seg,) = [s for s in batch.segments if isinstance(s, RowSegment)]
    (table,) = seg.tables
    assert table.row_count == 1 + 20000 + 1 + 11
    # files roll once they pass file_rows; a file can overshoot by at most one chunk (+ one event)
    sizes = [pq.read_metadata(pa.BufferReader(data)).num_rows
             for data in parquet_files(captured.store, batch.prefix, table)]
    assert len(sizes) >= 3 and sum(sizes) == table.row_count
    assert all(n < 7000 + 3000 + 1000 for n in sizes)
    rows = captured.rows(seg, "t")
    assert len(rows) == table.row_count
    files = [r["_binlog_file"] for r in rows]
    assert len(set(files)) == 3
    order = [(r["_binlog_seq"], r["_binlog_pos"], r["_row_index"]) for r in rows]
    assert order == sorted(order) and len(set(order)) == len(order)
    # the whole 20k-row transaction (plus its update) shares one transaction id, and it is not split
    big = [r for r in rows if r["_binlog_seq"] == batch.start.sequence + 1]
    assert len(big) == 20001 and len({r["_txn"] for r in big}) == 1
    assert [r["_op"] for r in rows[-11:]] == ["D"] * 11


def test_same_range_twice_gives_identical_batch_and_missing_manifest_is_ignored(
    leader, leader_settings, unique_name, tmp_path
):
    db = unique_name
    store = open_store(f"file://{tmp_path}/store")
    start = leader_position(leader_settings)
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v JSON)",
                     f"INSERT INTO {db}.t VALUES (1, '[1]'), (2, NULL)", f"UPDATE {db}.t SET v = '{{}}'"])
    end = leader_position(leader_settings)
    range_ = PositionRange(start, end)

    first = extract_range(leader_settings, RangeRequest("p", range_), BatchTarget(store))
    snapshot = {k: store.get_bytes(k) for k in store.list_keys(first.prefix)}
    # a stale file from a crashed earlier attempt must not survive re-extraction
    store.put_bytes(f"{first.prefix}/seg-00099/stale.parquet", b"junk")
    second = extract_range(leader_settings, RangeRequest("p", range_), BatchTarget(store))
    assert second == first
    assert {k: store.get_bytes(k) for k in store.list_keys(second.prefix)} == snapshot

    # a batch directory without manifest.json (a crash mid-extraction) does not exist
    half = PositionRange(start, BinlogPosition(start.file, start.offset))  # any other id
    orphan_prefix = f"p/batches/{'0' * 10}.{'0' * 20}-orphan"
    store.put_bytes(f"{orphan_prefix}/seg-00000/x.parquet", b"partial")
    assert read_batch(store, orphan_prefix) is None
    assert [b.batch_id for b in list_batches(store, "p")] == [first.batch_id]
    assert half.empty and extract_range(leader_settings, RangeRequest("p", half), BatchTarget(store)) is None


def test_extract_to_s3_endpoint(leader, leader_settings, s3_bucket, unique_name):
    db = unique_name
    client = boto3.client(
        "s3", endpoint_url=s3_bucket["endpoint_url"], region_name=s3_bucket["region_name"],
        aws_access_key_id=s3_bucket["aws_access_key_id"], aws_secret_access_key=s3_bucket["aws_secret_access_key"],
    )
    store = open_store(f"s3://{s3_bucket['bucket']}/cdc/root", client=client)
    start = leader_position(leader_settings)
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id BIGINT UNSIGNED PRIMARY KEY)",
                     f"INSERT INTO {db}.t VALUES (18446744073709551615)"])
    batch = extract_range(leader_settings, RangeRequest("pipe", PositionRange(start, leader_position(leader_settings))),
                          BatchTarget(store))
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket["bucket"])["Contents"]]
    assert f"cdc/root/{batch.prefix}/manifest.json" in keys
    (seg,) = [s for s in batch.segments if isinstance(s, RowSegment)]
    # a one-row table's file is in the segment's pack: its bytes are the span the manifest names
    (offset, length), = seg.tables[0].spans
    body = client.get_object(Bucket=s3_bucket["bucket"], Key=f"cdc/root/{batch.prefix}/{seg.tables[0].files[0]}",
                             Range=f"bytes={offset}-{offset + length - 1}")
    table = pq.read_table(io.BytesIO(body["Body"].read()))
    assert table.column("id").to_pylist() == [18446744073709551615]
    assert [b.batch_id for b in list_batches(store, "pipe")] == [batch.batch_id]


def test_cli_extracts_a_range_by_hand(leader, leader_user, leader_settings, unique_name, tmp_path, capsys, monkeypatch):
    from mysql_cdc import cli

    db = unique_name
    start = leader_position(leader_settings)
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY)", f"INSERT INTO {db}.t VALUES (1)"])
    monkeypatch.setenv("MYSQL_CDC_LEADER_PASSWORD", leader_user["password"])
    common = ["--host", leader_user["host"], "--port", str(leader_user["port"]), "--user", leader_user["user"]]
    code = cli.main(["extract", *common, "--pipeline", "hand", "--storage-uri", f"file://{tmp_path}/s",
                     "--start", str(start), "--include", f"{db}.*"])
    out = capsys.readouterr().out.strip()
    assert code == 0 and out.endswith("/manifest.json") and out.startswith(f"file://{tmp_path}/s/hand/batches/")
    assert cli.main(["batches", "--pipeline", "hand", "--storage-uri", f"file://{tmp_path}/s"]) == 0
    assert "3 segments  1 rows" in capsys.readouterr().out
    assert cli.main(["extract", *common, "--pipeline", "hand", "--storage-uri", f"file://{tmp_path}/s",
                     "--start", "nonsense"]) == 2
    assert "is not a binlog position" in capsys.readouterr().err


def test_create_table_select_and_non_transactional_tables(leader, leader_settings, capture, unique_name, tmp_path):
    """CREATE TABLE … SELECT logs its DDL and its rows in ONE transaction (GTID without
    FL_STANDALONE, then XID); MyISAM writes end with a COMMIT query instead of an XID."""
    db = unique_name
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.a (id INT PRIMARY KEY)",
                     f"INSERT INTO {db}.a VALUES (1), (2)"])
    captured = capture([
        f"CREATE TABLE {db}.b AS SELECT * FROM {db}.a",
        f"CREATE TABLE {db}.c (id INT PRIMARY KEY) ENGINE=MyISAM",
        f"INSERT INTO {db}.c VALUES (5)",
    ])
    segments = captured.batch.segments
    assert [(s.kind, getattr(s, "action", None)) for s in segments] == [
        ("ddl", "create_table"), ("rows", None), ("ddl", "create_table"), ("rows", None)]
    ctas, ctas_rows, _, myisam_rows = segments
    assert ctas_rows.start == ctas.end  # the rows continue the DDL's transaction
    assert [r["id"] for r in captured.rows(ctas_rows, "b")] == [1, 2]
    assert [r["id"] for r in captured.rows(myisam_rows, "c")] == [5]
    # a range may resume right after the DDL inside that transaction (a checkpoint the merge job
    # records there); it yields the rest of the transaction
    resumed = extract_range(leader_settings, RangeRequest("p", PositionRange(ctas.end, captured.batch.end)),
                            BatchTarget(open_store(f"file://{tmp_path}/resume")))
    assert [(s.kind, getattr(s, "action", None)) for s in resumed.segments] == [
        ("rows", None), ("ddl", "create_table"), ("rows", None)]
    assert resumed.segments[0].tables[0].row_count == 2


def test_a_long_range_is_cut_at_file_starts_into_parts_of_about_equal_size():
    files = [BinlogFile("b.000001", 1000), BinlogFile("b.000002", 4000), BinlogFile("b.000003", 1000),
             BinlogFile("b.000004", 3000), BinlogFile("b.000005", 900)]
    whole = PositionRange(BinlogPosition("b.000001", 500), BinlogPosition("b.000005", 700))
    assert split_range(whole, files, 1) == [whole]
    assert split_range(whole, files, 2) == [
        PositionRange(whole.start, BinlogPosition("b.000003", 4)),  # 500 + 4000 bytes of 9200
        PositionRange(BinlogPosition("b.000003", 4), whole.end),
    ]
    parts = split_range(whole, files, 8)  # never more parts than files, never an empty one
    assert [p.start for p in parts[1:]] == [BinlogPosition(f"b.00000{i}", 4) for i in range(2, 6)]
    # parts too small to pay for a process of their own are not cut: 9200 bytes hold two of 4000
    assert split_range(whole, files, 8, min_part_bytes=4000) == split_range(whole, files, 2)
    assert split_range(whole, files, 8, min_part_bytes=5000) == [whole]
    inside_one_file = PositionRange(BinlogPosition("b.000002", 4), BinlogPosition("b.000002", 900))
    assert split_range(inside_one_file, files, 4) == [inside_one_file]


def test_small_tables_share_packs_and_a_large_table_keeps_its_files(capture, unique_name, tmp_path):
    db = unique_name
    small = 12
    statements = [f"CREATE DATABASE {db}", f"CREATE TABLE {db}.big (id INT PRIMARY KEY, v VARCHAR(200))"]
    statements += [f"CREATE TABLE {db}.s{i:02d} (id INT PRIMARY KEY, v VARCHAR(20))" for i in range(small)]
    statements += [f"INSERT INTO {db}.s{i:02d} VALUES " + ", ".join(f"({k}, 'row {i}.{k}')" for k in range(i + 1))
                   for i in range(small)]
    statements += [f"INSERT INTO {db}.big SELECT seq, REPEAT(MD5(seq), 6) FROM {db}.seq_1_to_3000"]
    # packed files up to 16 KiB (the big table's file is larger), a new pack from 10 KiB on
    limits = WriterLimits(packed_file_bytes=16 << 10, pack_bytes=10 << 10)
    captured = capture(statements, limits=limits)
    (seg,) = [s for s in captured.batch.segments if isinstance(s, RowSegment)]
    tables = {t.table: t for t in seg.tables}
    seg_dir = f"seg-{seg.index:05d}"  # (the CREATE statements are segments before it)
    assert tables["big"].spans == () and tables["big"].files == (f"{seg_dir}/{db}.big/part-00000.parquet",)
    packed = [tables[f"s{i:02d}"] for i in range(small)]
    # in table order, each file right after the one before it, a new pack once one passes 10 KiB
    layout = [(t.files[0], t.spans[0]) for t in packed]
    assert all(len(t.files) == len(t.spans) == 1 for t in packed)
    packs = list(dict.fromkeys(f for f, _ in layout))
    assert len(packs) >= 2 and packs == [f"{seg_dir}/small-tables-{n:05d}.pack" for n in range(len(packs))]
    for (file, (offset, length)), (next_file, (next_offset, _)) in zip(layout, layout[1:]):
        assert next_offset == (offset + length if next_file == file else 0)
    # the batch's objects: the manifest, the big table's file and the packs, no file per small table
    keys = {k[len(captured.batch.prefix) + 1:] for k in captured.store.list_keys(captured.batch.prefix)}
    assert keys == {"manifest.json", f"{seg_dir}/{db}.big/part-00000.parquet", *packs}
    pack_sizes = {p: len(captured.store.get_bytes(f"{captured.batch.prefix}/{p}")) for p in packs}
    assert all(offset + length <= pack_sizes[file] for file, (offset, length) in layout)
    # each span is a whole Parquet file of its table's change rows
    for i in range(small):
        assert [(r["id"], r["v"], r["_op"]) for r in captured.rows(seg, f"s{i:02d}")] == [
            (k, f"row {i}.{k}", "I") for k in range(i + 1)]
    assert len(captured.rows(seg, "big")) == 3000
