"""MergeJobHook: when Spark is needed at all, and the job's inputs (zip + 0600 secrets file)."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest

from mysql_cdc.contracts import (
    BinlogPosition, ChangeBatch, Checkpoint, DdlSegment, DdlTarget, MissingCheckpointError, PositionRange, RangeGapError,
    batch_id_for,
)
from mysql_cdc.hooks import MergeJobHook
from mysql_cdc.hooks import merge_job
from mysql_cdc.hooks.merge_job import ADVANCE, SKIP, SUBMIT
from mysql_cdc.merge.report import SUMMARY_ENV
from mysql_cdc.job_secrets import SECRETS_ENV, JobSecrets
from mysql_cdc.spark_lines import UntestedSparkError
from spark_under_test import SPARK_SUBMIT, spark_distribution

P1, P2, P3 = (BinlogPosition("binlog.000001", o) for o in (4, 900, 1800))


def batch(pipeline: str, start: BinlogPosition, end: BinlogPosition, ddl: bool = False) -> ChangeBatch:
    segments = (DdlSegment(index=0, start=start, end=end, schema="", statement="CREATE DATABASE x",
                           action="create_database", targets=(DdlTarget("x"),)),) if ddl else ()
    return ChangeBatch(pipeline=pipeline, batch_id=batch_id_for(PositionRange(start, end)), start=start, end=end,
                       segments=segments)


@pytest.fixture
def hook(monkeypatch, follower_user, tmp_path) -> MergeJobHook:
    monkeypatch.setenv("AIRFLOW_CONN_CDC_TEST_FOLLOWER", json.dumps(
        {"conn_type": "mysql", "host": follower_user["host"], "port": follower_user["port"],
         "login": follower_user["user"], "password": follower_user["password"]}))
    monkeypatch.setenv("AIRFLOW_CONN_CDC_TEST_SPARK", json.dumps(
        {"conn_type": "spark", "host": "local[1]", "extra": {"spark-binary": str(SPARK_SUBMIT)}}))
    return MergeJobHook("cdc_test_follower", f"file://{tmp_path}", None, "cdc_test_spark")


def stored(hook: MergeJobHook, b: ChangeBatch) -> str:
    hook.storage.store.put_bytes(f"{b.prefix}/manifest.json", b.to_json().encode())
    return hook.storage.manifest_uri(b)


def test_plan(hook, unique_name):
    hook.follower.state.initialize(Checkpoint(unique_name, P2))
    assert hook.plan(stored(hook, batch(unique_name, P1, P2, ddl=True))).action == SKIP
    assert hook.plan(stored(hook, batch(unique_name, P1, P3, ddl=True))).action == SUBMIT  # overlaps: job decides
    assert hook.plan(stored(hook, batch(unique_name, P2, P3, ddl=True))).action == SUBMIT
    empty = hook.plan(stored(hook, batch(unique_name, P2, P3)))
    assert empty.action == ADVANCE
    assert hook.advance(empty)
    assert hook.follower.state.checkpoint(unique_name).position == P3
    assert hook.plan(stored(hook, batch(unique_name, P2, P3))).action == SKIP


def test_plan_refuses_a_gap_and_a_pipeline_without_checkpoint(hook, unique_name):
    with pytest.raises(MissingCheckpointError, match="the follower has no checkpoint for pipeline"):
        hook.plan(stored(hook, batch(unique_name, P1, P2, ddl=True)))
    hook.follower.state.initialize(Checkpoint(unique_name, P1))
    with pytest.raises(RangeGapError, match=r"would skip the changes in \[binlog.000001:4, binlog.000001:900\)"):
        hook.plan(stored(hook, batch(unique_name, P2, P3, ddl=True)))


def test_job_inputs_live_only_while_submitting(hook, follower_user, monkeypatch, tmp_path):
    fake_job = tmp_path / "merge_batch.py"
    fake_job.write_text("")
    monkeypatch.setattr(merge_job, "MERGE_JOB", fake_job)
    with hook.job_inputs() as inputs:
        assert set(inputs.env) == {SECRETS_ENV, SUMMARY_ENV}  # two paths, nothing else
        secrets_file = Path(inputs.env[SECRETS_ENV])
        assert Path(inputs.env[SUMMARY_ENV]).parent == secrets_file.parent  # removed with it
        assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(secrets_file.parent.stat().st_mode) == 0o700
        secrets = JobSecrets.read(str(secrets_file))
        assert (secrets.sink.kind, secrets.sink.settings["user"], secrets.sink.settings["password"]) == (
            "mysql", follower_user["user"], follower_user["password"])
        assert secrets.storage.options == {}  # file:// storage: nothing to reach it with
        with zipfile.ZipFile(inputs.py_files) as zf:
            assert "mysql_cdc/contracts/checkpoint.py" in zf.namelist()
    assert not secrets_file.parent.exists()


def test_job_inputs_are_removed_when_the_submit_fails(hook, monkeypatch, tmp_path):
    fake_job = tmp_path / "merge_batch.py"
    fake_job.write_text("")
    monkeypatch.setattr(merge_job, "MERGE_JOB", fake_job)
    with pytest.raises(RuntimeError), hook.job_inputs() as inputs:
        secrets_dir = Path(inputs.py_files).parent
        raise RuntimeError("spark-submit failed")
    assert not secrets_dir.exists()


def test_a_missing_merge_job_is_reported(hook, monkeypatch, tmp_path):
    monkeypatch.setattr(merge_job, "MERGE_JOB", tmp_path / "nowhere" / "merge_batch.py")
    with pytest.raises(FileNotFoundError, match="MYSQL_CDC_SPARK_JOBS_DIR"), hook.job_inputs():
        pass


def test_a_spark_line_the_job_is_not_tested_on_is_refused_before_anything_runs(hook, monkeypatch, tmp_path,
                                                                                unique_name):
    """A connection pointing at a Spark 3.5 (its distribution's layout: Spark 3.5 itself is not
    installed here): the submit is refused with the tested lines named, nothing started, no job
    inputs written."""
    spark_35 = spark_distribution(tmp_path / "spark-3.5.6", "3.5.6")
    monkeypatch.setenv("AIRFLOW_CONN_CDC_TEST_SPARK", json.dumps(
        {"conn_type": "spark", "host": "local[1]", "extra": {"spark-binary": str(spark_35.binary)}}))
    hook.follower.state.initialize(Checkpoint(unique_name, P1))
    uri = stored(hook, batch(unique_name, P1, P2, ddl=True))
    assert hook.plan(uri).action == SUBMIT
    made = set(Path(merge_job.tempfile.gettempdir()).glob("mysql-cdc-merge-*"))
    with pytest.raises(UntestedSparkError, match=r"runs Spark 3\.5\.6; the merge job is tested on Spark 4\.0, 4\.1, "
                                                 r"4\.2 \(docs/spark\.md\): set the Spark connection's spark-binary"):
        hook.submit([uri], "mysql-cdc-merge-test", {})
    assert not spark_35.ran()
    assert set(Path(merge_job.tempfile.gettempdir()).glob("mysql-cdc-merge-*")) == made
