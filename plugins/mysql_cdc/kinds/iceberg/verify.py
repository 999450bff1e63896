"""How an Iceberg follower is verified: its tables at the pipeline's consistent cut (``cut``: each
read at the snapshot id the state records, with pyiceberg) hashed in the leader's chunks
(``monitor.cut_checksums``), against the leader's rows hashed the same way."""

from __future__ import annotations

from ...monitor.cut_checksums import CutChecksums
from ...monitor.row_checksums import LeaderRowChecksums
from ...monitor.verify import ChecksumSides, FollowerSides
from .catalog import CatalogRef


def checksum_sides(catalog: CatalogRef) -> FollowerSides:
    """The leader's rows hashed here, against the catalog's tables at the cut."""
    return lambda leader_conn, pipeline: ChecksumSides(LeaderRowChecksums(leader_conn),
                                                       CutChecksums(lambda: _cut_reader(catalog, pipeline)))


def _cut_reader(catalog: CatalogRef, pipeline: str):
    from .cut import read_cut

    cut = read_cut(catalog, pipeline)
    return lambda name: cut.read(name) if name in cut.snapshots else None
