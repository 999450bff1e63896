"""Every hook resolves its Airflow connection up front and names it when it is missing or wrong."""

from __future__ import annotations

import asyncio
import json

import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

from mysql_cdc.hooks import BatchStorageHook, ConnectionConfigError, LeaderHook, MergeJobHook
from mysql_cdc.kinds.mysql.hook import FollowerHook


def set_conn(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


@pytest.mark.parametrize(("hook_class", "role"), [(LeaderHook, "leader"), (FollowerHook, "follower")])
def test_missing_mysql_connection_is_named(hook_class, role):
    with pytest.raises(AirflowNotFoundException) as info:
        hook_class("cdc_no_such_conn").settings
    assert f"{role} connection 'cdc_no_such_conn' is not defined" in str(info.value)
    assert "AIRFLOW_CONN_CDC_NO_SUCH_CONN" in str(info.value)


def test_missing_connection_is_named_in_the_trigger_path_too():
    with pytest.raises(AirflowNotFoundException, match="leader connection 'cdc_no_such_conn'"):
        asyncio.run(LeaderHook("cdc_no_such_conn").asettings())


def test_wrong_connection_type_is_named(monkeypatch):
    set_conn(monkeypatch, "cdc_s3_by_mistake", conn_type="aws", login="key", password="secret")
    with pytest.raises(ConnectionConfigError, match="leader connection 'cdc_s3_by_mistake' has type 'aws'"):
        LeaderHook("cdc_s3_by_mistake").settings


@pytest.mark.parametrize(("fields", "words"), [({"login": "u"}, "has no host"), ({"host": "db"}, "has no login")])
def test_incomplete_mysql_connection(monkeypatch, fields, words):
    set_conn(monkeypatch, "cdc_half", conn_type="mysql", **fields)
    with pytest.raises(ConnectionConfigError, match=f"follower connection 'cdc_half' {words}"):
        FollowerHook("cdc_half").settings


def test_settings_from_a_connection(monkeypatch):
    set_conn(monkeypatch, "cdc_leader_a", conn_type="mysql", host="db.internal", login="cdc", password="pw-1234567")
    set_conn(monkeypatch, "cdc_leader_b", conn_type="generic", host="db2", port=3307, login="cdc")
    a, b = LeaderHook("cdc_leader_a").settings, asyncio.run(LeaderHook("cdc_leader_b").asettings())
    assert (a.host, a.port, a.user, a.password) == ("db.internal", 3306, "cdc", "pw-1234567")
    assert (b.host, b.port, b.user, b.password) == ("db2", 3307, "cdc", "")
    assert "pw-1234567" not in repr(a)


def test_default_connection_ids():
    assert LeaderHook().mysql_conn_id == "mysql_leader"
    assert FollowerHook().mysql_conn_id == "mysql_follower"


def test_missing_aws_connection_is_named_not_silently_replaced():
    hook = BatchStorageHook("s3://bucket/cdc", aws_conn_id="cdc_no_such_aws")
    with pytest.raises(AirflowNotFoundException, match="AWS connection 'cdc_no_such_aws' is not defined"):
        hook.store


def test_file_storage_never_looks_up_the_aws_connection(tmp_path):
    hook = BatchStorageHook(f"file://{tmp_path}", aws_conn_id="cdc_no_such_aws")
    assert hook.store.uri == f"file://{tmp_path}"
    assert hook.spec().options == {}


def test_missing_spark_connection_is_named():
    hook = MergeJobHook("mysql_follower", "file:///tmp/x", None, "cdc_no_such_spark")
    with pytest.raises(AirflowNotFoundException, match="Spark connection 'cdc_no_such_spark' is not defined"):
        hook.spark_connection


def test_a_cluster_deploy_mode_is_refused_with_the_reason(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_CDC_CLUSTER_SPARK", json.dumps(
        {"conn_type": "spark", "host": "spark://127.0.0.1", "port": 7077, "extra": {"deploy-mode": "cluster"}}))
    hook = MergeJobHook("mysql_follower", "file:///tmp/x", None, "cdc_cluster_spark")
    with pytest.raises(AirflowFailException, match="deploy-mode 'cluster'.*set it to 'client'"):
        hook.spark_connection


def test_an_unreachable_follower_is_named_with_its_connection_id(monkeypatch):
    from local_services import free_port

    port = free_port()  # nothing listens there
    monkeypatch.setenv("AIRFLOW_CONN_CDC_DEAD_FOLLOWER", json.dumps(
        {"conn_type": "mysql", "host": "127.0.0.1", "port": port, "login": "cdc_writer", "password": "pw"}))
    with pytest.raises(ConnectionError, match=rf"cannot connect to the follower at 127.0.0.1:{port} as "
                                              r"'cdc_writer' \(Airflow connection 'cdc_dead_follower'\)"):
        FollowerHook("cdc_dead_follower").state.checkpoint("shop")
