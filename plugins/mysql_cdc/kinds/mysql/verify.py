"""How a MySQL follower is verified: each chunk summed inside the follower's server, as the leader
sums its own (``monitor.chunks.ServerChecksums``), so only three numbers per chunk cross the network."""

from __future__ import annotations

from ...monitor.chunks import ServerChecksums
from ...monitor.verify import ChecksumSides, FollowerSides
from ...mysql_server import MySQLSettings


def checksum_sides(follower: MySQLSettings) -> FollowerSides:
    def open_sides(leader_conn, pipeline: str) -> ChecksumSides:
        conn = follower.connect()
        return ChecksumSides(ServerChecksums(leader_conn), ServerChecksums(conn), conn.close)

    return open_sides
