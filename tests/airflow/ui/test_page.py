"""The page's HTML from inline figures (pure functions: no servers)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from mysql_cdc.contracts import BinlogPosition, Checkpoint
from mysql_cdc.contracts.history import BatchRecord, FailedTry
from mysql_cdc.monitor.lag import PipelineFigures
from mysql_cdc.pipeline_config import FollowerConfig, PipelineConfig
from mysql_cdc.ui.data import PipelineView
from mysql_cdc.ui.page import lag_chart, latency_points, render_page

CONFIG = PipelineConfig(name="shop", leader_conn_id="l", follower_conn_id="f", storage_uri="file:///tmp/x")
T0 = dt.datetime(2026, 11, 23, 12, 0, 0)


def record(run: str, status: str, committed: dt.datetime | None, merged: dt.datetime | None, **extra) -> BatchRecord:
    return BatchRecord(pipeline="shop", run_id=run, kind="stream", status=status, end_time=committed,
                       merged_at=merged, **extra)


def test_latency_is_commit_to_merge_of_merged_batches_oldest_first():
    history = [
        record("r3", "failed", None, None, error="boom"),
        record("r2", "merged", T0 + dt.timedelta(minutes=5), T0 + dt.timedelta(minutes=5, seconds=30)),
        record("r1", "merged", T0, T0 + dt.timedelta(seconds=12)),
        record("r0", "merged", None, T0),  # a copy: no commit time, no point
    ]
    history.insert(0, BatchRecord(pipeline="shop", run_id="old", kind="replay", status="merged", end_time=T0,
                                  merged_at=T0 + dt.timedelta(days=3)))  # re-read on purpose: not lag
    assert latency_points(history) == [(T0 + dt.timedelta(seconds=12), 12.0),
                                       (T0 + dt.timedelta(minutes=5, seconds=30), 30.0)]
    assert lag_chart(latency_points(history)).count("<circle") == 2
    assert "No merged batch" in lag_chart([])


def test_what_the_servers_say_is_escaped():
    figures = PipelineFigures(
        name="shop", checkpoint=Checkpoint("shop", BinlogPosition.parse("binlog.000001:4"), gtid_set="0-1-41"),
        leader_position=BinlogPosition.parse("binlog.000001:900"), bytes_behind=896, seconds_behind=3.5,
        last_applied_time=T0,
        history=(record("run<1>", "failed", None, None, error="<script>alert(1)</script>"),), verification=None)
    html = render_page([PipelineView(CONFIG, figures), PipelineView(CONFIG, None, "ConnectionError: <refused>")],
                       message="Triggered <run>")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Cannot read this pipeline: ConnectionError: &lt;refused&gt;" in html
    assert "Triggered &lt;run&gt;" in html
    assert 'data-figure="bytes_behind"><div class="value">896<' in html
    assert "checkpoint (GTID set 0-1-41)" in html  # the last applied position and GTID set
    assert 'href="../dags/shop/runs/run%3C1%3E"' in html


def test_the_batch_stores_figure_says_what_retention_kept_or_why_there_is_none():
    from dataclasses import replace

    from mysql_cdc.batch_retention import RetentionRecord
    from mysql_cdc.pipeline_options import BatchOptions

    figures = PipelineFigures(
        name="shop", checkpoint=None, leader_position=BinlogPosition.parse("binlog.000001:900"), bytes_behind=None,
        seconds_behind=None, last_applied_time=None, history=(), verification=None)
    record = RetentionRecord("36h", "2026-11-28T02:00:00+00:00", kept_batches=12, kept_bytes=3 * 2**20 + 2**19,
                             deleted_batches=1, deleted_bytes=10, retired_ids=["b0"])
    shown = render_page([PipelineView(CONFIG, figures, batch_storage=record)])
    assert ('data-figure="batch_storage"><div class="value">3.5 MiB</div><div class="label">in 12 change batches '
            '(retain 36h; 1 batch deleted at 2026-11-28T02:00:00+00:00)') in shown
    assert "not measured yet" in render_page([PipelineView(CONFIG, figures)])
    forever = replace(CONFIG, batches=BatchOptions(retain=None))
    assert "kept forever" in render_page([PipelineView(forever, figures)])
    body = PipelineView(CONFIG, figures, batch_storage=record).to_json()["batch_storage"]
    assert body == {"retain": "36h", "ran_at": "2026-11-28T02:00:00+00:00", "kept_batches": 12,
                    "kept_bytes": 3 * 2**20 + 2**19, "deleted_batches": 1, "deleted_bytes": 10}


def test_every_failed_try_is_shown_under_its_run_cause_first():
    tries = (FailedTry("shop", "r1", "merge_batch", 1, "merge_batch: the merge job ended without an error of its own"),
             FailedTry("shop", "r1", "merge_batch", 2, "merge_batch: Lost connection <x> (MySQL error 2013)"))
    figures = PipelineFigures(
        name="shop", checkpoint=None, leader_position=BinlogPosition.parse("binlog.000001:900"), bytes_behind=None,
        seconds_behind=None, last_applied_time=None,
        history=(record("r1", "merged", T0, T0, failed_tries=tries),), verification=None)
    html = render_page([PipelineView(CONFIG, figures)])
    assert ('<div class="failed-try">merge_batch try 1 failed: the merge job ended without an error of its own'
            '</div>') in html
    assert "merge_batch try 2 failed: Lost connection &lt;x&gt; (MySQL error 2013)" in html
    body = figures.to_json()["last_batch"]
    assert [(t["try_number"], t["error"]) for t in body["failed_tries"]] == [(1, tries[0].error), (2, tries[1].error)]


def test_a_broken_pipelines_file_is_answered_with_its_own_message(monkeypatch, tmp_path):
    """The app's routes on their own (FastAPI's test client); Airflow's auth is replaced by a
    fixed user here because no API server runs in this test (the browser tests use the real one)."""
    from fastapi.testclient import TestClient

    from mysql_cdc.ui import app as ui

    broken = tmp_path / "pipelines.yaml"
    broken.write_text("pipelines:\n  - name: shop\n    shedule: '@daily'\n")
    monkeypatch.setenv("CDC_PIPELINES_FILE", str(broken))
    ui.app.dependency_overrides[ui.current_user] = lambda: object()
    try:
        response = TestClient(ui.app).get("/api/pipelines")
    finally:
        ui.app.dependency_overrides.clear()
    assert response.status_code == 500
    assert "pipelines[0] (shop): unknown field(s) ['shedule']" in response.json()["detail"]


def test_a_lake_pipeline_shows_its_tables_at_the_consistent_cut(tmp_path):
    lake = PipelineConfig("lake", "mysql_leader", "file:///b", follower=FollowerConfig("delta", {"location": "s3://lake/mysql"}))
    figures = PipelineFigures(
        name="lake", checkpoint=None, leader_position=BinlogPosition.parse("binlog.000001:900"), bytes_behind=None,
        seconds_behind=None, last_applied_time=None, history=(), verification=None,
        table_versions={"shop.orders": 7, "shop.pet": 2})
    html = render_page([PipelineView(lake, figures)])
    assert '<tr class="lake-table"><td>shop.orders</td><td class="num">7</td>' in html
    assert "<code>s3://lake/mysql/shop/pet</code> VERSION AS OF 2" in html
    assert "lake-table" not in render_page([PipelineView(CONFIG, replace(figures, table_versions=None))])
    assert figures.to_json()["table_versions"] == {"shop.orders": 7, "shop.pet": 2}
