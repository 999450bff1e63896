"""Capture-side helpers: run statements on the real leader and extract what they wrote."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from local_services import MariaDBServer, MySQLServer
from mysql_cdc.merge.reader import parquet_files
from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range
from mysql_cdc.capture.table_changes import WriterLimits
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.capture.leader import Leader
from mysql_cdc.contracts import ChangeBatch, PositionRange, RowSegment
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.storage import ObjectStore, open_store


@pytest.fixture(scope="session")
def leader_settings(leader_user) -> MySQLSettings:
    return MySQLSettings(**leader_user)


def leader_position(settings: MySQLSettings):
    with Leader(settings) as leader:
        return leader.current_position()


@dataclass
class Captured:
    batch: ChangeBatch
    store: ObjectStore

    def rows(self, segment: RowSegment, table: str) -> list[dict]:
        changes = next(t for t in segment.tables if t.table == table)
        out = []
        for data in parquet_files(self.store, self.batch.prefix, changes):
            out.extend(pq.read_table(pa.BufferReader(data)).to_pylist())
        return out


@pytest.fixture
def capture(leader, leader_settings, tmp_path):
    """capture(statements, database=None, table_filter=..., store=None) -> Captured."""

    def run(statements, database=None, table_filter=TableFilter(), store=None, pipeline="p", limits=WriterLimits(),
            **kw):
        store = store or open_store(f"file://{tmp_path}/store")
        start = leader_position(leader_settings)
        leader.run_sql(statements, database)
        end = leader_position(leader_settings)
        batch = extract_range(leader_settings, RangeRequest(pipeline, PositionRange(start, end), table_filter, **kw),
                              BatchTarget(store), limits=limits)
        return Captured(batch, store)

    return run


# Leaders whose binlog is compressed, thresholds low enough that every event of a workload is
# (MariaDB's compressed query/rows events; MySQL's transaction payloads).
@pytest.fixture(scope="module")
def mariadb_compressed(tmp_path_factory):
    server = MariaDBServer(tmp_path_factory.mktemp("compressed"), "mariadb-compressed", server_id=21, binlog=True,
                           die_with_parent=True, extra_args=("--log-bin-compress=ON", "--log-bin-compress-min-len=10"))
    yield server.start()
    server.stop()


@pytest.fixture(scope="module")
def mysql_compressed(tmp_path_factory):
    server = MySQLServer(tmp_path_factory.mktemp("compressed"), "mysql-compressed", server_id=22, binlog=True,
                         die_with_parent=True, extra_args=("--binlog-transaction-compression=ON",))
    yield server.start()
    server.stop()
