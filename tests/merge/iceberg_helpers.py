"""Test helpers for an Iceberg follower: a pipeline whose follower is an Iceberg JDBC catalog in a
database of the suite's MariaDB follower server (its state beside it), the merge job as Airflow
submits it, and the comparison of the leader's tables with the catalog's, read with pyiceberg (not
the product's reader) at the snapshot ids the state records: the consistent cut."""

from __future__ import annotations

import subprocess
import uuid
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path

from lake_helpers import _plain, leader_columns, leader_rows
from merge_helpers import Pipeline, submit_job, table_names
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.capture.snapshot.copy import snapshot_tables
from mysql_cdc.contracts import ChangeBatch, Checkpoint
from mysql_cdc.job_secrets import JobSecrets
from mysql_cdc.kinds.iceberg import follower_spec as iceberg_follower_spec
from mysql_cdc.kinds.iceberg.catalog import CatalogRef
from mysql_cdc.kinds.iceberg.state import IcebergStateStore
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.packaging import MERGE_JOB
from mysql_cdc.pipeline_options import SnapshotOptions
from mysql_cdc.storage import StorageSpec


@dataclass
class IcebergPipeline(Pipeline):
    catalog: CatalogRef | None = None

    @classmethod
    def of(cls, pipeline: Pipeline, warehouse: StorageSpec, catalog: CatalogRef | None = None) -> "IcebergPipeline":
        """``pipeline`` into ``catalog``; without one, a catalog named ``lake`` in a new database of the
        follower server, with its warehouse at ``warehouse``."""
        if catalog is None:
            database = "iceberg_" + uuid.uuid4().hex[:10]
            pipeline.follower.run_sql([f"CREATE DATABASE {database}"])
            catalog = CatalogRef("lake", MySQLSettings(**pipeline.follower.conn_params()), database, warehouse)
        return cls(**{f.name: getattr(pipeline, f.name) for f in fields(Pipeline)}, catalog=catalog)

    @property
    def state(self) -> IcebergStateStore:
        return IcebergStateStore(self.catalog)

    @property
    def secrets(self) -> JobSecrets:
        return JobSecrets(iceberg_follower_spec(self.catalog), self.storage)

    def start(self) -> "IcebergPipeline":
        from merge_helpers import leader_position

        self.position = leader_position(self.leader_settings)
        self.state.initialize(Checkpoint(self.name, self.position))
        return self

    def snapshot(self, only=None, options: SnapshotOptions = SnapshotOptions()) -> ChangeBatch:
        batch = snapshot_tables(self.leader_settings, self.storage, self.name, TableFilter((f"{self.database}.*",)),
                                only, options=options)
        checkpoint = self.state.start_snapshot(batch)
        self.position = max(self.position, checkpoint.position) if self.position else checkpoint.position
        self.batches.append(batch)
        return batch

    def table_positions(self):
        return self.state.table_positions(self.name)

    def checkpoint(self) -> Checkpoint | None:
        return self.state.checkpoint(self.name)

    def cut(self) -> dict[str, int]:
        return self.state.table_versions(self.name)


def iceberg_submit(pipeline: IcebergPipeline, batch: ChangeBatch, work_dir: Path, extra_env: dict | None = None,
                   timeout: float = 400) -> subprocess.CompletedProcess:
    """The merge job for an Iceberg follower as the merge task submits it (no jars: the job writes
    through pyiceberg), the secrets in a 0600 file."""
    return submit_job(pipeline.secrets, [str(MERGE_JOB), "--manifest-uri", pipeline.manifest_uri(batch)], work_dir,
                      extra_env=extra_env, timeout=timeout, secret=pipeline.catalog.server.password)


def iceberg_rows(pipeline: IcebergPipeline, database: str, table: str, snapshot_id: int) -> Counter:
    """The table's rows at ``snapshot_id``, read with pyiceberg's scan."""
    columns = leader_columns(pipeline.leader, database, table)
    arrow = pipeline.catalog.open().load_table((database, table)).scan(snapshot_id=snapshot_id).to_arrow()
    spelled = {n.lower(): n for n in arrow.column_names}
    arrow = arrow.select([spelled[c.lower()] for c, _ in columns])
    return Counter(tuple(_plain(v, t) for v, (_, t) in zip(row.values(), columns)) for row in arrow.to_pylist())


def assert_iceberg_equals_leader(pipeline: IcebergPipeline, database: str | None = None) -> None:
    """Every leader table of the database is in the cut with the same rows (as multisets) at its
    snapshot there, and the cut has no other table of it."""
    database = database or pipeline.database
    cut = pipeline.cut()
    in_cut = sorted(n.split(".", 1)[1] for n in cut if n.split(".", 1)[0] == database)
    assert in_cut == table_names(pipeline.leader, database), f"tables differ: cut {in_cut}"
    for table in in_cut:
        expected = leader_rows(pipeline.leader, database, table)
        actual = iceberg_rows(pipeline, database, table, cut[f"{database}.{table}"])
        missing, extra = expected - actual, actual - expected
        assert not missing and not extra, f"{table}: missing in the catalog {dict(missing)}, extra {dict(extra)}"
