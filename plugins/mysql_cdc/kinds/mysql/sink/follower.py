"""Driver side: everything the merge job does inside the follower.

- ``Follower.check_table``: the target exists and has the batch's columns.
- ``Follower.apply_rows``: one transaction per row segment: lock the checkpoint row, delete what
  the staging tables name, LOAD DATA the load files straight into the tables, move the
  checkpoint, commit.
- ``Follower.replay_ddl``: a DDL statement, made crash-safe by the pending-DDL marker.
- ``Follower.create_shadow`` / ``swap_in``: a snapshot's copy, loaded in parallel into a shadow
  table beside the target, then renamed into its place, made crash-safe by the table position's
  ``swapping`` state (``apply_snapshot``: the same in one transaction, for a table a rename
  would break).

SQL that holds identifiers never goes through pymysql's ``%`` formatting (a column may be called
``a%b``): it is executed without parameters, and the only values it embeds are integers we made.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Iterator, Sequence

import pymysql
from pymysql.constants import CLIENT

from ....contracts import (
    DONE, SWAPPING, ChangeBatch, Checkpoint, DdlSegment, DdlTarget, SnapshotSegment, TableChanges, TablePosition,
    TablePositions, require_checkpoint,
)
from ....server_state.checkpoint import read_checkpoint, read_table_positions, write_checkpoint, write_table_position
from ....server_state.schema import STATE_SCHEMA
from ....mysql_server import MySQLSettings
from ....storage import ObjectStore
from .connection import connect
from .encoding import quote_ident
from .dialect import MARIADB, MYSQL, DdlTranslator, flavor_of
from ....merge.errors import CheckpointError, FollowerSchemaError, FollowerVersionError, MergeError
from ....crash_points import crash_point
from .rows import apply_keyed, apply_keyless, apply_statements, diverged, load_rows
from ....contracts.change_row import RESERVED_PREFIX
from .staging import qualified_staging
from .statements import STATEMENT_BYTES
from .stream import StatementSender
from .tables import FollowerColumn, StagedTable, qualified, shadow_name, shadow_sql

log = logging.getLogger(__name__)

_ER_NO_SUCH_TABLE, _ER_BAD_DB = 1146, 1049


# the oldest servers the merge's queries run on as followers (``tables_columns``: JSON_ARRAYAGG)
_OLDEST_FOLLOWER = {MARIADB: (10, 5), MYSQL: (8, 0)}


def check_follower_version(version: str, where: str) -> None:
    """A clear error if the follower (``where``, as its settings describe it) runs a server older
    than ``_OLDEST_FOLLOWER`` (``version``: its ``SELECT VERSION()``)."""
    flavor = flavor_of(version)
    numbers = tuple(int(n) for n in re.findall(r"\d+", version)[:2])
    if numbers < _OLDEST_FOLLOWER[flavor]:
        raise FollowerVersionError(
            f"{where} runs {flavor} {version}: the merge needs MariaDB 10.5+ or MySQL 8.0+ as the follower; "
            "upgrade it, or point the pipeline's follower connection at a newer server")


def _follower_column(name: str, data_type: str, column_type: str, charset: str | None, collation: str | None,
                     extra: str | None) -> FollowerColumn:
    """A column as information_schema.COLUMNS describes it (from ``COLUMN_NAME`` to ``EXTRA``)."""
    return FollowerColumn(name, data_type.lower(), column_type, charset, collation, "GENERATED" in (extra or "").upper())


# -- the follower --------------------------------------------------------------------------------


class Follower:
    def __init__(self, settings: MySQLSettings, leader_flavor: str | None = None):
        self.settings = settings
        # LOAD DATA LOCAL INFILE writes the batch's rows inside the segment transaction; small
        # tables' statements go many per round trip (``rows.apply_statements``)
        self.conn = connect(settings, local_infile=True, client_flag=CLIENT.MULTI_STATEMENTS)
        version, max_packet = self._rows("SELECT VERSION(), @@max_allowed_packet")[0]
        try:
            check_follower_version(version, settings.describe("follower"))
        except FollowerVersionError:
            self.conn.close()
            raise
        self.flavor = flavor_of(version)
        # the SQL one round trip of statements may carry: well within what the server accepts
        self.statement_bytes = min(STATEMENT_BYTES, int(max_packet) // 4)
        # the leader's DDL in this server's dialect (a MySQL leader and a MariaDB follower, or the
        # reverse): ``leader_flavor`` is the batch's server_flavor
        self.dialect = DdlTranslator(leader_flavor or self.flavor, self.flavor)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Follower":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _rows(self, sql: str, args: Sequence = ()) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args or None)
            return list(cur.fetchall())

    # -- checkpoint ---------------------------------------------------------------------------

    def checkpoint(self, pipeline: str) -> Checkpoint:
        return require_checkpoint(read_checkpoint(self.conn, pipeline), pipeline)

    def table_positions(self, pipeline: str) -> TablePositions:
        return read_table_positions(self.conn, pipeline)

    def lock_checkpoint(self, pipeline: str) -> Checkpoint | None:
        """Begin a transaction holding the pipeline's checkpoint row locked (serializes merges of
        one pipeline); returns the checkpoint as the lock found it."""
        self.conn.begin()
        try:
            return read_checkpoint(self.conn, pipeline, for_update=True)
        except BaseException:
            self.rollback()
            raise

    def rollback(self) -> None:
        try:
            self.conn.rollback()
        except pymysql.MySQLError:
            pass  # the connection is gone: the server rolls back on its own

    @contextmanager
    def locked(self, expected: Checkpoint, crash_before_commit: bool = False, begun: bool = False,
               current: Checkpoint | None = None) -> Iterator:
        """A transaction holding the pipeline's checkpoint row locked (``lock_checkpoint``), committed
        at the end; refuses to go on if the checkpoint moved since the job planned its work.
        ``begun``: the transaction was begun already, and ``current`` is the checkpoint its lock found."""
        if not begun:
            current = self.lock_checkpoint(expected.pipeline)
        try:
            if current is None or (current.position, current.pending_ddl_pos) != (
                expected.position, expected.pending_ddl_pos
            ):
                found = "no checkpoint" if current is None else f"{current.position}"
                raise CheckpointError(
                    f"the checkpoint of pipeline {expected.pipeline!r} moved from {expected.position} to "
                    f"{found} while this merge ran: another merge of the same pipeline is running; "
                    "let it finish, then rerun"
                )
            with self.conn.cursor() as cur:
                yield cur
            if crash_before_commit:
                crash_point("before_commit")
            self.conn.commit()
        except BaseException:
            self.rollback()
            raise

    # -- tables -------------------------------------------------------------------------------

    def table_columns(self, database: str, table: str) -> list[FollowerColumn]:
        rows = self._rows(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, COLLATION_NAME, EXTRA "
            "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "ORDER BY ORDINAL_POSITION",
            (database, table),
        )
        return [_follower_column(*r) for r in rows]

    def tables_columns(self, tables: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[FollowerColumn]]:
        """The columns of each (database, table) that exists, in one query (a batch may touch a
        thousand tables: one round trip each would cost more than their rows). A table's columns
        come as one JSON value (MariaDB 10.5+, MySQL 5.7.22+): a row per column cost this client
        more than the server its work, as pymysql parses every field in Python (1,000 tables of
        5.5 columns: 93 ms of CPU as rows, 28 ms as JSON)."""
        found: dict[tuple[str, str], list[FollowerColumn]] = {}
        if not tables:
            return found
        # MariaDB cuts a JSON_ARRAYAGG at group_concat_max_len (1 MB by default, less if so set);
        # no reply can be longer than max_allowed_packet anyway
        self._rows("SET SESSION group_concat_max_len = @@max_allowed_packet")
        for start in range(0, len(tables), 500):
            chunk = tables[start:start + 500]
            rows = self._rows(
                "SELECT TABLE_SCHEMA, TABLE_NAME, JSON_ARRAYAGG(JSON_ARRAY(ORDINAL_POSITION, COLUMN_NAME, DATA_TYPE, "
                "COLUMN_TYPE, CHARACTER_SET_NAME, COLLATION_NAME, EXTRA)) FROM information_schema.COLUMNS "
                "WHERE (TABLE_SCHEMA, TABLE_NAME) IN (" + ", ".join(["(%s, %s)"] * len(chunk)) + ") "
                "GROUP BY TABLE_SCHEMA, TABLE_NAME",
                [part for pair in chunk for part in pair],
            )
            for database, table, columns in rows:
                # (MySQL's JSON_ARRAYAGG has no ORDER BY: the columns come in any order)
                ordered = sorted(json.loads(columns), key=lambda column: column[0])
                found[(database, table)] = [_follower_column(*column[1:]) for column in ordered]
        return found

    def check_tables(self, tables: Sequence[TableChanges]) -> list[tuple[FollowerColumn, ...]]:
        """``check_table`` of each table, with one query for all their columns (a table not found
        under its exact name is asked for alone, as ``check_table`` does)."""
        columns = self.tables_columns([(t.database, t.table) for t in tables])
        return [self.check_table(t, columns.get((t.database, t.table))) for t in tables]

    def check_table(self, changes: TableChanges, columns: list[FollowerColumn] | None = None
                    ) -> tuple[FollowerColumn, ...]:
        """The follower's columns in the batch's order; a clear error if the table is missing or
        its columns are not the batch's. ``columns``: the table's, when already read."""
        name = f"`{changes.database}`.`{changes.table}`"
        if columns is None:
            columns = self.table_columns(changes.database, changes.table)
        if not columns:
            raise FollowerSchemaError(
                f"follower table {name} does not exist: copy it from the leader with a resnapshot run of the "
                f"pipeline's DAG (trigger it with conf {{\"resnapshot\": [\"{changes.database}.{changes.table}\"]}}); "
                "the other tables keep streaming", problem="the follower has no such table")
        clash = sorted(c.name for c in changes.columns if c.name.lower().startswith(RESERVED_PREFIX))
        if clash:
            raise FollowerSchemaError(
                f"{name}: column(s) {clash} start with {RESERVED_PREFIX!r}, which the merge job reserves for its "
                "working columns; rename them on the leader or exclude the table"
            )
        by_name = {c.name.lower(): c for c in columns}
        batch_names = {c.name.lower() for c in changes.columns}
        missing = [c.name for c in changes.columns if c.name.lower() not in by_name]
        # generated columns may be absent from the binlog's row images; they compute themselves
        extra = [c.name for c in columns if c.name.lower() not in batch_names and not c.generated]
        mistyped = [
            f"{c.name} ({c.mysql_type} in the batch, {by_name[c.name.lower()].column_type} on the follower)"
            for c in changes.columns
            if c.name.lower() in by_name and not by_name[c.name.lower()].matches(c.mysql_type)
        ]
        if missing or extra or mistyped:
            problems = []
            if missing:
                problems.append(f"missing on the follower: {missing}")
            if extra:
                problems.append(f"only on the follower: {extra}")
            if mistyped:
                problems.append(f"different types: {mistyped}")
            raise FollowerSchemaError(
                f"the columns of {name} in batch differ from the follower table ({'; '.join(problems)}): "
                "the follower's schema drifted from the leader's; re-copy the table with a resnapshot run "
                f"(conf {{\"resnapshot\": [\"{changes.database}.{changes.table}\"]}}), which recreates it from the "
                "leader's definition", problem=f"the follower's columns differ from the leader's ({'; '.join(problems)})")
        return tuple(by_name[c.name.lower()] for c in changes.columns)

    def database_exists(self, database: str) -> bool:
        return bool(self._rows("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (database,)))

    # -- staging ------------------------------------------------------------------------------

    def drop_staging(self, prefix: str) -> None:
        """Drop every staging table whose name starts with ``prefix`` (leftovers of crashed runs
        included)."""
        like = prefix.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + "%"
        names = [r[0] for r in self._rows(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME LIKE %s",
            (STATE_SCHEMA, like),
        )]
        if names:
            with self.conn.cursor() as cur:
                cur.execute("DROP TABLE IF EXISTS " + ", ".join(qualified_staging(n) for n in names))

    # -- row segments -------------------------------------------------------------------------

    def apply_rows(self, expected: Checkpoint, tables: Sequence[StagedTable], store: ObjectStore,
                   done: Checkpoint, sent: StatementSender | None = None) -> dict[str, tuple[int, float]]:
        """Apply the prepared tables of one row segment (statements; staging tables and load files,
        the latter in ``store``) and move the checkpoint to ``done``, in one transaction. ``sent``:
        that transaction was begun by a sender that has sent the statements of ``tables`` already
        (``stream``). Returns (rows written, seconds) per table."""
        applied, current = {}, None
        if sent is not None:
            try:
                applied, current = sent.finish(), sent.checkpoint
            except BaseException:
                self.rollback()
                raise
        with self.locked(expected, crash_before_commit=True, begun=sent is not None, current=current) as cur:
            if sent is None:
                applied.update(apply_statements(cur, [s for s in tables if s.statements], self.statement_bytes))
            for staged in (s for s in tables if not s.statements):
                started = time.monotonic()
                apply = apply_keyed if staged.changes.key_columns else apply_keyless
                written = apply(cur, store, staged)
                applied[staged.changes.qualified_name] = (written, time.monotonic() - started)
            write_checkpoint(self.conn, done)
        return applied

    # -- snapshot segments --------------------------------------------------------------------

    def prepare_snapshot_table(self, segment: SnapshotSegment) -> tuple[FollowerColumn, ...]:
        """The follower table the copy goes into, made from the leader's own definitions when it is
        missing or does not match: the database if absent, the table dropped and created again.
        (DDL commits on its own; a crash after it leaves a table the retry makes again, and the
        table's position still says its copy is unfinished.)"""
        if not self.database_exists(segment.database):
            with self.conn.cursor() as cur:
                cur.execute(self.dialect(re.sub(r"^CREATE DATABASE ", "CREATE DATABASE IF NOT EXISTS ",
                                                segment.create_database)))
        try:
            return self.check_table(segment.as_table_changes())
        except FollowerSchemaError as exc:  # this copy is the repair: say what it repairs, not how
            log.info("snapshot of %s: %s: creating it from the leader's definition", segment.qualified_name,
                     exc.problem)
        conn = connect(self.settings, database=segment.database)
        try:
            with conn.cursor() as cur:
                cur.execute(f"DROP TABLE IF EXISTS {qualified(segment.database, segment.table)}")
                cur.execute(self.dialect(segment.create_table))
        finally:
            conn.close()
        return self.check_table(segment.as_table_changes())

    def apply_snapshot(self, expected: Checkpoint, segment: SnapshotSegment, staged: StagedTable,
                       store: ObjectStore, batch_id: str, done: Checkpoint | None,
                       expected_rows: int | None = None) -> int:
        """Replace the table's rows with the staged copy (its chunks already caught up to one
        position) and record the table's position, in one transaction (readers see the old rows
        until it commits); ``done`` also moves the pipeline's position (a copy of every table).
        ``expected_rows``: the rows the load must write (None: the rows staged). Returns them."""
        target = qualified(segment.database, segment.table)
        with self.locked(expected, crash_before_commit=True) as cur:
            cur.execute(f"DELETE FROM {target}")
            inserted = load_rows(cur, store, staged)
            expected_rows = staged.total("rows") if expected_rows is None else expected_rows
            if inserted != expected_rows:
                raise diverged(staged, "loading the snapshot wrote", expected_rows, inserted)
            write_table_position(self.conn, expected.pipeline,
                                 TablePosition(segment.database, segment.table, segment.at, batch_id, DONE))
            if done is not None:
                write_checkpoint(self.conn, done)
        return inserted

    def swap_refused(self, database: str, table: str) -> str | None:
        """Why a copy of the table cannot go through a shadow table, or None. A rename takes the
        table's triggers away with it, and foreign keys name their tables (``CREATE TABLE ...
        LIKE`` copies neither): such a table is loaded in the commit's own transaction."""
        triggers = self._rows(
            "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = %s "
            "AND EVENT_OBJECT_TABLE = %s", (database, table))[0][0]
        keys = self._rows(
            "SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE (CONSTRAINT_SCHEMA = %s AND "
            "TABLE_NAME = %s) OR (UNIQUE_CONSTRAINT_SCHEMA = %s AND REFERENCED_TABLE_NAME = %s)",
            (database, table, database, table))[0][0]
        if triggers or keys:
            return f"it has {triggers} trigger(s) and {keys} foreign key(s) on the follower"
        return None

    def _has_primary_key(self, database: str, table: str) -> bool:
        return bool(self._rows(
            "SELECT 1 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "AND INDEX_NAME = 'PRIMARY' LIMIT 1", (database, table)))

    def create_shadow(self, segment: SnapshotSegment) -> str:
        """An empty table like the follower's (made from the leader's definition just before),
        beside it; leftovers of a crashed attempt are dropped first. Returns its SQL name."""
        shadow = shadow_sql(segment, "new")
        with self.conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {shadow}, {shadow_sql(segment, 'old')}")
            cur.execute(f"CREATE TABLE {shadow} LIKE {qualified(segment.database, segment.table)}")
        return shadow

    def drop_shadow(self, segment: SnapshotSegment) -> None:
        with self.conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {shadow_sql(segment, 'new')}")

    def swap_in(self, expected: Checkpoint, segment: SnapshotSegment, batch_id: str, done: Checkpoint | None,
                expected_rows: int) -> int:
        """Put the shadow table, holding the whole copy, in the table's place and record the
        table's position (and ``done``, the pipeline's). A rename is DDL and commits on its own,
        so the table's position says ``swapping`` first: from then on the shadow is complete, and
        a shadow that is gone has been renamed in. ``finish_swap`` does the rest, now or on the
        retry after a crash. Returns the rows of the copy."""
        shadow = shadow_sql(segment, "new")
        # The tasks each checked their own load. A task Spark ran again after its load committed
        # loads its rows a second time: with a primary key that second load fails on the
        # duplicates (a LOAD warning stops the task), without one only a count shows it. (The
        # count is not free: 1.5 s for 5M rows here.)
        rows = expected_rows if self._has_primary_key(segment.database, shadow_name(segment.table, "new")) else \
            self._rows(f"SELECT COUNT(*) FROM {shadow}")[0][0]
        if rows != expected_rows:
            raise MergeError(
                f"{shadow}: the copy of {segment.qualified_name} loaded {rows} rows where {expected_rows} were staged "
                "(a Spark task retried after its load?); run the merge again: it loads the copy afresh"
            )
        with self.locked(expected):
            write_table_position(self.conn, expected.pipeline,
                                 TablePosition(segment.database, segment.table, segment.at, batch_id, SWAPPING))
        crash_point("before_swap")
        self.finish_swap(expected, segment, batch_id, done)
        return rows

    def finish_swap(self, expected: Checkpoint, segment: SnapshotSegment, batch_id: str,
                    done: Checkpoint | None) -> None:
        """The swap after its ``swapping`` mark: rename the shadow in if it is still there (one
        atomic RENAME: readers see the old rows or the copy, never no table), drop the table it
        replaced, mark the table's position done."""
        target, new, old = qualified(segment.database, segment.table), shadow_sql(segment, "new"), shadow_sql(segment, "old")
        present = {r[0] for r in self._rows(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN (%s, %s)",
            (segment.database, shadow_name(segment.table, "new"), segment.table))}
        with self.conn.cursor() as cur:
            if shadow_name(segment.table, "new") in present:
                renames = [f"{target} TO {old}"] if segment.table in present else []
                cur.execute("RENAME TABLE " + ", ".join([*renames, f"{new} TO {target}"]))
                crash_point("after_swap")
            cur.execute(f"DROP TABLE IF EXISTS {old}")
        with self.locked(expected, crash_before_commit=True):
            write_table_position(self.conn, expected.pipeline,
                                 TablePosition(segment.database, segment.table, segment.at, batch_id, DONE))
            if done is not None:
                write_checkpoint(self.conn, done)

    def advance(self, expected: Checkpoint, done: Checkpoint) -> None:
        with self.locked(expected):
            write_checkpoint(self.conn, done)

    # -- DDL ----------------------------------------------------------------------------------

    def fingerprint(self, targets: Sequence[DdlTarget]) -> str:
        """A digest of what the DDL's targets look like now: SHOW CREATE of each, or 'absent'.
        Running a DDL that is not idempotent changes it; one that leaves it equal (TRUNCATE, a
        no-op ALTER, IF [NOT] EXISTS) can safely run again."""
        parts = [f"{t.database}.{t.table}={self._show_create(t)}" for t in targets]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def _show_create(self, target: DdlTarget) -> str:
        if target.table is None:
            sql = f"SHOW CREATE DATABASE {quote_ident(target.database)}"
        else:
            sql = f"SHOW CREATE TABLE {qualified(target.database, target.table)}"
        try:
            text = self._rows(sql)[0][1]
        except pymysql.MySQLError as exc:
            if exc.args[0] in (_ER_NO_SUCH_TABLE, _ER_BAD_DB):
                return "absent"
            raise
        # the AUTO_INCREMENT counter moves with inserts, not with schema changes
        return re.sub(r" AUTO_INCREMENT=\d+", "", text)

    def run_statement(self, segment: DdlSegment) -> None:
        """The DDL on its own connection, in the leader session's default schema when the follower
        has it (``CREATE DATABASE d`` is logged with default schema d, which does not exist yet)."""
        schema = segment.schema if segment.schema and self.database_exists(segment.schema) else None
        statement = self.dialect(segment.statement)  # refuses, before it runs, what has no equivalent
        conn = connect(self.settings, database=schema)
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
        except pymysql.MySQLError as exc:
            raise MergeError(
                f"replaying the DDL at {segment.start} on the follower failed: {exc.args[-1]} "
                f"(statement: {segment.statement[:300]!r}, default schema {segment.schema!r}); make the "
                "follower able to run it (its schema must match the leader's before the statement), then rerun"
            ) from None
        finally:
            conn.close()

    def replay_ddl(self, batch: ChangeBatch, segment: DdlSegment, checkpoint: Checkpoint) -> Checkpoint:
        """Run one DDL segment exactly once; returns the checkpoint after it.

        1. record the marker (pending_ddl_pos = the segment's start, fingerprint of its targets)
           and commit; 2. run the DDL (it commits implicitly); 3. move the checkpoint past it and
        clear the marker. A retry that finds this segment's marker compares fingerprints: unchanged
        means step 2 never happened, changed means it did and only step 3 is left."""
        if checkpoint.pending_ddl_pos == segment.start:
            already_ran = self.fingerprint(segment.targets) != checkpoint.pending_ddl_fingerprint
            log.info("DDL at %s was pending: %s", segment.start, "it ran, advancing" if already_ran else "running it")
        else:
            marker = replace(
                checkpoint, position=segment.start, batch_id=batch.batch_id, pending_ddl_pos=segment.start,
                pending_ddl_fingerprint=self.fingerprint(segment.targets),
                gtid=checkpoint.gtid if checkpoint.position == segment.start else None,
                gtid_set=checkpoint.gtid_set if checkpoint.position == segment.start else None,
            )
            self.advance(checkpoint, marker)
            checkpoint, already_ran = marker, False
        if not already_ran:
            self.run_statement(segment)
            crash_point("after_ddl")
        done = Checkpoint(checkpoint.pipeline, segment.end, segment.gtid, batch.batch_id, gtid_set=segment.gtid_set,
                          leader_id=batch.leader_id)
        self.advance(checkpoint, done)
        return done
