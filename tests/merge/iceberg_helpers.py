"""Test helpers for an Iceberg follower: a pipeline whose follower is an Iceberg JDBC catalog in a
database of the suite's MariaDB follower server (its state beside it), the merge job as Airflow
submits it, and the comparison of the leader's tables with the catalog's, read with pyiceberg (not
the product's reader) at the snapshot ids the state records: the consistent cut."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lake_helpers import _plain, leader_columns, leader_rows
from merge_helpers import Pipeline, submit_job, table_names
from mysql_cdc.contracts import ChangeBatch
from mysql_cdc.job_secrets import JobSecrets
from mysql_cdc.kinds.iceberg import follower_spec as iceberg_follower_spec
from mysql_cdc.kinds.iceberg.catalog import CatalogRef
from mysql_cdc.kinds.iceberg.state import IcebergStateStore
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.packaging import MERGE_JOB
from mysql_cdc.storage import StorageSpec

REPO = Path(__file__).resolve().parents[2]
DUCKDB_SITE = REPO / ".local" / "readers" / "duckdb-iceberg" / "site"


@dataclass
class IcebergPipeline(Pipeline):
    catalog: CatalogRef | None = None
    soft_deletes: tuple[str, ...] = ()  # globs of the tables that keep their deleted rows
    history: tuple[str, ...] = ()  # globs of the tables that keep every version of each row

    @classmethod
    def of(cls, pipeline: Pipeline, warehouse: StorageSpec, catalog: CatalogRef | None = None,
           soft_deletes: tuple[str, ...] = (), history: tuple[str, ...] = ()) -> "IcebergPipeline":
        """``pipeline`` into ``catalog``; without one, a catalog named ``lake`` in a new database of the
        follower server, with its warehouse at ``warehouse``."""
        if catalog is None:
            database = "iceberg_" + uuid.uuid4().hex[:10]
            pipeline.follower.run_sql([f"CREATE DATABASE {database}"])
            catalog = CatalogRef("lake", MySQLSettings(**pipeline.follower.conn_params()), database, warehouse)
        return cls(**{f.name: getattr(pipeline, f.name) for f in fields(Pipeline)}, catalog=catalog,
                   soft_deletes=soft_deletes, history=history)

    @property
    def state(self) -> IcebergStateStore:
        return IcebergStateStore(self.catalog)

    @property
    def secrets(self) -> JobSecrets:
        return JobSecrets(iceberg_follower_spec(self.catalog, self.soft_deletes, self.history), self.storage)

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


def delete_by_position_in_every_file(pipeline: IcebergPipeline, name: str) -> None:
    """``name``'s changed rows deleted by position whatever its files' size (a test's files are all
    smaller than the 1 MiB below which the follower rewrites them instead)."""
    from mysql_cdc.kinds.iceberg.row_delta import MIN_FILE_BYTES

    with pipeline.catalog.open().load_table(tuple(name.split("."))).transaction() as tx:
        tx.set_properties({MIN_FILE_BYTES: "0"})


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


DUCKDB_READ = """
import sys
import duckdb
import duckdb_ext
from pathlib import Path
metadata, out = sys.argv[1], sys.argv[2]
con = duckdb.connect()
for name in ("avro", "iceberg"):
    con.execute(f"LOAD '{next(Path(duckdb_ext.__path__[0]).glob(f'extensions/*/*/{name}.duckdb_extension'))}'")
con.execute(f"COPY (SELECT * FROM iceberg_scan('{metadata}')) TO '{out}' (FORMAT parquet)")
"""


def duckdb_iceberg_scan(metadata_location: str, work: Path) -> pa.Table:
    """The rows of the table whose metadata file is ``metadata_location`` (its current snapshot) as
    DuckDB's Iceberg extension reads them, in a process of its own: the extension is built for
    DuckDB 1.4, the venv's DuckDB is 2.0 (``make readers``)."""
    if not (DUCKDB_SITE / "duckdb_ext").is_dir():
        pytest.fail(f"DuckDB's Iceberg extension is not installed in {DUCKDB_SITE}: run `make readers`")
    out = work / f"duckdb-{uuid.uuid4().hex[:8]}.parquet"
    done = subprocess.run([sys.executable, "-c", DUCKDB_READ, metadata_location.removeprefix("file://"), str(out)],
                          env={**os.environ, "PYTHONPATH": str(DUCKDB_SITE)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return pq.read_table(out)
