"""Set-based apply inside the follower's transaction: delete what the staging tables name, then
``LOAD DATA`` the load files straight into the target; or, for small keyed tables, their two
statements (``statements``), many tables per round trip. Every count is checked against what the
leader's changes imply, so a follower written outside the pipeline is found, not papered over."""

from __future__ import annotations

import time
from typing import Iterator, Sequence

import pymysql

from ....merge.errors import FollowerDivergedError
from ....storage import ObjectStore
from .encoding import quote_ident
from .staging import COUNT, ROW, LoadWarningsError, StagingError, check_load_warnings, load_data, qualified_staging
from .tables import TEXT_TYPES, FollowerColumn, StagedTable, qualified

_ER_DUP_ENTRY = 1062


def _existing_key(staged: StagedTable, detail: str) -> FollowerDivergedError:
    return FollowerDivergedError(
        f"{qualified(staged.changes.database, staged.changes.table)}: inserting the batch's rows hit an existing "
        f"key ({detail}): the follower holds rows the leader did not have at the checkpoint (it was written "
        "outside the pipeline); re-copy it with a resnapshot run "
        f"(conf {{\"resnapshot\": [\"{staged.changes.qualified_name}\"]}})"
    )


def load_rows(cur, store: ObjectStore, staged: StagedTable) -> int:
    """LOAD DATA every load file of the table straight into it; returns the rows written."""
    target = qualified(staged.changes.database, staged.changes.table)
    loaded = 0
    for stage in staged.stages:
        if stage.get("load_path"):  # staged by the driver itself: the file is on this machine
            loaded += load_data(cur, stage["load_path"], target, stage["load_columns"])
        elif stage["load_file"]:
            with store.local_copy(stage["load_file"]) as path:
                loaded += load_data(cur, path, target, stage["load_columns"])
        else:
            continue
        try:
            check_load_warnings(cur, target)
        except LoadWarningsError as exc:
            # LOAD DATA LOCAL skips a row whose key exists, with warning 1062, instead of failing
            if _ER_DUP_ENTRY in exc.codes:
                raise _existing_key(staged, str(exc)) from None
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


# -- small keyed tables: statements ----------------------------------------------------------------


def _statement_chunks(tables: Sequence[StagedTable], limit: int) -> Iterator[list[tuple[StagedTable, str, str]]]:
    """The tables' statements, (table, "delete" or "insert", SQL) in order (a table's delete before
    its insert), in runs of at most ``limit`` bytes of SQL (a run holds at least one statement)."""
    run, size = [], 0
    for staged in tables:
        for kind, sql in (("delete", staged.statements.delete), ("insert", staged.statements.insert)):
            if sql is None:
                continue
            if run and size + len(sql) > limit:
                yield run
                run, size = [], 0
            run.append((staged, kind, sql))
            size += len(sql) + 1
    if run:
        yield run


def _check_statement(cur, staged: StagedTable, kind: str) -> int:
    """The rows the statement just read changed, checked against the leader's changes."""
    expected = staged.statements.deletes_expected if kind == "delete" else staged.statements.inserts_expected
    if cur.warning_count:
        # A server that is not strict stores a value it cannot hold altered, with a warning: refused,
        # as the load file's warnings are. The leader held the value, so the follower's column is
        # not the leader's (a length or precision ``check_table`` does not compare): re-copying the
        # table recreates it from the leader's definition. (SHOW WARNINGS would describe the round
        # trip's last statement, not this one.)
        raise StagingError(
            f"{qualified(staged.changes.database, staged.changes.table)}: the follower took the batch's {kind} with "
            f"{cur.warning_count} warning(s): it would store values other than the leader's (its columns cannot "
            "hold them: their definition drifted from the leader's); nothing was committed. Re-copy the table "
            f"with a resnapshot run (conf {{\"resnapshot\": [\"{staged.changes.qualified_name}\"]}})")
    if cur.rowcount != expected:
        what = "deleting the batch's changed keys found" if kind == "delete" else "inserting the batch's rows wrote"
        raise diverged(staged, what, expected, cur.rowcount)
    return cur.rowcount


def apply_statements(cur, tables: Sequence[StagedTable], limit: int) -> dict[str, tuple[int, float]]:
    """Run the statements of small keyed tables (``statements``), many per round trip (the session
    allows multiple statements), checking each one's count; returns (rows written, seconds) per
    table, a round trip's seconds shared among its tables. A statement that fails stops the rest
    of its round trip, and the caller rolls the transaction back."""
    applied: dict[str, tuple[int, float]] = {}
    for run in _statement_chunks(tables, limit):
        started = time.monotonic()
        written: dict[str, int] = {}
        for i, (staged, kind, _) in enumerate(run):
            try:
                if i == 0:
                    cur.execute(";\n".join(sql for _, _, sql in run))
                else:
                    cur.nextset()
            except pymysql.err.IntegrityError as exc:
                if exc.args[0] == _ER_DUP_ENTRY:
                    raise _existing_key(staged, exc.args[-1]) from None
                raise
            name = staged.changes.qualified_name
            written[name] = written.get(name, 0) + _check_statement(cur, staged, kind)
        share = (time.monotonic() - started) / len(written)
        for name, rows in written.items():
            before = applied.get(name, (0, 0.0))
            applied[name] = (before[0] + rows, before[1] + share)
    return applied
