"""A follower that runs out of space during a merge: a MariaDB follower whose InnoDB system tablespace
(every table in it: ``innodb_file_per_table=OFF``) may grow to 24 MiB and no further, as a disk that
fills up stops it. The merge fails at once with one error naming the server, the cause and the fix,
not a statement's refusal retried for minutes; nothing of the failed segment is committed."""

from __future__ import annotations

import pytest

from local_services import MariaDBServer
from merge_helpers import Pipeline
from mysql_cdc.merge.errors import FollowerUnwritableError
from mysql_cdc.merge.job import one_line, run_merge
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.retry_policy import is_permanent
from mysql_cdc.storage import StorageSpec


@pytest.fixture(scope="module")
def small_follower(tmp_path_factory):
    server = MariaDBServer(tmp_path_factory.mktemp("small"), "follower-small", server_id=41, binlog=False,
                           die_with_parent=True,
                           extra_args=("--innodb-file-per-table=OFF",
                                       "--innodb-data-file-path=ibdata1:12M:autoextend:max:24M"))
    server.start()
    yield server
    server.stop()


def test_a_full_follower_fails_the_merge_at_once_naming_the_server(small_follower, leader, leader_user, spark,
                                                                  tmp_path, unique_name):
    db = unique_name
    writer = small_follower.create_user("cdc_writer", "writer-pw", ["ALL PRIVILEGES ON *.*"])
    pipeline = Pipeline(name=f"pipe_{db}", database=db, leader=leader, follower=small_follower,
                        leader_settings=MySQLSettings(**leader_user), follower_settings=MySQLSettings(**writer),
                        storage=StorageSpec(f"file://{tmp_path}/store"))
    pipeline.start()
    first = pipeline.capture([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(250))",
                              f"INSERT INTO {db}.t VALUES (0, 'first')"])
    run_merge(spark, pipeline.manifest_uri(first), pipeline.secrets)
    pad = "f" * 240
    big = pipeline.capture([f"INSERT INTO {db}.t SELECT seq, '{pad}' FROM {db}.seq_1_to_200000"])  # ~50 MiB of rows

    with pytest.raises(FollowerUnwritableError) as caught:
        run_merge(spark, pipeline.manifest_uri(big), pipeline.secrets)

    assert is_permanent(caught.value)
    settings = pipeline.follower_settings
    message = one_line(caught.value)
    assert message.startswith(f"the follower at {settings.host}:{settings.port} as 'cdc_writer' refuses writes: "
                              "a table is full"), message
    assert "(MySQL error 1114)" in message and "free disk space" in message
    assert pipeline.checkpoint().position == first.end
    assert small_follower.scalar(f"SELECT COUNT(*) FROM {db}.t") == 1  # the segment's rows rolled back
