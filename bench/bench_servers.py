"""What the merge benchmarks start alike: a MariaDB leader (binlog on) and follower in a temp dir,
each with the benchmark's user; both stopped and the dir removed on exit (``keep``: left for a
look, its path printed)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from local_services import MariaDBServer
from mysql_cdc.kinds.delta.state.location import LakeLocation
from mysql_cdc.mysql_server import MySQLSettings
from mysql_cdc.storage import StorageSpec

LEADER_GRANTS = ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"]  # what a pipeline's reader needs
FOLLOWER_GRANTS = ["ALL PRIVILEGES ON *.*"]


@dataclass(frozen=True)
class BenchServers:
    base: Path  # the temp dir: datadirs, and whatever the benchmark puts beside them
    leader: MariaDBServer
    follower: MariaDBServer
    leader_user: dict  # connection parameters (host, port, user, password)
    follower_user: dict

    @property
    def leader_settings(self) -> MySQLSettings:
        return MySQLSettings(**self.leader_user)

    @property
    def follower_settings(self) -> MySQLSettings:
        return MySQLSettings(**self.follower_user)


@contextmanager
def leader_and_follower(prefix: str, keep: bool = False) -> Iterator[BenchServers]:
    base = Path(tempfile.mkdtemp(prefix=prefix))
    leader = MariaDBServer(base, "leader", server_id=1, binlog=True, die_with_parent=True)
    follower = MariaDBServer(base, "follower", server_id=2, binlog=False, die_with_parent=True)
    try:
        leader.start()
        follower.start()
        yield BenchServers(base, leader, follower, leader.create_user("bench_reader", "bench_pw", LEADER_GRANTS),
                           follower.create_user("bench_writer", "bench_pw", FOLLOWER_GRANTS))
    finally:
        follower.stop()
        leader.stop()
        if keep:
            print(f"kept {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)  # datadirs and binlogs: hundreds of MB per run


@dataclass(frozen=True)
class BenchDeployment:
    airflow: Any  # airflow_deployment.AirflowDeployment
    state: Any  # the pipeline's StateStore: its checkpoint, as the check task reads it
    s3: dict  # boto3's client kwargs of the S3 endpoint (batches; a lake's tables too)
    lake: LakeLocation | None  # a Delta follower's location, with its S3 options


@contextmanager
def deployed_pipeline(servers: BenchServers, pipeline: str, schedule: str, follower: str,
                      include: str, merge_spark: str = "always") -> Iterator[BenchDeployment]:
    """A moto S3 endpoint and Airflow as it is deployed (``scripts/airflow_deployment.py``) with one
    pipeline from ``servers``' leader (tables ``include``) into their follower, or a Delta Lake on the
    S3 endpoint (``follower``: mysql or delta), on ``schedule`` and the pipelines file's defaults (a
    snapshot first; ``merge_spark``: the pipeline's ``merge.spark``); its first run (the copy)
    succeeded. Both stopped on exit."""
    import boto3
    import yaml
    from airflow_deployment import AirflowDeployment, pipeline_connections
    from local_services import MotoS3Server
    from mysql_cdc.kinds.delta.state import DeltaStateStore
    from mysql_cdc.server_state import MySQLStateStore
    from mysql_cdc.storage import StorageSpec

    s3 = MotoS3Server(servers.base, die_with_parent=True)
    airflow = None
    bucket = "bench-" + pipeline.replace("_", "-")
    try:
        s3.start()
        boto3.client("s3", **s3.client_kwargs()).create_bucket(Bucket=bucket)
        lake = LakeLocation(StorageSpec(f"s3://{bucket}/lake", s3.client_kwargs())) if follower == "delta" else None
        home = servers.base / "airflow"
        home.mkdir()
        pipelines = home / "pipelines.yaml"
        pipelines.write_text(yaml.safe_dump({"pipelines": [{
            "name": pipeline, "schedule": schedule, "leader_conn_id": "bench_leader",
            **({"follower": {"kind": "delta", "location": lake.uri}} if lake else {"follower_conn_id": "bench_follower"}),
            "storage_uri": f"s3://{bucket}/batches", "aws_conn_id": "bench_s3", "spark_conn_id": "bench_spark",
            "include": [include], "merge": {"spark": merge_spark},
        }]}))
        airflow = AirflowDeployment(home, env={
            "CDC_PIPELINES_FILE": str(pipelines),
            **pipeline_connections("bench", servers.leader_user, servers.follower_user, s3.client_kwargs()),
        })
        print("starting Airflow as deployed ...", file=sys.stderr, flush=True)
        airflow.start()
        airflow.wait(lambda: any(r["state"] == "success" for r in airflow.dag_runs(pipeline)), 420,
                     "the first run (the copy) to succeed", every=2)
        state = DeltaStateStore(lake) if lake else MySQLStateStore(servers.follower_settings)
        yield BenchDeployment(airflow, state, s3.client_kwargs(), lake)
    finally:
        if airflow is not None:
            airflow.stop()
        s3.stop()


@contextmanager
def s3_storage(base: Path, bucket: str = "bench-tables") -> Iterator[StorageSpec]:
    """A bucket on moto's S3 server, started for the run (stopped after it)."""
    import boto3
    from local_services import MotoS3Server

    server = MotoS3Server(base, die_with_parent=True).start()
    try:
        options = server.client_kwargs()
        boto3.client("s3", **options).create_bucket(Bucket=bucket)
        yield StorageSpec(f"s3://{bucket}/root", options)
    finally:
        server.stop()
