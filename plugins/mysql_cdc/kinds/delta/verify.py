"""How a Delta Lake follower is verified: its tables at the pipeline's consistent cut, read with
delta-rs (``state.cut``) and hashed in the leader's chunks (``monitor.cut_checksums``), against the
leader's rows hashed the same way. A table keeping its deleted rows (``merge.soft_deletes``) is
compared by its live rows."""

from __future__ import annotations

from ...monitor.cut_checksums import CutChecksums
from ...monitor.row_checksums import LeaderRowChecksums
from ...monitor.verify import ChecksumSides, FollowerSides
from .state.location import LakeLocation


def checksum_sides(location: LakeLocation, soft_deletes: tuple[str, ...] = (), history: tuple[str, ...] = ()
                   ) -> FollowerSides:
    """The leader's rows hashed here, against the lake's at the cut (the live rows of the tables the
    ``soft_deletes`` globs name, the current versions of those the ``history`` globs name)."""
    return lambda leader_conn, pipeline: ChecksumSides(
        LeaderRowChecksums(leader_conn), CutChecksums(lambda: _cut_reader(location, pipeline, soft_deletes, history)))


def _cut_reader(location: LakeLocation, pipeline: str, soft: tuple[str, ...], history: tuple[str, ...]):
    from ...merge.soft_deletes import reading_live
    from .state.cut import read_cut_at

    cut = read_cut_at(location, pipeline)
    return reading_live(lambda name: cut.read(name) if name in cut.versions else None, soft, history)
