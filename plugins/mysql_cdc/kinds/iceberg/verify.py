"""How an Iceberg follower is verified: its tables at the pipeline's consistent cut (``cut``: each
read at the snapshot id the state records, with pyiceberg) hashed in the leader's chunks
(``monitor.cut_checksums``), against the leader's rows hashed the same way. A table keeping its
deleted rows (``merge.soft_deletes``) is compared by its live rows."""

from __future__ import annotations

from ...monitor.cut_checksums import CutChecksums
from ...monitor.row_checksums import LeaderRowChecksums
from ...monitor.verify import ChecksumSides, FollowerSides
from .catalog import CatalogRef


def checksum_sides(catalog: CatalogRef, soft_deletes: tuple[str, ...] = (), history: tuple[str, ...] = ()
                   ) -> FollowerSides:
    """The leader's rows hashed here, against the catalog's tables at the cut (the live rows of those
    the ``soft_deletes`` globs name, the current versions of those the ``history`` globs name)."""
    return lambda leader_conn, pipeline: ChecksumSides(
        LeaderRowChecksums(leader_conn), CutChecksums(lambda: _cut_reader(catalog, pipeline, soft_deletes, history)))


def _cut_reader(catalog: CatalogRef, pipeline: str, soft: tuple[str, ...], history: tuple[str, ...]):
    from ...merge.soft_deletes import reading_live
    from .cut import read_cut

    cut = read_cut(catalog, pipeline)
    return reading_live(lambda name: cut.read(name) if name in cut.snapshots else None, soft, history)
