"""Following a failover, against real servers: a GTID replica (MariaDB, and MySQL with
auto-positioning; its own binlog, named differently, at other offsets) is promoted; the checkpoint taken on the old leader is placed on
the replica's binlog by its GTID set, and the stream goes on from there with nothing lost and
nothing applied twice. When the replica lacks what the follower has, the run stops naming the
recovery, and the recovery (a copy of every table from the new leader) is run and checked."""

from __future__ import annotations

import dataclasses

import pytest

from merge_helpers import assert_same_database, leader_position
from mysql_cdc.capture.stream.failover import FailoverError, find_position
from mysql_cdc.capture.leader import Leader
from mysql_cdc.contracts import OtherLeaderError
from mysql_cdc.server_state.checkpoint import rebase_checkpoint
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.merge.job import run_merge


@pytest.fixture(params=["mariadb", "mysql"])
def flavor(request):
    return request.param


@pytest.fixture
def replica(request, make_replica, flavor):
    return make_replica(request.getfixturevalue("leader" if flavor == "mariadb" else "mysql_leader"))


def fail_over(pipeline, replica):
    """The pipeline's leader connection now reaches the promoted replica."""
    replica.promote()
    return dataclasses.replace(pipeline, leader=replica, leader_settings=MySQLSettings(**replica.conn_params()))


def follow(pipeline):
    """What the extract task does on a leader that is not the checkpoint's server."""
    checkpoint = pipeline.checkpoint()
    with Leader(pipeline.leader_settings) as leader:
        position, leader_id = find_position(leader, checkpoint.gtid_set), leader.leader_id
    conn = pipeline.follower.connect()
    try:
        recopy = rebase_checkpoint(conn, checkpoint, position, leader_id)
    finally:
        conn.close()
    pipeline.position = position
    return position, recopy


def test_the_stream_follows_a_promoted_replica(make_pipeline, flavor, replica, spark):
    pipeline = make_pipeline(flavor=flavor)
    leader, db = pipeline.leader, pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                              "INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    checkpoint = pipeline.checkpoint()
    assert checkpoint.leader_id == leader.server_identity and checkpoint.gtid_set
    assert checkpoint.gtid_set == str(leader.scalar("SELECT @@GLOBAL.gtid_binlog_pos" if flavor == "mariadb" else
                                                     "SELECT @@GLOBAL.gtid_executed")).replace("\n", "")
    # the old leader goes on; the replica gets it all; the old leader fails before the pipeline reads it
    leader.run_sql([f"USE {db}", "UPDATE t SET v = 20 WHERE id = 2", "DELETE FROM t WHERE id = 3",
                    "ALTER TABLE t ADD COLUMN w INT DEFAULT 0", "INSERT INTO t VALUES (4, 4, 4)"])
    replica.wait_for(leader)
    pipeline = fail_over(pipeline, replica)
    replica.run_sql([f"USE {db}", "UPDATE t SET w = 9 WHERE id = 1", "INSERT INTO t VALUES (5, 5, 5)"])

    position, recopy = follow(pipeline)
    assert position.file.startswith("replica-bin.") and recopy == []
    assert pipeline.checkpoint().position == position and pipeline.checkpoint().leader_id == replica.server_identity
    stream = pipeline.extract(position, leader_position(pipeline.leader_settings))
    # everything after the checkpoint, the old leader's last changes (via the replica) included
    assert stream.row_count == 5 and any(s.kind == "ddl" for s in stream.segments)
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    assert_same_database(replica, pipeline.follower, db)
    assert pipeline.checkpoint().leader_id == replica.server_identity

    # a batch read from the old leader can no longer be placed
    with pytest.raises(OtherLeaderError, match=f"read from the leader '{leader.server_identity}'"):
        run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)


def test_a_replica_that_lacks_applied_transactions_is_refused_and_a_full_copy_recovers(
        make_pipeline, flavor, replica, spark):
    pipeline = make_pipeline(flavor=flavor)
    leader, db = pipeline.leader, pipeline.database
    first = pipeline.capture([f"CREATE DATABASE {db}", f"USE {db}", "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
                              "INSERT INTO t VALUES (1, 1)"])
    replica.wait_for(leader)
    replica.pause_replication()  # the replica falls behind ...
    later = pipeline.capture([f"USE {db}", "INSERT INTO t VALUES (2, 2)"])
    for batch in (first, later):  # ... while the follower gets the old leader's last transaction
        run_merge(spark, pipeline.manifest_uri(batch), pipeline.secrets)
    pipeline = fail_over(pipeline, replica)

    with pytest.raises(FailoverError, match=r'not executed all of them.*lost with the old leader.*'
                                            r'conf \{"resnapshot": \["\*"\]\}'):
        follow(pipeline)

    # the recovery it names: a copy of every table from the new leader
    copy = pipeline.snapshot(only=["*"])
    assert all(s.full for s in copy.segments) and copy.leader_id == replica.server_identity
    run_merge(spark, pipeline.manifest_uri(copy), pipeline.secrets)
    checkpoint = pipeline.checkpoint()
    assert (checkpoint.position, checkpoint.leader_id) == (copy.start, replica.server_identity)
    assert_same_database(replica, pipeline.follower, db)
    replica.run_sql([f"USE {db}", "INSERT INTO t VALUES (3, 3)"])
    stream = pipeline.extract(copy.start, leader_position(pipeline.leader_settings))
    run_merge(spark, pipeline.manifest_uri(stream), pipeline.secrets)
    assert_same_database(replica, pipeline.follower, db)
