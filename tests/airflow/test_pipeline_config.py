"""The pipelines file: defaults, strictness, and errors that name the file, pipeline and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mysql_cdc.pipeline_config import DEFAULT_SCHEDULE, PipelineConfigError, load_pipelines
from mysql_cdc.pipeline_options import ExtractOptions, MergeOptions, SnapshotOptions

REPO_ROOT = Path(__file__).resolve().parents[2]
MINIMAL = {
    "name": "shop",
    "leader_conn_id": "shop_leader",
    "follower_conn_id": "shop_follower",
    "storage_uri": "s3://lake/cdc",
}


def write(tmp_path: Path, *entries: dict, top: dict | None = None) -> Path:
    path = tmp_path / "pipelines.yaml"
    path.write_text(yaml.safe_dump(top if top is not None else {"pipelines": list(entries)}, sort_keys=False))
    return path


def error_of(tmp_path: Path, *entries: dict, top: dict | None = None) -> str:
    with pytest.raises(PipelineConfigError) as info:
        load_pipelines(write(tmp_path, *entries, top=top))
    return str(info.value)


def test_defaults(tmp_path):
    (config,) = load_pipelines(write(tmp_path, MINIMAL))
    assert config.name == "shop"
    assert config.schedule == DEFAULT_SCHEDULE == "*/5 * * * *"
    assert (config.aws_conn_id, config.spark_conn_id) == ("aws_default", "spark_default")
    assert (config.include, config.exclude) == (("*.*",), ())
    assert config.start_position == "snapshot" and config.on_purged == "fail"
    assert config.snapshot == SnapshotOptions()
    assert config.table_filter.captures_table("shop", "orders")


def test_every_field(tmp_path):
    entry = {**MINIMAL, "schedule": "@hourly", "aws_conn_id": None, "spark_conn_id": "spark_yarn",
             "include": ["shop.*", "crm.customers"], "exclude": ["shop.tmp_*"],
             "start_position": "binlog.000007:1146", "wait_timeout": 30, "poke_interval": 5,
             "retries": 0, "retry_delay": 0, "snapshot": {"split_rows": 1000, "workers": 4, "decoder": "python"},
             "extract": {"workers": 3, "decoder": "python"}, "merge": {"spark": "when_needed"}}
    (config,) = load_pipelines(write(tmp_path, entry))
    assert config.merge == MergeOptions(spark="when_needed") and MergeOptions().spark == "always"
    assert config.snapshot == SnapshotOptions(split_rows=1000, workers=4, decoder="python")
    assert config.extract == ExtractOptions(workers=3, decoder="python")
    assert config.schedule == "@hourly" and config.aws_conn_id is None
    assert config.include == ("shop.*", "crm.customers") and config.exclude == ("shop.tmp_*",)
    assert config.start_position == "binlog.000007:1146"
    assert (config.wait_timeout, config.poke_interval, config.retries, config.retry_delay) == (30, 5, 0, 0)
    assert not config.table_filter.captures_table("shop", "tmp_1")


def test_manual_only_schedule(tmp_path):
    (config,) = load_pipelines(write(tmp_path, {**MINIMAL, "schedule": None}))
    assert config.schedule is None


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"schedul": "@daily"}, "schedul", "unknown field(s) ['schedul']"),
        ({"schedule": "every five minutes"}, "schedule", "not a cron expression"),
        ({"schedule": "@fortnightly"}, "schedule", "not a schedule preset"),
        ({"start_position": "latest"}, "start_position", "must be 'snapshot', 'current', 'earliest' or FILE:POS"),
        ({"on_purged": "resnapshot"}, "on_purged", "must be one of ['fail', 'snapshot']"),
        ({"start_position": "binlog:12"}, "start_position", "FILE:OFFSET"),
        ({"include": "shop.*"}, "include", "must be a list of db.table globs"),
        ({"include": ["shop"]}, "include", "is not a db.table glob"),
        ({"include": []}, "include", "nothing would be captured"),
        ({"exclude": ["a.b.c"]}, "exclude", "is not a db.table glob"),
        ({"storage_uri": "hdfs://nn/cdc"}, "storage_uri", "scheme 'hdfs'"),
        ({"storage_uri": "file://relative/dir"}, "storage_uri", "file:///absolute/path"),
        ({"storage_uri": "s3:///cdc"}, "storage_uri", "names no bucket"),
        ({"name": "shop.orders"}, "name", "not a valid pipeline name"),
        ({"leader_conn_id": ""}, "leader_conn_id", "non-empty string"),
        ({"wait_timeout": 0}, "wait_timeout", "positive number of seconds"),
        ({"wait_timeout": True}, "wait_timeout", "positive number of seconds"),
        ({"poke_interval": 60}, "poke_interval", "longer than wait_timeout"),
        ({"retries": -1}, "retries", "whole number >= 0"),
        ({"retries": 1.5}, "retries", "whole number >= 0"),
        ({"snapshot": {"chunk_rows": 5}}, "snapshot", "unknown key(s) ['chunk_rows']; known keys are ['split_rows'"),
        ({"snapshot": {"workers": 0}}, "snapshot", "workers: must be a whole number >= 1"),
        ({"snapshot": {"decoder": "c"}}, "snapshot", "decoder: must be 'native' or 'python', got 'c'"),
        ({"snapshot": 4}, "snapshot", "must be a mapping with ['split_rows', 'workers', 'decoder']"),
        ({"extract": {"workers": "2"}}, "extract", "workers: must be a whole number >= 1"),
        ({"extract": {"decoder": "rust"}}, "extract", "decoder: must be 'native' or 'python', got 'rust'"),
        ({"extract": {"min_part_mb": -1}}, "extract", "min_part_mb: must be a whole number >= 0"),
        ({"merge": {"spark": "never"}}, "merge", "spark: must be 'always' or 'when_needed', got 'never'"),
        ({"merge": {"driver": "x"}}, "merge", "unknown key(s) ['driver']; known keys are ['spark']"),
        ({"heartbeat": "yes"}, "heartbeat", "must be true or false"),
        ({"max_seconds_behind": -5}, "max_seconds_behind", "positive number of seconds"),
        ({"verify": {"chunk_rows": 0}}, "verify", "chunk_rows: must be a whole number >= 1"),
        ({"verify": {"rechecks": -1}}, "verify", "rechecks: must be a whole number >= 0"),
        ({"verify": {"every": "@daily"}}, "verify", "unknown key(s) ['every']"),
        ({"verify": {"settle_timeout": 0}}, "verify", "settle_timeout: must be a positive number of seconds"),
    ],
)
def test_bad_field_is_named(tmp_path, change, field, words):
    message = error_of(tmp_path, {**MINIMAL, **change})
    assert str(tmp_path / "pipelines.yaml") in message
    assert "pipelines[0]" in message
    assert field in message
    assert words in message


def test_missing_required_fields_are_named(tmp_path):
    message = error_of(tmp_path, {"name": "shop", "storage_uri": "s3://lake/cdc"})
    assert "pipelines[0] (shop): missing required field(s) ['leader_conn_id', 'follower_conn_id']" in message


def test_the_failing_entry_is_identified(tmp_path):
    message = error_of(tmp_path, MINIMAL, {**MINIMAL, "name": "crm", "include": ["crm"]})
    assert "pipelines[1] (crm): field 'include'" in message


def test_duplicate_names(tmp_path):
    assert "'shop' is used twice" in error_of(tmp_path, MINIMAL, MINIMAL)


@pytest.mark.parametrize(
    ("top", "words"),
    [
        ({"pipelines": []}, "non-empty list"),
        ({"pipeline": [MINIMAL]}, "expected one top-level key 'pipelines'"),
        ({"pipelines": [MINIMAL], "defaults": {}}, "expected one top-level key 'pipelines'"),
        ({"pipelines": ["shop"]}, "expected a mapping of fields"),
    ],
)
def test_bad_shape(tmp_path, top, words):
    assert words in error_of(tmp_path, top=top)


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(PipelineConfigError, match="cannot read the pipelines file .*CDC_PIPELINES_FILE"):
        load_pipelines(tmp_path / "missing.yaml")
    path = tmp_path / "broken.yaml"
    path.write_text("pipelines: [\n")
    with pytest.raises(PipelineConfigError, match="not valid YAML"):
        load_pipelines(path)


def test_environment_interpolation(tmp_path, monkeypatch):
    entry = {**MINIMAL, "storage_uri": "${CDC_TEST_URI:-file://${PIPELINES_DIR}/../batches}",
             "leader_conn_id": "${CDC_TEST_LEADER}"}
    monkeypatch.setenv("CDC_TEST_LEADER", "leader_from_env")
    monkeypatch.delenv("CDC_TEST_URI", raising=False)
    (config,) = load_pipelines(write(tmp_path, entry))
    assert config.leader_conn_id == "leader_from_env"
    assert config.storage_uri == f"file://{tmp_path.parent}/batches"  # '..' folded

    monkeypatch.setenv("CDC_TEST_URI", "s3://bucket/from-env/")
    (config,) = load_pipelines(write(tmp_path, entry))
    assert config.storage_uri == "s3://bucket/from-env"

    monkeypatch.delenv("CDC_TEST_LEADER")
    message = error_of(tmp_path, entry)
    assert "pipelines[0] (shop).leader_conn_id: environment variable CDC_TEST_LEADER is not set" in message


def test_values_from_the_environment_are_never_expanded_again(tmp_path, monkeypatch):
    entry = {**MINIMAL, "leader_conn_id": "${CDC_TEST_LEADER}", "follower_conn_id": "f_${CDC_TEST_SELF:-x}"}
    monkeypatch.setenv("CDC_TEST_LEADER", "pw${HOME}")  # e.g. a secret that happens to hold '${'
    monkeypatch.setenv("CDC_TEST_SELF", "a${CDC_TEST_SELF}")  # once looped forever
    (config,) = load_pipelines(write(tmp_path, entry))
    assert config.leader_conn_id == "pw${HOME}"
    assert config.follower_conn_id == "f_a${CDC_TEST_SELF}"
    unclosed = error_of(tmp_path, {**MINIMAL, "leader_conn_id": "${CDC_TEST_LEADER:-x"})
    assert "leader_conn_id: a ${...:-default} is not closed with '}'" in unclosed


def test_the_default_pipelines_file(monkeypatch):
    monkeypatch.delenv("CDC_STORAGE_URI", raising=False)
    monkeypatch.delenv("CDC_START_POSITION", raising=False)
    (config,) = load_pipelines(REPO_ROOT / "dags" / "pipelines.yaml")
    assert config.name == "mysql_cdc"
    assert (config.leader_conn_id, config.follower_conn_id, config.aws_conn_id, config.spark_conn_id) == (
        "mysql_leader", "mysql_follower", "aws_default", "spark_default")
    assert config.schedule == "*/5 * * * *"
    assert config.storage_uri == f"file://{REPO_ROOT}/.local/cdc-batches"
    assert config.start_position == "earliest"


LAKE = {**{k: v for k, v in MINIMAL.items() if k != "follower_conn_id"},
        "follower": {"kind": "delta", "location": "s3://lake/mysql/"}}


def test_a_delta_lake_follower_instead_of_a_connection(tmp_path):
    (config,) = load_pipelines(write(tmp_path, {**LAKE, "maintenance": {"schedule": "@hourly", "retain_hours": 24}}))
    assert config.follower_conn_id is None and (config.follower.kind, config.follower_config["location"]) == (
        "delta", "s3://lake/mysql")
    assert config.follower_config == {"kind": "delta", "location": "s3://lake/mysql", "aws_conn_id": "aws_default",
                                      "changelog": [], "features": "standard", "partition_by": {},
                                      "soft_deletes": [], "history": [], "catalog": None}
    assert (config.maintenance.schedule, config.maintenance.retain_hours) == ("@hourly", 24)
    assert config.describe_follower() == "delta at s3://lake/mysql"


@pytest.mark.parametrize(("changelog", "tables"), [
    (True, ["*.*"]), (False, []), (["shop.orders", " crm.* "], ["shop.orders", "crm.*"])])
def test_changelog_tables_are_named_by_globs(tmp_path, changelog, tables):
    (config,) = load_pipelines(write(tmp_path, {**LAKE, "follower": {**LAKE["follower"], "changelog": changelog}}))
    assert config.follower_config["changelog"] == tables


def test_a_lake_chooses_its_table_features_and_the_merge_job_receives_them(tmp_path):
    from mysql_cdc.hooks.follower import follower_hook

    lake = {**LAKE, "follower": {"kind": "delta", "location": f"file://{tmp_path}/lake", "features": "portable"}}
    (config,) = load_pipelines(write(tmp_path, lake))
    assert config.follower_config["features"] == "portable"
    # what the merge job's secrets file carries (kinds.FollowerSpec): the sink creates tables so
    assert follower_hook(config.follower_reference).spec().settings["features"] == "portable"


def test_a_lake_names_its_catalog_and_the_merge_job_receives_it(tmp_path):
    from mysql_cdc.hooks.follower import follower_hook
    from mysql_cdc.kinds.delta.catalog import MetastoreRef
    from mysql_cdc.kinds.delta.options import LakeOptions

    lake = {**LAKE, "follower": {"kind": "delta", "location": f"file://{tmp_path}/lake",
                                 "catalog": {"metastore_uri": " thrift://metastore.internal:9083 "}}}
    (config,) = load_pipelines(write(tmp_path, lake))
    assert config.follower_config["catalog"] == {"metastore_uri": "thrift://metastore.internal:9083"}
    options = LakeOptions.from_json(follower_hook(config.follower_reference).spec().settings)
    assert options.catalog == MetastoreRef("metastore.internal", 9083)
    assert config.describe_follower() == (f"delta at file://{tmp_path}/lake, named in the Hive Metastore "
                                          "thrift://metastore.internal:9083")


def test_a_lake_partitions_tables_by_globs_and_the_merge_job_receives_them(tmp_path):
    from mysql_cdc.hooks.follower import follower_hook
    from mysql_cdc.kinds.delta.options import LakeOptions

    partition_by = {"shop.orders": ["region", "Day"], "shop.*": ["tenant"]}
    lake = {**LAKE, "follower": {"kind": "delta", "location": f"file://{tmp_path}/lake", "partition_by": partition_by}}
    (config,) = load_pipelines(write(tmp_path, lake))
    options = LakeOptions.from_json(follower_hook(config.follower_reference).spec().settings)
    # the first glob that names a table, in the file's order
    assert options.partition_columns("shop", "orders") == ("region", "Day")
    assert options.partition_columns("shop", "items") == ("tenant",)
    assert options.partition_columns("crm", "orders") == ()


@pytest.mark.parametrize(("change", "words"), [
    ({"follower": {"kind": "delta", "location": "s3://x", "changelog": "yes"}},
     "field 'follower': changelog: must be true, false or a list of db.table globs"),
    ({"follower": {"kind": "delta", "location": "s3://x", "soft_deletes": {"shop.*": True}}},
     "field 'follower': soft_deletes: must be true, false or a list of db.table globs"),
    ({"follower": {"kind": "delta", "location": "s3://x", "history": "shop.*"}},
     "field 'follower': history: must be true, false or a list of db.table globs"),
    ({"follower": {"kind": "delta", "location": "s3://x", "features": "fast"}},
     "field 'follower': features: must be one of standard (column mapping and deletion vectors"),
    ({"follower": {"kind": "delta", "location": "s3://x", "partition_by": ["shop.orders"]}},
     "field 'follower': partition_by: must map db.table globs to lists of column names"),
    ({"follower": {"kind": "delta", "location": "s3://x", "partition_by": {"shop.orders": []}}},
     "field 'follower': partition_by.shop.orders: must be a non-empty list of column names"),
    ({"follower": {"kind": "delta", "location": "s3://x", "partition_by": {"orders": ["region"]}}},
     "field 'follower': partition_by: include: 'orders' is not a db.table glob"),
    ({"follower": {"kind": "delta", "location": "s3://x", "partition_by": {"shop.o": ["a", "A"]}}},
     "field 'follower': partition_by.shop.o: names a column twice"),
    ({"follower_conn_id": "f"}, "give the follower once: 'follower_conn_id' (a MySQL/MariaDB connection) or 'follower'"),
    ({"follower": {"kind": "hudi", "location": "s3://x"}},
     "field 'follower': kind must be one of ['delta', 'iceberg', 'mysql']"),
    ({"follower": {"kind": "iceberg", "location": "s3://x"}}, "field 'follower': unknown key(s) ['location']; known keys are "
     "['catalog', 'conn_id', 'database', 'history', 'kind', 'soft_deletes', 'warehouse']"),
    ({"follower": {"kind": "iceberg", "catalog": "lake", "conn_id": "c", "database": "d", "warehouse": "s3://w",
                   "soft_deletes": "shop.orders"}},
     "field 'follower': soft_deletes: must be true, false or a list of db.table globs"),
    ({"follower": {"kind": "iceberg", "catalog": "lake", "conn_id": "c", "database": "a-b", "warehouse": "s3://w"}},
     "field 'follower': database: 'a-b' is not a plain name"),
    ({"follower": {"kind": "iceberg", "catalog": "lake", "conn_id": "c", "database": "d"}},
     "field 'follower': warehouse: required for an iceberg follower"),
    ({"follower": {"kind": "delta", "location": "s3://x", "catalog": "glue"}},
     "field 'follower': catalog: must be a mapping, such as catalog: {metastore_uri: thrift://metastore:9083}"),
    ({"follower": {"kind": "delta", "location": "s3://x", "catalog": {"uri": "thrift://m:9083"}}},
     "field 'follower': catalog.uri: unknown key; the keys are metastore_uri (the Hive Metastore's Thrift address"),
    ({"follower": {"kind": "delta", "location": "s3://x", "catalog": {"metastore_uri": "http://m:9083"}}},
     "field 'follower': catalog.metastore_uri: must be thrift://host:port"),
    ({"follower": {"kind": "delta", "location": "s3://x", "catalog": {"metastore_uri": "thrift://m"}}},
     "field 'follower': catalog.metastore_uri: must be thrift://host:port"),
    ({"follower": {"kind": "delta", "location": "gs://x"}}, "field 'follower': location:"),
    ({"maintenance": {"retain_hours": 0.5}}, "retain_hours: must be a number of hours >= 1"),
])
def test_a_bad_lake_follower_is_named(tmp_path, change, words):
    assert words in error_of(tmp_path, {**LAKE, **change})


@pytest.mark.parametrize("option", ["soft_deletes", "history"])
@pytest.mark.parametrize(("given", "globs"), [(None, []), (True, ["*.*"]), (["shop.orders", " crm.* "], ["shop.orders", "crm.*"])])
def test_a_lake_follower_names_the_tables_of_each_history_mode(tmp_path, option, given, globs):
    from mysql_cdc.hooks.follower import follower_hook
    from mysql_cdc.kinds.delta.options import LakeOptions

    chosen = {} if given is None else {option: given}
    follower = {"kind": "iceberg", "catalog": "lake", "conn_id": "c", "database": "d", "warehouse": "s3://w", **chosen}
    (config,) = load_pipelines(write(tmp_path, {**LAKE, "follower": follower}))
    assert config.follower_reference[option] == globs
    assert getattr(follower_hook(config.follower_reference), option) == tuple(globs)
    lake = {**LAKE, "follower": {"kind": "delta", "location": f"file://{tmp_path}/lake", **chosen}}
    (config,) = load_pipelines(write(tmp_path, lake))
    options = LakeOptions.from_json(follower_hook(config.follower_reference).spec().settings)
    assert getattr(options, option) == tuple(globs)


def test_the_short_form_is_the_same_reference(tmp_path):
    (config,) = load_pipelines(write(tmp_path, MINIMAL))
    assert config.follower_reference == {"kind": "mysql", "conn_id": "shop_follower"}


def test_a_mysql_follower_is_one_reference_too(tmp_path):
    """``follower: {kind: mysql, conn_id: ...}`` names the same follower as ``follower_conn_id``, and
    its hook is the MySQL kind's, found by the kind's name."""
    from mysql_cdc.hooks.follower import follower_hook

    described = {**LAKE, "follower": {"kind": "mysql", "conn_id": "shop_follower"}}
    (config,) = load_pipelines(write(tmp_path, described))
    assert config.follower_config == config.follower_reference == {"kind": "mysql", "conn_id": "shop_follower"}
    assert config.describe_follower() == "shop_follower" and not config.kind.maintained
    hook = follower_hook(config.follower_reference)
    short = follower_hook("shop_follower")
    assert (type(hook), hook.mysql_conn_id) == (type(short), short.mysql_conn_id) == (type(short), "shop_follower")


@pytest.mark.parametrize(("follower", "words"), [
    ({"kind": "mysql"}, "field 'follower': conn_id: must be the follower's Airflow connection id, got None"),
    ({"kind": "mysql", "conn_id": "f", "location": "s3://x"}, "unknown key(s) ['location']; known keys are ['conn_id', 'kind']"),
])
def test_a_bad_mysql_follower_reference_is_named(tmp_path, follower, words):
    assert words in error_of(tmp_path, {**LAKE, "follower": follower})


def test_a_continuous_pipeline_waits_an_hour_for_the_leader_by_default(tmp_path):
    (config,) = load_pipelines(write(tmp_path, {**MINIMAL, "schedule": "@continuous"}))
    assert (config.schedule, config.wait_timeout) == ("@continuous", 3600.0)
    (given,) = load_pipelines(write(tmp_path, {**MINIMAL, "schedule": "@continuous", "wait_timeout": 600}))
    assert given.wait_timeout == 600.0
    (cron,) = load_pipelines(write(tmp_path, MINIMAL))
    assert cron.wait_timeout == 5.0


def test_a_continuous_pipeline_with_a_short_wait_is_refused_naming_the_cost(tmp_path):
    words = error_of(tmp_path, {**MINIMAL, "schedule": "@continuous", "wait_timeout": 5})
    assert "field 'wait_timeout': 5s with schedule '@continuous' would start a run every 5s while the leader is idle" \
        in words and "at least 60s" in words
