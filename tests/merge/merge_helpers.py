"""Apply-side test helpers: run a workload on the real leader, capture exactly its binlog range
into a batch, merge the batch into the real follower (in-process or with spark-submit), and
compare leader and follower table by table."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from mysql_cdc.capture.stream.extract import BatchTarget, RangeRequest, extract_range
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.capture.leader import Leader
from mysql_cdc.capture.snapshot.copy import snapshot_tables
from mysql_cdc.kinds.mysql import follower_spec as mysql_follower_spec
from mysql_cdc.pipeline_options import ExtractOptions, SnapshotOptions
from mysql_cdc.contracts import MANIFEST_NAME, BinlogPosition, ChangeBatch, Checkpoint, PositionRange
from mysql_cdc.server_state import MySQLStateStore
from mysql_cdc.packaging import DRIVER_JAVA_OPTIONS, MERGE_JOB, build_py_files, driver_java_options
from mysql_cdc.job_secrets import SECRETS_ENV, JobSecrets
from mysql_cdc.merge.report import SUMMARY_ENV, JobOutcome
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.storage import StorageSpec
from spark_under_test import SPARK_LINE, SPARK_SUBMIT



def leader_position(settings: MySQLSettings) -> BinlogPosition:
    with Leader(settings) as leader:
        return leader.current_position()


@dataclass
class Pipeline:
    """One test's pipeline: its own name, leader database, storage root and checkpoint."""

    name: str
    database: str
    leader: object  # local_services.MariaDBServer
    follower: object
    leader_settings: MySQLSettings
    follower_settings: MySQLSettings
    storage: StorageSpec
    position: BinlogPosition | None = None  # where the next capture starts
    batches: list[ChangeBatch] = field(default_factory=list)

    @property
    def secrets(self) -> JobSecrets:
        return JobSecrets(mysql_follower_spec(self.follower_settings), self.storage)

    @property
    def store(self):
        return self.storage.open()

    @property
    def state(self):
        """The pipeline's state store: the follower kind's (a subclass for a lake says which)."""
        return MySQLStateStore(self.follower_settings)

    def start(self) -> "Pipeline":
        """Checkpoint the pipeline at the leader's current position: the first captured range
        starts there, with the CREATE DATABASE, so DDL replay builds the follower."""
        self.position = leader_position(self.leader_settings)
        start, current = Checkpoint(self.name, self.position), self.state.checkpoint(self.name)
        if current is None:
            self.state.initialize(start)
        else:  # started again (a test moving the pipeline's beginning): the checkpoint moves there
            moved = self.state.move(current, start)
            assert moved, f"{self.name}: the checkpoint moved while the test restarted the pipeline"
        return self

    def capture(self, workload: Iterable[str] | Callable[[], None], database: str | None = None) -> ChangeBatch:
        """Run ``workload`` (statements, or a function) on the leader and extract the range it wrote."""
        if callable(workload):
            workload()
        else:
            self.leader.run_sql(workload, database)
        return self.extract(self.position, leader_position(self.leader_settings))

    def snapshot(self, only: Iterable[str] | None = None, options: SnapshotOptions = SnapshotOptions()) -> ChangeBatch:
        """Copy the pipeline's tables (or those matching ``only``) into a snapshot batch and record
        it on the follower, as the extract task does; the next capture starts at the stream's
        position (a first snapshot: the copy's position)."""
        batch = snapshot_tables(self.leader_settings, self.storage, self.name, TableFilter((f"{self.database}.*",)),
                                only, options=options)
        checkpoint = self.state.start_snapshot(batch)
        self.position = max(self.position, checkpoint.position) if self.position else checkpoint.position
        self.batches.append(batch)
        return batch

    def table_positions(self):
        return self.state.table_positions(self.name)

    def extract(self, start: BinlogPosition, end: BinlogPosition, options: ExtractOptions | None = None) -> ChangeBatch:
        """The range's batch, read by one reader (or in parts, as the extract task reads a long
        range, given ``options``)."""
        request = RangeRequest(self.name, PositionRange(start, end), TableFilter((f"{self.database}.*",)),
                               self.table_positions())
        target = BatchTarget(self.store, self.storage if options else None)
        batch = extract_range(self.leader_settings, request, target, options or ExtractOptions())
        assert batch is not None, f"the workload wrote nothing to the binlog in [{start}, {end})"
        self.position = max(self.position, end)
        self.batches.append(batch)
        return batch

    def manifest_uri(self, batch: ChangeBatch) -> str:
        return f"{self.storage.uri}/{batch.prefix}/{MANIFEST_NAME}"

    def checkpoint(self) -> Checkpoint | None:
        return self.state.checkpoint(self.name)

    def scratch_files(self) -> list[str]:
        """The merge job's load files left in the batch store (a finished merge leaves none)."""
        from mysql_cdc.kinds.mysql.sink.staging import scratch_prefix

        return self.store.list_keys(scratch_prefix(self.name))

    def staging_tables(self) -> list[str]:
        from mysql_cdc.kinds.mysql.sink.staging import staging_prefix

        conn = self.follower.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '_mysql_cdc'")
                return sorted(r[0] for r in cur.fetchall() if r[0].startswith(staging_prefix(self.name)))
        finally:
            conn.close()


def submit_job(secrets: JobSecrets, application: list[str], work_dir: Path, *, extra_env: dict | None = None,
               timeout: float = 300, jars: Iterable[str] = (), conf: Iterable[tuple[str, str]] = (),
               secret: str | None = None) -> subprocess.CompletedProcess:
    """A job exactly as Airflow submits it: spark-submit with the py-files zip, ``jars`` and ``conf``
    (a lake's Delta packages, a pipeline's spark_conf), secrets in a 0600 file named by the
    environment, nothing secret in argv; ``secret`` is checked to be in neither argv nor the output."""
    work_dir.mkdir(parents=True, exist_ok=True)
    py_files = build_py_files(work_dir)
    secrets_file = work_dir / "secrets.json"
    secrets.write(str(secrets_file))
    assert (secrets_file.stat().st_mode & 0o777) == 0o600
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # mysql_cdc must come from the zip
    env.update({SECRETS_ENV: str(secrets_file), "PYSPARK_PYTHON": sys.executable, **(extra_env or {})})
    cmd = [str(SPARK_SUBMIT), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           # a real merge's driver options (C1-only JIT, the class-data archive, Spark's log at warnings)
           "--driver-java-options", driver_java_options({}, SPARK_LINE)[DRIVER_JAVA_OPTIONS]]
    jars = list(jars)
    if jars:
        cmd += ["--jars", ",".join(jars)]
    for key, value in conf:
        cmd += ["--conf", f"{key}={value}"]
    cmd += ["--py-files", py_files, *application]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if secret:
        assert secret not in " ".join(cmd) and secret not in result.stdout + result.stderr
    return result


def spark_submit(pipeline: Pipeline, batch: ChangeBatch, work_dir: Path, extra_env: dict | None = None,
                 timeout: float = 300) -> subprocess.CompletedProcess:
    """The merge job into a MySQL follower as the merge task submits it (``submit_job``)."""
    return submit_job(pipeline.secrets, [str(MERGE_JOB), "--manifest-uri", pipeline.manifest_uri(batch)], work_dir,
                      extra_env=extra_env, timeout=timeout, secret=pipeline.follower_settings.password)


def run_job_here(pipeline: Pipeline, batches: Iterable[ChangeBatch], work_dir: Path, *,
                 conf: Iterable[tuple[str, str]] = (), extra_env: dict | None = None,
                 timeout: float = 300) -> tuple[subprocess.CompletedProcess, JobOutcome | None]:
    """The merge job as the merge task runs it without Spark (``merge: {spark: when_needed}``):
    this Python alone, mysql_cdc from the py-files zip, secrets in the 0600 file, ``conf`` as
    ``--conf``. No JVM can start: JAVA_HOME names nothing and no ``java`` is on PATH. Returns the
    process and the job's outcome file (None: the job was killed before it wrote one)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    secrets_file, outcome_file = work_dir / "secrets.json", work_dir / "outcome.json"
    pipeline.secrets.write(str(secrets_file))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    env.update({SECRETS_ENV: str(secrets_file), SUMMARY_ENV: str(outcome_file), "JAVA_HOME": str(work_dir / "no-java"),
                "PATH": os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not shutil.which("java", path=p)),
                "PYTHONPATH": build_py_files(work_dir), **(extra_env or {})})
    args = ["--without-spark"] + [a for key, value in conf for a in ("--conf", f"{key}={value}")]
    args += [a for batch in batches for a in ("--manifest-uri", pipeline.manifest_uri(batch))]
    result = subprocess.run([sys.executable, str(MERGE_JOB), *args], env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert pipeline.follower_settings.password not in result.stdout + result.stderr
    return result, JobOutcome.from_json(outcome_file.read_text()) if outcome_file.is_file() else None


def job_output(result: subprocess.CompletedProcess) -> str:
    """What the job printed. spark-submit's PythonRunner merges the Python driver's stderr into
    its own stdout, so the job's stderr (logs, the error line) arrives on spark-submit's stdout."""
    return result.stdout + result.stderr


def error_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in job_output(result).splitlines() if line.startswith("merge_batch: error:")]
    assert len(lines) == 1, job_output(result)[-3000:]
    return lines[0]


# -- comparing leader and follower -------------------------------------------------------------


def _fetch(server, sql: str, database: str | None = None, conn=None) -> list[tuple]:
    """The rows of ``sql``, in ``conn`` or a session of its own (connecting costs ~50 ms: a
    comparison of many tables shares one, ``snapshot``)."""
    session = conn or server.connect(database=database)
    try:
        with session.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        if conn is None:
            session.close()


def table_names(server, database: str, conn=None) -> list[str]:
    return sorted(r[0] for r in _fetch(
        server, f"SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{database}'", conn=conn))


def table_definition(server, database: str, table: str, conn=None) -> str:
    text = _fetch(server, f"SHOW CREATE TABLE `{database}`.`{table}`", conn=conn)[0][1]
    # the counter follows inserts the batch compacted away; it is not part of the definition
    text = re.sub(r" AUTO_INCREMENT=\d+", "", text)
    # a COLLATE names its character set: MySQL prints a column's collation alone, but a table
    # created from that very output prints "CHARACTER SET x COLLATE y" (same column, other text)
    return re.sub(r" CHARACTER SET \w+ (COLLATE \w+)", r" \1", text)


def table_rows(server, database: str, table: str, conn=None) -> Counter:
    return Counter(_fetch(server, f"SELECT * FROM `{database}`.`{table}`", conn=conn))


def snapshot(server, database: str) -> dict[str, tuple[str, Counter]]:
    conn = server.connect()
    try:
        return {t: (table_definition(server, database, t, conn), table_rows(server, database, t, conn))
                for t in table_names(server, database, conn)}
    finally:
        conn.close()


def assert_same_database(leader, follower, database: str) -> None:
    """Every table of ``database``: same definition (SHOW CREATE TABLE: columns, types,
    nullability, defaults, keys) and the same rows as multisets."""
    expected, actual = snapshot(leader, database), snapshot(follower, database)
    assert sorted(actual) == sorted(expected), "tables differ"
    for table in expected:
        assert actual[table][0] == expected[table][0], f"definition of {table} differs:\n{actual[table][0]}\n!=\n{expected[table][0]}"
        missing = expected[table][1] - actual[table][1]
        extra = actual[table][1] - expected[table][1]
        assert not missing and not extra, f"{table}: missing on follower {dict(missing)}, extra {dict(extra)}"


def assert_dataframe_equal(actual, expected, **kwargs) -> None:
    """``pyspark.testing.assertDataFrameEqual`` for Spark DataFrames and lists of Rows.

    It imports ``pyspark.pandas`` whenever pandas is installed, and pyspark.pandas does not import
    with the pandas 3 this environment pins (Airflow's). Hiding pandas for the call makes it take
    its pandas-free path, which is the one Spark DataFrames use anyway."""
    import sys
    from unittest import mock

    from pyspark.testing import assertDataFrameEqual

    with mock.patch.dict(sys.modules, {"pandas": None}):
        assertDataFrameEqual(actual, expected, **kwargs)
