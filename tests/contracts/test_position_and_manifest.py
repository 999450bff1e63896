"""Position order and manifest strictness (pure, no server)."""

import json

import pytest

from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.contracts import BinlogPosition, ChangeBatch, InvalidPosition, ManifestError, PositionRange
from mysql_cdc.contracts.batch import FORMAT_VERSION


def test_positions_parse_format_and_order_across_files():
    p = BinlogPosition.parse("binlog.000003:1146")
    assert (p.file, p.offset, p.sequence, str(p)) == ("binlog.000003", 1146, 3, "binlog.000003:1146")
    ordered = ["binlog.000002:99999", "binlog.000003:4", "binlog.000003:1146", "binlog.999999:4", "binlog.1000000:4"]
    assert sorted(BinlogPosition.parse(s) for s in reversed(ordered)) == [BinlogPosition.parse(s) for s in ordered]
    assert sorted(BinlogPosition.parse(s).token() for s in ordered) == [BinlogPosition.parse(s).token() for s in ordered]


@pytest.mark.parametrize("text", ["", "binlog.000003", "binlog:12", "binlog.000003:-1", "a b.1:2"])
def test_bad_positions_say_how_to_write_one(text):
    with pytest.raises(InvalidPosition, match="FILE:OFFSET|numeric sequence|>= 0"):
        BinlogPosition.parse(text)


def test_range_rejects_end_before_start():
    with pytest.raises(InvalidPosition, match="before its start"):
        PositionRange(BinlogPosition.parse("b.000002:4"), BinlogPosition.parse("b.000001:900"))


def _manifest(**extra):
    body = {"format_version": FORMAT_VERSION, "pipeline": "p", "batch_id": "x", "start": "b.000001:4", "end": "b.000001:9",
            "start_gtid": None, "end_gtid": None, "start_gtid_set": None, "end_gtid_set": None, "leader_id": None,
            "end_time": None, "server_flavor": "mariadb", "row_count": 0, "segments": []}
    body.update(extra)
    return json.dumps(body)


def test_manifest_rejects_unknown_and_missing_fields_by_name():
    assert ChangeBatch.from_json(_manifest()).end == BinlogPosition.parse("b.000001:9")
    with pytest.raises(ManifestError, match=r"unknown field\(s\) \['rows'\]"):
        ChangeBatch.from_json(_manifest(rows=3))
    with pytest.raises(ManifestError, match=r"segments\[0\].kind: 'view' is not one of"):
        ChangeBatch.from_json(_manifest(segments=[{"kind": "view"}]))
    body = json.loads(_manifest())
    del body["end"]
    with pytest.raises(ManifestError, match=r"missing field\(s\) \['end'\]"):
        ChangeBatch.from_json(json.dumps(body))
    # a field with a default in the dataclass is still required in the file (once a KeyError)
    body = json.loads(_manifest())
    del body["start_gtid"]
    with pytest.raises(ManifestError, match=r"manifest: missing field\(s\) \['start_gtid'\]"):
        ChangeBatch.from_json(json.dumps(body))


def test_table_filter_globs():
    f = TableFilter(include=("shop.*", "*.audit"), exclude=("shop.tmp_*",))
    assert f.captures_table("shop", "orders") and f.captures_table("hr", "audit")
    assert not f.captures_table("shop", "tmp_x") and not f.captures_table("hr", "people")
    assert not TableFilter().captures_table("mysql", "user")
    assert f.captures_database("shop") and f.captures_database("hr") is True
    assert not TableFilter(exclude=("hr.*",)).captures_database("hr")
    with pytest.raises(ValueError, match=r"include: 'shop' is not a db.table glob"):
        TableFilter(include=("shop",))


def test_manifest_of_an_older_format_names_the_way_out():
    with pytest.raises(ManifestError, match="written by an older mysql-cdc: extract its range again"):
        ChangeBatch.from_json(_manifest(format_version=2))
    with pytest.raises(ManifestError, match="upgrade mysql-cdc"):
        ChangeBatch.from_json(_manifest(format_version=FORMAT_VERSION + 1))


def _rows_segment(**table_fields) -> dict:
    table = {"database": "shop", "table": "orders", "key_columns": ["id"], "files": ["seg-00000/shop.orders/part-00000.parquet"],
             "row_count": 2, "columns": [{"name": "id", "mysql_type": "int", "arrow_type": "int32", "nullable": False}]}
    table.update(table_fields)
    return {"kind": "rows", "index": 0, "start": "b.000001:4", "end": "b.000001:9", "gtid_set": None, "tables": [table]}


def test_a_format_3_manifest_reads_as_format_4_without_packs():
    # a batch extracted before an upgrade and merged after it
    (segment,) = ChangeBatch.from_json(_manifest(format_version=3, segments=[_rows_segment()])).segments
    (table,) = segment.tables
    assert table.spans == () and table.file_spans() == [("seg-00000/shop.orders/part-00000.parquet", None)]
    # format 4 names the spans, if only as none
    with pytest.raises(ManifestError, match=r"missing field\(s\) \['spans'\]"):
        ChangeBatch.from_json(_manifest(segments=[_rows_segment()]))
    packed = _rows_segment(files=["seg-00000/small-tables-00000.pack"], spans=[[120, 900]])
    (segment,) = ChangeBatch.from_json(_manifest(segments=[packed])).segments
    assert segment.tables[0].file_spans() == [("seg-00000/small-tables-00000.pack", (120, 900))]
    for bad in ([[120]], [[-1, 5]], "0-900"):
        with pytest.raises(ManifestError, match=r"segments\[0\].tables\[0\].spans: expected a list of \[offset, length\]"):
            ChangeBatch.from_json(_manifest(segments=[_rows_segment(spans=bad)]))
    with pytest.raises(ManifestError, match="shop.orders: 2 spans for 1 files"):
        ChangeBatch.from_json(_manifest(segments=[_rows_segment(spans=[[0, 1], [1, 2]])]))
