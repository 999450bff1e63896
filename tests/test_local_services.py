"""Smoke tests for the real local services started by tests/conftest.py."""
from __future__ import annotations

import boto3
import pymysql
import pytest


def _variables(conn, *names: str) -> dict[str, str]:
    with conn.cursor() as cur:
        cur.execute(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ({})".format(", ".join(["%s"] * len(names))),
            names,
        )
        return {k: v for k, v in cur.fetchall()}


def test_leader_binlog_settings(leader):
    conn = leader.connect()
    try:
        v = _variables(conn, "log_bin", "binlog_format", "binlog_row_image",
                       "binlog_row_metadata", "server_id", "time_zone",
                       "character_set_server")
    finally:
        conn.close()
    assert v["log_bin"] == "ON"
    assert v["binlog_format"] == "ROW"
    assert v["binlog_row_image"] == "FULL"
    assert v["binlog_row_metadata"] == "FULL"
    assert v["server_id"] == "1"
    assert v["time_zone"] == "+00:00"
    assert v["character_set_server"] == "utf8mb4"


def test_follower_has_no_binlog(follower):
    conn = follower.connect()
    try:
        v = _variables(conn, "log_bin", "server_id")
    finally:
        conn.close()
    assert v["log_bin"] == "OFF"
    assert v["server_id"] == "2"


def test_reader_user_can_show_master_status(leader_user):
    conn = pymysql.connect(**leader_user, connect_timeout=5)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchone()[0] == "cdc_reader@%"
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
    finally:
        conn.close()
    assert row is not None, "SHOW MASTER STATUS returned nothing: binlog disabled?"
    assert row[0].startswith("binlog.")
    assert int(row[1]) > 0


def test_reader_user_cannot_write(leader, leader_user, unique_name):
    root = leader.connect()
    try:
        with root.cursor() as cur:
            cur.execute(f"CREATE DATABASE {unique_name}")
            cur.execute(f"CREATE TABLE {unique_name}.t (id INT PRIMARY KEY)")
        conn = pymysql.connect(**leader_user, autocommit=True)
        try:
            with conn.cursor() as cur, pytest.raises(pymysql.err.OperationalError):
                cur.execute(f"INSERT INTO {unique_name}.t VALUES (1)")
        finally:
            conn.close()
    finally:
        with root.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {unique_name}")
        root.close()


def test_writer_user_has_all_privileges(follower_user, unique_name):
    conn = pymysql.connect(**follower_user, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {unique_name}")
            cur.execute(f"CREATE TABLE {unique_name}.t (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute(f"INSERT INTO {unique_name}.t VALUES (1, 'ä€')")
            cur.execute(f"SELECT v FROM {unique_name}.t")
            assert cur.fetchone()[0] == "ä€"
            cur.execute(f"DROP DATABASE {unique_name}")
    finally:
        conn.close()


@pytest.mark.parametrize("server_fixture", ["leader", "follower"])
def test_no_anonymous_users_and_root_needs_password(request, server_fixture):
    server = request.getfixturevalue(server_fixture)
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM mysql.global_priv WHERE User = ''")
            assert cur.fetchone()[0] == 0
    finally:
        conn.close()
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(host=server.host, port=server.port, user="root", password="")
    with pytest.raises(pymysql.err.OperationalError):
        # With anonymous accounts present this login would have succeeded.
        pymysql.connect(host=server.host, port=server.port, user="nobody_here", password="")


def test_s3_roundtrip(s3_bucket):
    kwargs = {k: v for k, v in s3_bucket.items() if k != "bucket"}
    s3 = boto3.client("s3", **kwargs)
    body = b"hello \x00 parquet"
    s3.put_object(Bucket=s3_bucket["bucket"], Key="a/b/c.bin", Body=body)
    got = s3.get_object(Bucket=s3_bucket["bucket"], Key="a/b/c.bin")["Body"].read()
    assert got == body
    listed = s3.list_objects_v2(Bucket=s3_bucket["bucket"], Prefix="a/")
    assert [o["Key"] for o in listed["Contents"]] == ["a/b/c.bin"]


def test_s3_buckets_are_unique(s3_server, s3_bucket):
    s3 = boto3.client("s3", **s3_server.client_kwargs())
    names = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    assert s3_bucket["bucket"] in names
