"""Set-based apply inside the follower's transaction: delete what the staging tables name, then
``LOAD DATA`` the load files straight into the target; every count checked against what the
leader's changes imply, so a follower written outside the pipeline is found, not papered over."""

from __future__ import annotations

from ...apply.errors import FollowerDivergedError
from ...storage import ObjectStore
from .encoding import quote_ident
from .staging import COUNT, ROW, LoadWarningsError, check_load_warnings, load_data, qualified_staging
from .tables import TEXT_TYPES, FollowerColumn, StagedTable, qualified

_ER_DUP_ENTRY = 1062


def load_rows(cur, store: ObjectStore, staged: StagedTable) -> int:
    """LOAD DATA every load file of the table straight into it; returns the rows written."""
    target = qualified(staged.changes.database, staged.changes.table)
    loaded = 0
    for stage in staged.stages:
        if not stage["load_file"]:
            continue
        with store.local_copy(stage["load_file"]) as path:
            loaded += load_data(cur, path, target, stage["load_columns"])
        try:
            check_load_warnings(cur, target)
        except LoadWarningsError as exc:
            # LOAD DATA LOCAL skips a row whose key exists, with warning 1062, instead of failing
            if _ER_DUP_ENTRY in exc.codes:
                raise FollowerDivergedError(
                    f"{target}: inserting the batch's rows hit an existing key ({exc}): the follower holds "
                    "rows the leader did not have at the checkpoint (it was written outside the pipeline); "
                    f"re-copy it with a resnapshot run (conf {{\"resnapshot\": [\"{staged.changes.qualified_name}\"]}})"
                ) from None
            raise
    return loaded


def diverged(staged: StagedTable, what: str, expected: int, got: int) -> FollowerDivergedError:
    return FollowerDivergedError(
        f"`{staged.changes.database}`.`{staged.changes.table}`: {what} {got} rows where the leader's changes "
        f"imply {expected}: the follower does not hold what the leader held at the checkpoint (written "
        f"outside the pipeline?); re-copy it with a resnapshot run (conf {{\"resnapshot\": "
        f"[\"{staged.changes.qualified_name}\"]}})"
    )


def apply_keyed(cur, store: ObjectStore, staged: StagedTable) -> int:
    """Delete every staged key (the keys of U and D rows, which existed before), then load every
    final row (I and U). All deletes first: a load never meets a row the batch has moved away, so
    a key change or a unique value passed between rows cannot collide mid-way."""
    target = qualified(staged.changes.database, staged.changes.table)
    deleted = 0
    for stage in staged.stages:
        if stage["stage"]:
            # fully qualified names, no aliases: MariaDB rejects an aliased multi-table DELETE with
            # "No database selected" when the session has no default schema
            source = qualified_staging(stage["stage"])
            on = " AND ".join(f"{target}.{quote_ident(k)} = {source}.{quote_ident(k)}"
                              for k in staged.changes.key_columns)
            deleted += cur.execute(f"DELETE {target} FROM {target} JOIN {source} ON {on}")
    # U and D keys were on the leader at the checkpoint, so each must delete exactly one row
    expected_deleted = staged.total("upserts") + staged.total("deletes")
    if deleted != expected_deleted:
        raise diverged(staged, "deleting the batch's changed keys found", expected_deleted, deleted)
    inserted = load_rows(cur, store, staged)
    expected_inserted = staged.total("inserts") + staged.total("upserts")
    if inserted != expected_inserted:
        raise diverged(staged, "inserting the batch's rows wrote", expected_inserted, inserted)
    return deleted + inserted


def _match_staged_row(column: FollowerColumn, stage: str, row: int) -> str:
    """``column`` equal to the staged row's value, NULLs equal. Text compares as bytes: under a
    case- or pad-insensitive collation 'a' = 'A ', but they are different rows of a keyless table."""
    name = quote_ident(column.name)
    value = f"(SELECT {{}} FROM {qualified_staging(stage)} WHERE {ROW} = {int(row)})"
    if column.data_type in TEXT_TYPES:
        return f"CAST({name} AS BINARY) <=> " + value.format(f"CAST({name} AS BINARY)")
    return f"{name} <=> " + value.format(name)


def apply_keyless(cur, store: ObjectStore, staged: StagedTable) -> int:
    """Remove ``n`` copies of every staged row (rows whose count went down), then load the copies
    of every row whose count went up. A keyless table has no row identity, so a delete names the
    row by all its values; the values come from the staging table inside the server, so they are
    compared type for type (a FLOAT is never re-parsed from text)."""
    target = qualified(staged.changes.database, staged.changes.table)
    deleted = 0
    for stage in staged.stages:
        if not stage["stage"]:
            continue
        cur.execute(f"SELECT {ROW}, {COUNT} FROM {qualified_staging(stage['stage'])}")
        for row, copies in cur.fetchall():
            match = " AND ".join(_match_staged_row(c, stage["stage"], row) for c in staged.columns)
            removed = cur.execute(f"DELETE FROM {target} WHERE {match} LIMIT {int(copies)}")
            if removed != copies:
                raise diverged(staged, "removing a row the leader deleted found", copies, removed)
            deleted += removed
    inserted = load_rows(cur, store, staged)
    if inserted != staged.total("inserts"):
        raise diverged(staged, "inserting the batch's rows wrote", staged.total("inserts"), inserted)
    return deleted + inserted
