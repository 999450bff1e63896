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
from typing import Iterator

from local_services import MariaDBServer
from mysql_cdc.mysql_server import MySQLSettings

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
