"""How a Delta Lake follower is verified: its tables at the pipeline's consistent cut, read with
delta-rs (``state.cut``) and hashed in the leader's chunks (``monitor.cut_checksums``), against the
leader's rows hashed the same way."""

from __future__ import annotations

from ...monitor.cut_checksums import CutChecksums
from ...monitor.row_checksums import LeaderRowChecksums
from ...monitor.verify import ChecksumSides, FollowerSides
from .state.location import LakeLocation


def checksum_sides(location: LakeLocation) -> FollowerSides:
    """The leader's rows hashed here, against the lake's at the cut."""
    return lambda leader_conn, pipeline: ChecksumSides(LeaderRowChecksums(leader_conn),
                                                       CutChecksums(lambda: _cut_reader(location, pipeline)))


def _cut_reader(location: LakeLocation, pipeline: str):
    from .state.cut import read_cut_at

    cut = read_cut_at(location, pipeline)
    return lambda name: cut.read(name) if name in cut.versions else None
