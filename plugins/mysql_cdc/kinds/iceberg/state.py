"""An Iceberg follower's state: the MySQL follower's ``_mysql_cdc`` tables (checkpoint, table
positions, records of runs) on the catalog's server, and beside them the consistent cut: each
table's Iceberg snapshot id at the checkpoint (``iceberg_cut``).

The catalog is a MySQL/MariaDB database already, so the state needs no store of its own, and the
checkpoint and the cut move in ONE transaction of that server (``move_with_cut``), after every
table's commit of the segment: a reader that takes the cut's snapshot ids reads every table at the
checkpoint's transaction boundary, whatever the merge is doing meanwhile.
"""

from __future__ import annotations

from typing import Mapping

from ...contracts import Checkpoint, TablePosition
from ...server_state import MySQLStateStore
from ...server_state.checkpoint import read_checkpoint, write_checkpoint, write_table_position
from ...server_state.schema import STATE_SCHEMA, ensure_state_tables, rows_if_present
from .catalog import CatalogRef

CUT_TABLE = f"`{STATE_SCHEMA}`.`iceberg_cut`"
_CREATE_CUT = (f"CREATE TABLE IF NOT EXISTS {CUT_TABLE} (pipeline VARCHAR(190) NOT NULL, "
               "table_name VARCHAR(130) NOT NULL, snapshot_id BIGINT NOT NULL, "
               "PRIMARY KEY (pipeline, table_name)) ENGINE=InnoDB")


def ensure_cut_table(conn) -> None:
    ensure_state_tables(conn)
    with conn.cursor() as cur:
        cur.execute(_CREATE_CUT)


def read_cut(conn, pipeline: str) -> dict[str, int]:
    """Each table's snapshot id at the pipeline's checkpoint (``db.table`` -> id)."""
    return {name: int(snapshot) for name, snapshot in rows_if_present(
        conn, f"SELECT table_name, snapshot_id FROM {CUT_TABLE} WHERE pipeline = %s", (pipeline,))}


def _write_cut(conn, pipeline: str, changes: Mapping[str, int | None]) -> None:
    """The cut's rows changed in the caller's transaction: a snapshot id, or None (the table left)."""
    with conn.cursor() as cur:
        for name, snapshot in changes.items():
            if snapshot is None:
                cur.execute(f"DELETE FROM {CUT_TABLE} WHERE pipeline = %s AND table_name = %s", (pipeline, name))
            else:
                cur.execute(f"INSERT INTO {CUT_TABLE} (pipeline, table_name, snapshot_id) VALUES (%s, %s, %s) "
                            "ON DUPLICATE KEY UPDATE snapshot_id = VALUES(snapshot_id)", (pipeline, name, snapshot))


def move_with_cut(conn, expected: Checkpoint, done: Checkpoint | None, cut: Mapping[str, int | None],
                  positions: tuple[TablePosition, ...] = ()) -> bool:
    """In one transaction, under the checkpoint row's lock, if the checkpoint is still ``expected``:
    the cut's changes, the table positions, and the checkpoint moved to ``done`` (None: where it
    is). False, with nothing written, when the checkpoint moved (another merge of the pipeline)."""
    conn.begin()
    try:
        current = read_checkpoint(conn, expected.pipeline, for_update=True)
        if current is None or current.position != expected.position:
            conn.rollback()
            return False
        _write_cut(conn, expected.pipeline, cut)
        for position in positions:
            write_table_position(conn, expected.pipeline, position)
        if done is not None:
            write_checkpoint(conn, done)
        conn.commit()
        return True
    except BaseException:
        conn.rollback()
        raise


class IcebergStateStore(MySQLStateStore):
    """The state of pipelines whose follower is an Iceberg catalog, on that catalog's server."""

    kind = "iceberg"

    def __init__(self, catalog: CatalogRef):
        super().__init__(catalog.server)
        self.catalog = catalog

    @classmethod
    def from_settings(cls, settings) -> "IcebergStateStore":
        return cls(CatalogRef.from_json(settings["catalog"]))

    def describe(self) -> str:
        return f"`{STATE_SCHEMA}` beside the Iceberg catalog {self.catalog.name!r} on " \
               f"{self.settings.describe('catalog server')}"

    def initialize(self, first: Checkpoint) -> Checkpoint:
        with self._session() as conn:
            ensure_cut_table(conn)
        return super().initialize(first)

    def table_versions(self, pipeline: str) -> dict[str, int] | None:
        """Each table's snapshot id at the checkpoint: the consistent cut."""
        with self._session() as conn:
            return read_cut(conn, pipeline)
