"""How an Iceberg follower is verified: its tables at the pipeline's consistent cut (each read at the
snapshot id the state records, with pyiceberg) hashed in the leader's chunks
(``monitor.cut_checksums``), against the leader's rows hashed the same way."""

from __future__ import annotations

from ...monitor.cut_checksums import CutChecksums
from ...monitor.row_checksums import LeaderRowChecksums
from ...monitor.verify import ChecksumSides, FollowerSides
from .catalog import CatalogRef


def checksum_sides(catalog: CatalogRef) -> FollowerSides:
    """The leader's rows hashed here, against the catalog's tables at the cut."""
    return lambda leader_conn, pipeline: ChecksumSides(LeaderRowChecksums(leader_conn),
                                                       CutChecksums(lambda: cut_reader(catalog, pipeline)))


def cut_reader(catalog: CatalogRef, pipeline: str):
    """The reader of the pipeline's cut: a table's rows at its snapshot id there (None: not in it)."""
    from .state import IcebergStateStore

    cut = IcebergStateStore(catalog).table_versions(pipeline)
    opened = catalog.open()

    def read(name: str):
        if name not in cut:
            return None
        return opened.load_table(tuple(name.split(".", 1))).scan(snapshot_id=cut[name]).to_arrow()

    return read
