"""One table's net rows (``merge.transforms.net_changes``, in Delta values) applied to its Delta
table as ONE ``MERGE`` commit: by primary key, or, for a table without one, by full rows as a
multiset. The session's ``txnAppId``/``txnVersion`` (set by the sink) make the commit idempotent.

Into an empty table the net rows are an append (``append_rows``); rows netted on the driver are
appended by delta-rs straight from Arrow (``append_arrow``), under the same transaction id. A small
table's net rows netted on the driver are merged by delta-rs, with no Spark job
(``DeltaSink.merges_in_driver`` says when): a keyed table's with the clauses of ``merge_keyed``
(``merge_arrow``), a keyless table's multiset rewrite with those of ``merge_keyless``, planned in
Arrow (``merge_arrow_keyless``, ``keyless_rewrite``)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ....contracts import TableChanges
from ....contracts import change_row as cr
from ....merge import history, soft_deletes
from ....merge.multiset import COPIES as _COPIES, SIDE as _SIDE, keyless_rewrite
from .tables import DeltaTableRef, quote

_views = itertools.count()


def _view(df: DataFrame) -> str:
    name = f"__mcdc_src_{next(_views)}"
    df.createOrReplaceTempView(name)
    return name


def merge_rows(spark: SparkSession, target: DeltaTableRef, table: TableChanges, rows: DataFrame) -> None:
    """Net rows into a table holding rows, by Spark's MERGE (an empty table's: ``append_rows``)."""
    if table.key_columns:
        merge_keyed(spark, target, table, rows)
    else:
        merge_keyless(spark, target, table, rows)


def append_rows(target: DeltaTableRef, table: TableChanges, rows: DataFrame) -> None:
    """Into an empty table (just created: its first batch, a first snapshot's catch-up; or emptied)
    every net row that is not a delete is an insert: a plain append, the
    fastest write Delta has (no join with the table), idempotent like the MERGE it stands for
    (the session's transaction ids apply to it)."""
    columns = [quote(c) for c in _written(target, table)]
    inserts = rows.where(F.col(cr.NET_OP) != cr.DELETE).select(*columns)
    inserts.write.format("delta").mode("append").save(target.path)


def _written(target: DeltaTableRef, table: TableChanges) -> list[str]:
    """The columns a commit writes: the leader's, and a table's marks when it keeps its deleted rows
    (its net rows carry them: ``merge.soft_deletes.with_marks``)."""
    return [c.name for c in table.columns] + (list(soft_deletes.COLUMNS) if target.keeps_deleted else [])


def delta_arrow(table: TableChanges, rows: pa.Table, extra: tuple[str, ...] = ()) -> pa.Table:
    """Arrow rows' table columns in Delta values as ``tables.delta_value`` makes them (a TIME's
    microseconds; a timestamp without a zone is delta-rs's TIMESTAMP_NTZ as it is), with the
    ``extra`` columns (the net op and count) as they are."""
    arrays = [pc.cast(rows.column(c.name), pa.int64()) if c.arrow_type == "duration[us]" else rows.column(c.name)
              for c in table.columns]
    return pa.table(arrays + [rows.column(e) for e in extra], names=[c.name for c in table.columns] + list(extra))


def arrow_inserts(table: TableChanges, net: pa.Table, extra: tuple[str, ...] = ()) -> pa.Table:
    """``append_rows``'s rows from Arrow net rows: every one but a delete, in Delta values (with the
    ``extra`` columns: a table's soft-delete marks)."""
    return delta_arrow(table, net.filter(pc.not_equal(net.column(cr.NET_OP), cr.DELETE)), extra)


@dataclass(frozen=True)
class Txn:
    """The transaction id a table's commit carries (Delta's app id and version: the pipeline and
    the segment's end), and, when the committer knows it, the table's version in the pipeline's
    state row (``cut_version``: the cut the segment starts from)."""

    app_id: str
    version: int
    cut_version: int | None = None


def done(table, txn: Txn) -> bool:
    """Whether ``table`` (a delta-rs ``DeltaTable``) has a commit of the app at this version or later.
    Spark skips an idempotent commit it already has by itself; delta-rs does not, so the table's own
    record of the app's last version is read first: a retry after a crash that followed the commit
    writes nothing twice. A table still at its version in the cut has had no commit since the state
    row was written (versions only grow, and the row is written after every table of a segment),
    so none of this segment: known without that read, which reads every log entry since the
    table's last log checkpoint (on object storage, a request each)."""
    if txn.cut_version is not None and table.version() == txn.cut_version:
        return False
    last = table.transaction_version(txn.app_id)
    return last is not None and last >= txn.version


def commit_properties(txn: Txn):
    from deltalake import CommitProperties, Transaction

    return CommitProperties(app_transactions=[Transaction(txn.app_id, txn.version)])


def append_arrow(table, rows: pa.Table, txn: Txn) -> None:
    """Append ``rows`` to ``table`` (a delta-rs ``DeltaTable``), as one commit carrying the
    transaction id ``txn``, unless the table has it. No rows: no commit."""
    from deltalake import write_deltalake

    if not rows.num_rows or done(table, txn):
        return
    write_deltalake(table, _spelled(table, rows)[1], mode="append", commit_properties=commit_properties(txn))


def _spelled(table, rows: pa.Table):
    """How ``table`` (a delta-rs ``DeltaTable``) spells a batch column's name, and ``rows`` with their
    columns named so. MySQL's column names ignore case, and so do Spark's reads and writes; delta-rs's
    do not (an update of a column it cannot find by its case changes nothing, silently), and a rename
    that changed only a column's case left the lake's spelling as it was."""
    spelled = {f.name.lower(): f.name for f in table.schema().fields}

    def name(column: str) -> str:
        return spelled.get(column.lower(), column)

    return name, rows.rename_columns([name(n) for n in rows.column_names])


def sql_name(name: str) -> str:
    """A column name as delta-rs's predicates and expressions take it: they are DataFusion SQL, its
    identifiers in double quotes."""
    return '"' + name.replace('"', '""') + '"'


def merge_arrow(table, changes: TableChanges, rows: pa.Table, txn: Txn, keeps_deleted: bool = False) -> None:
    """``merge_keyed`` by delta-rs from Arrow net rows in Delta values (``delta_arrow`` with the net op,
    and a table's soft-delete marks when it ``keeps_deleted``): one commit carrying ``txn``, unless
    the table has it. delta-rs honours the table's deletion vectors and column mapping, writes its
    change data feed, and rewrites the files holding the rows it changes (copy-on-write), which is
    why only small tables take this path."""
    if not rows.num_rows or done(table, txn):
        return
    name, rows = _spelled(table, rows)
    marks = soft_deletes.COLUMNS if keeps_deleted else ()
    values = {sql_name(name(c)): f"s.{sql_name(name(c))}" for c in [*(c.name for c in changes.columns), *marks]}
    on = " AND ".join(f"t.{sql_name(name(k))} = s.{sql_name(name(k))}" for k in changes.key_columns)
    op = f"s.{sql_name(cr.NET_OP)}"
    deleting = f"{op} = '{cr.DELETE}'"
    merge = table.merge(rows, on, source_alias="s", target_alias="t", commit_properties=commit_properties(txn))
    # a deleted row is removed, or, kept, only its marks set (a moved key's before image holds its key only)
    merge = (merge.when_matched_update(updates={sql_name(m): f"s.{sql_name(m)}" for m in marks}, predicate=deleting)
             if keeps_deleted else merge.when_matched_delete(predicate=deleting))
    (merge.when_matched_update(updates=values)
     .when_not_matched_insert(updates=values, predicate=f"{op} <> '{cr.DELETE}'")
     .execute())


HISTORY_KIND = "__mcdc_kind"  # a history merge's source row: 'close' a current version, or 'open' one


def history_source(table: TableChanges, versions: history.SegmentVersions) -> pa.Table:
    """A history table's segment as one MERGE's source rows, in Delta values: each key's current
    version to close (``closing``: its key and end) and the versions to add (``added``)."""
    added = delta_arrow(table, versions.added, history.COLUMNS)
    closing = versions.closing
    n = closing.num_rows
    columns = []
    for field in added.schema:
        if field.name in closing.column_names:
            values = closing.column(field.name)
            columns.append(pc.cast(values, pa.int64()) if pa.types.is_duration(values.type) else values.cast(field.type))
        else:
            columns.append(pa.nulls(n, field.type))
    closing = pa.table(columns, schema=added.schema)
    return pa.concat_tables([
        closing.append_column(HISTORY_KIND, pa.array(["close"] * n, pa.string())),
        added.append_column(HISTORY_KIND, pa.array(["open"] * added.num_rows, pa.string()))])


def _history_clauses(changes: TableChanges, quoted) -> tuple[str, dict[str, str], dict[str, str]]:
    """A history MERGE's ON condition, its update of a closed version, its insert of a new one, with
    names quoted by ``quoted`` (Spark's or DataFusion's)."""
    on = " AND ".join([*(f"t.{quoted(k)} = s.{quoted(k)}" for k in changes.key_columns),
                       f"COALESCE(t.{quoted(history.CURRENT)}, true)", f"s.{quoted(HISTORY_KIND)} = 'close'"])
    closing = {quoted(history.VALID_TO): f"s.{quoted(history.VALID_TO)}",
               quoted(history.VALID_TO_SEQ): f"s.{quoted(history.VALID_TO_SEQ)}", quoted(history.CURRENT): "false"}
    opening = {quoted(c): f"s.{quoted(c)}" for c in [*(c.name for c in changes.columns), *history.COLUMNS]}
    return on, closing, opening


def merge_history_arrow(table, changes: TableChanges, source: pa.Table, txn: Txn) -> None:
    """A history table's segment (``history_source``) by delta-rs: the current version of each key it
    touches closed, its versions inserted, in one commit carrying ``txn`` (unless the table has it)."""
    if not source.num_rows or done(table, txn):
        return
    name, source = _spelled(table, source)
    on, closing, opening = _history_clauses(changes, lambda c: sql_name(name(c)))
    (table.merge(source, on, source_alias="s", target_alias="t", commit_properties=commit_properties(txn))
     .when_matched_update(updates=closing)
     .when_not_matched_insert(updates=opening, predicate=f"s.{sql_name(HISTORY_KIND)} = 'open'")
     .execute())


def merge_history(spark: SparkSession, target: DeltaTableRef, changes: TableChanges, source: DataFrame) -> None:
    """``merge_history_arrow`` by Spark's MERGE (a large table), under the session's transaction ids."""
    on, closing, opening = _history_clauses(changes, quote)
    view = _view(source)
    spark.sql(
        f"MERGE INTO {target.sql} t USING {view} s ON {on} "
        f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{k} = {v}' for k, v in closing.items())} "
        f"WHEN NOT MATCHED AND s.{quote(HISTORY_KIND)} = 'open' THEN INSERT ({', '.join(opening)}) "
        f"VALUES ({', '.join(opening.values())})")
    spark.catalog.dropTempView(view)


def copies_held(table, names: list[str]) -> pa.Table:
    """Each distinct full row ``table`` (a delta-rs ``DeltaTable``) holds and its copies (column
    ``_COPIES``), counted by delta-rs's query engine (it reads deletion vectors and column mapping,
    which its plain readers refuse). NULLs group together, as equal rows of the leader are equal."""
    from deltalake import QueryBuilder

    columns = ", ".join(sql_name(n) for n in names)
    return pa.table(QueryBuilder().register("t", table)
                    .execute(f"SELECT {columns}, COUNT(*) AS {_COPIES} FROM t GROUP BY {columns}").read_all())


def merge_arrow_keyless(table, changes: TableChanges, rows: pa.Table, txn: Txn) -> None:
    """``merge_keyless`` by delta-rs from Arrow net rows in Delta values (``delta_arrow`` with the net
    op and copies): one commit carrying ``txn``, unless the table has it."""
    if not rows.num_rows or done(table, txn):
        return
    name, rows = _spelled(table, rows)
    names = [name(c.name) for c in changes.columns]
    source = keyless_rewrite(rows, copies_held(table, names), names)
    if not source.num_rows:
        return  # the batch's inserts and deletes of each value cancel out
    # DataFusion's parser binds IS NOT DISTINCT FROM looser than AND: each comparison in parentheses
    on = " AND ".join(f"(t.{sql_name(n)} IS NOT DISTINCT FROM s.{sql_name(n)})" for n in names)
    side = f"s.{sql_name(_SIDE)}"
    values = {sql_name(n): f"s.{sql_name(n)}" for n in names}
    (table.merge(source, f"{on} AND {side} = 'del'", source_alias="s", target_alias="t",
                 commit_properties=commit_properties(txn))
     .when_matched_delete()
     .when_not_matched_insert(updates=values, predicate=f"{side} = 'ins'")
     .execute())


def merge_keyed(spark: SparkSession, target: DeltaTableRef, table: TableChanges, rows: DataFrame) -> None:
    """``D`` deletes the key (or marks its row deleted, in a table that keeps its deleted rows), ``U``
    replaces the row (or inserts it: the key may be new to the table, after a copy), ``I`` inserts.
    The net rows hold one row per key, as MERGE requires."""
    columns = [quote(c) for c in _written(target, table)]
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in table.key_columns)
    op = f"s.{cr.NET_OP}"
    source = _view(rows)
    # a deleted row is removed, or, kept, only its marks set (a moved key's before image holds its key only)
    deleted = (f"UPDATE SET {', '.join(f't.{quote(m)} = s.{quote(m)}' for m in soft_deletes.COLUMNS)}"
               if target.keeps_deleted else "DELETE")
    spark.sql(
        f"MERGE INTO {target.sql} t USING {source} s ON {on} "
        f"WHEN MATCHED AND {op} = '{cr.DELETE}' THEN {deleted} "
        f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in columns)} "
        f"WHEN NOT MATCHED AND {op} <> '{cr.DELETE}' THEN INSERT ({', '.join(columns)}) "
        f"VALUES ({', '.join(f's.{c}' for c in columns)})"
    )
    spark.catalog.dropTempView(source)


def merge_keyless(spark: SparkSession, target: DeltaTableRef, table: TableChanges, rows: DataFrame) -> None:
    """A multiset: the net rows say how many copies of each full row to add (``I``, one net row
    per copy) or remove (``D``, ``__mcdc_n`` copies). Delta cannot delete some of several equal
    rows, so every row value the batch touches is rewritten whole: its copies in the table are
    counted, all of them deleted, and the count it must have inserted back, in the same MERGE.
    NULLs compare equal (``<=>``), as two equal rows of the leader do."""
    names = [c.name for c in table.columns]
    columns = [quote(n) for n in names]
    delta = F.sum(F.when(F.col(cr.NET_OP) == cr.INSERT, F.col(cr.NET_COUNT)).otherwise(-F.col(cr.NET_COUNT)))
    change = rows.groupBy(*columns).agg(delta.alias("change"))
    same = [F.col(f"c.{c}").eqNullSafe(F.col(f"e.{c}")) for c in columns]
    condition = same[0]
    for other in same[1:]:
        condition = condition & other
    existing = (spark.read.format("delta").load(target.path).alias("e")
                .join(change.select(*columns).alias("c"), condition, "left_semi")
                .groupBy(*columns).count())
    joined = change.alias("c").join(existing.alias("e"), condition, "left")
    final = joined.select(*[F.col(f"c.{c}").alias(n) for c, n in zip(columns, names)],
                          (F.coalesce(F.col("e.count"), F.lit(0)) + F.col("c.change")).alias("copies"))
    copies = (final.where(F.col("copies") > 0)
              .withColumn("copy", F.explode(F.sequence(F.lit(1).cast("long"), F.col("copies"))))
              .select(*columns, F.lit("ins").alias(_SIDE)))
    # A value is removed ("del") only where the table holds it: a "del" row that matches no target row
    # would, in the MERGE's outer join, sit beside a target side of NULLs, and when every column of
    # the value is NULL the ON condition's null-safe equalities hold for it there. Delta's merge-on-
    # read (deletion vectors) then counts it as matched and finds no clause for it: "Unexpected row:
    # did not match any merge clause" (tests/fixtures/delta-retry-after-kill). Values the table does
    # not hold have nothing to remove; their copies are inserted all the same.
    groups = existing.select(*columns, F.lit("del").alias(_SIDE))
    source = _view(groups.unionByName(copies))
    on = " AND ".join(f"t.{c} <=> s.{c}" for c in columns)
    spark.sql(
        f"MERGE INTO {target.sql} t USING {source} s ON {on} AND s.{_SIDE} = 'del' "
        "WHEN MATCHED THEN DELETE "
        f"WHEN NOT MATCHED AND s.{_SIDE} = 'ins' THEN INSERT ({', '.join(columns)}) "
        f"VALUES ({', '.join(f's.{c}' for c in columns)})"
    )
    spark.catalog.dropTempView(source)


def rows_written(table_uri: str, storage_options: dict) -> int:
    """The rows the table's last commit wrote (its operation metrics), read with delta-rs."""
    from deltalake import DeltaTable

    metrics = DeltaTable(table_uri, storage_options=storage_options).history(1)[0].get("operationMetrics", {})
    return int(metrics.get("numOutputRows") or metrics.get("numTargetRowsInserted") or 0)
