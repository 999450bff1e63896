"""Leader DDL replayed on a Delta Lake follower, each action idempotent by what it leaves (a retry
after a crash finds it done) or by the session's transaction ids (a ``DELETE``).

``versions`` (the state row's table -> Delta version) is updated in place: a table dropped leaves
the consistent cut, a table renamed enters it under its new name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ....merge.errors import FollowerSchemaError
from ....contracts import DdlSegment, DdlTarget
from .tables import create_table, drop_column, overwrite, quote, rename_column, table_exists

if TYPE_CHECKING:
    from . import DeltaSink

_IDENT = r"(?:`((?:[^`]|``)+)`|([A-Za-z0-9_$]+))"
_RENAME_COLUMN = re.compile(rf"\bRENAME\s+COLUMN\s+{_IDENT}\s+TO\s+{_IDENT}", re.I)
_CHANGE_COLUMN = re.compile(rf"\bCHANGE\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?{_IDENT}\s+{_IDENT}", re.I)
_DROP_COLUMN = re.compile(rf"\bDROP\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?{_IDENT}", re.I)
_NOT_COLUMNS = {"PRIMARY", "INDEX", "KEY", "FOREIGN", "CONSTRAINT", "CHECK", "PARTITION", "UNIQUE", "FULLTEXT",
                "SPATIAL", "SYSTEM", "DEFAULT"}
def _name(match: re.Match, first: int) -> str:
    quoted, bare = match.group(first), match.group(first + 1)
    return quoted.replace("``", "`") if quoted is not None else bare


def column_renames(statement: str) -> list[tuple[str, str]]:
    """(old, new) of the statement's ``RENAME COLUMN a TO b`` and ``CHANGE [COLUMN] a b ...``."""
    found = [(_name(m, 1), _name(m, 3)) for m in _RENAME_COLUMN.finditer(statement)]
    found += [(_name(m, 1), _name(m, 3)) for m in _CHANGE_COLUMN.finditer(statement)]
    return [(old, new) for old, new in found if old.lower() != new.lower()]


def column_drops(statement: str) -> list[str]:
    names = [_name(m, 1) for m in _DROP_COLUMN.finditer(statement)]
    return [n for n in names if n.upper() not in _NOT_COLUMNS]


def _drop_table(sink: "DeltaSink", target: DdlTarget, versions: dict[str, int]) -> None:
    """The table leaves the cut; its path keeps its history (time travel to before the drop)
    and is emptied, so a plain reader of its latest version sees no rows."""
    sink.empty_table(target.database, target.table)
    versions.pop(sink.ref(target.database, target.table).name, None)


def _truncate(sink: "DeltaSink", target: DdlTarget, versions: dict[str, int]) -> None:
    version = sink.empty_table(target.database, target.table)
    if version is not None:
        versions[sink.ref(target.database, target.table).name] = version


def _rename_table(sink: "DeltaSink", old: DdlTarget, new: DdlTarget, versions: dict[str, int]) -> None:
    """A Delta table's path is its name: the rows move to the new path in one commit, then the old
    table is dropped. Done when the old one has left the cut and the new one is in it."""
    spark = sink.spark()
    source, target = sink.ref(old.database, old.table), sink.ref(new.database, new.table)
    if source.name not in versions and target.name in versions:
        return
    if table_exists(spark, source):
        rows = spark.read.format("delta").load(source.path)
        create_table(spark, target, ", ".join(f"{quote(f.name)} {f.dataType.simpleString()}" for f in rows.schema.fields))
        overwrite(spark, target, rows)
        versions[target.name] = sink.version(new.database, new.table)
        sink.empty_table(old.database, old.table)
    versions.pop(source.name, None)


def _alter_table(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    target = segment.targets[0]
    if len(segment.targets) > 1:  # ALTER TABLE a ... RENAME TO b
        _rename_table(sink, target, segment.targets[1], versions)
        target = segment.targets[1]
    ref = sink.ref(target.database, target.table)
    if not table_exists(sink.spark(), ref):
        return  # created with its first rows, in the shape they have
    for old, new in column_renames(segment.statement):
        rename_column(sink.spark(), ref, old, new)
    for name in column_drops(segment.statement):
        drop_column(sink.spark(), ref, name)
    added = added_columns(segment.statement)
    if added:
        _add_columns(sink, ref, added)
    versions[ref.name] = sink.version(target.database, target.table)


@dataclass(frozen=True)
class AddedColumn:
    name: str
    mysql_type: str  # the DDL's type word, lower case ("int", "varchar", ...)
    args: str  # what its parentheses hold ("10,2"), or ""
    unsigned: bool
    not_null: bool
    default: str | None  # the DEFAULT literal as written (a number, a quoted string, NULL), "" for an
    # expression, None without DEFAULT


_CLAUSE_HEAD = re.compile(rf"^\s*ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?{_IDENT}\s+([A-Za-z]+)\s*(?:\(([^)]*)\))?(.*)$",
                          re.I | re.S)
_NOT_COLUMN_ADDS = re.compile(r"^\s*ADD\s+(?:PRIMARY|INDEX|KEY|UNIQUE|CONSTRAINT|FOREIGN|FULLTEXT|SPATIAL|CHECK|"
                              r"PARTITION|PERIOD|SYSTEM)\b", re.I)
_DEFAULT = re.compile(r"\bDEFAULT\s+('(?:[^'\\]|\\.|'')*'|-?[0-9.]+(?:e-?[0-9]+)?|NULL)", re.I)


def _clauses(statement: str) -> list[str]:
    """The statement's comma-separated clauses (commas inside parentheses or quotes kept)."""
    parts, depth, quote_char, start = [], 0, None, 0
    for i, ch in enumerate(statement):
        if quote_char:
            quote_char = None if ch == quote_char else quote_char
        elif ch in "'\"`":
            quote_char = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(statement[start:i])
            start = i + 1
    parts.append(statement[start:])
    # the first clause carries "ALTER TABLE name": keep what follows the table name
    first = re.match(rf"^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?{_IDENT}(?:\.{_IDENT})?(.*)$",
                     parts[0], re.I | re.S)
    if first:
        parts[0] = first.group(5)
    return parts


def added_columns(statement: str) -> list[AddedColumn]:
    """The columns an ALTER TABLE adds, with what gives the table's existing rows their value."""
    found = []
    for clause in _clauses(statement):
        if _NOT_COLUMN_ADDS.match(clause):
            continue
        match = _CLAUSE_HEAD.match(clause)
        if not match:
            continue
        rest = match.group(5) or ""
        literal = _DEFAULT.search(rest)
        # a DEFAULT that is no plain literal (CURRENT_TIMESTAMP, an expression): "" says "unknown"
        default = literal.group(1) if literal else ("" if re.search(r"\bDEFAULT\b", rest, re.I) else None)
        found.append(AddedColumn(_name(match, 1), match.group(3).lower(), (match.group(4) or "").replace(" ", ""),
                                 bool(re.search(r"\bUNSIGNED\b", rest, re.I)),
                                 bool(re.search(r"\bNOT\s+NULL\b", rest, re.I)), default))
    return found


# a MySQL column type of a DDL statement -> its Delta type, as capture types the binlog's columns
# (capture.types; the README's Types table): the column added now must be the one rows bring
_UNSIGNED_WIDER = {"tinyint": "SMALLINT", "smallint": "INT", "mediumint": "INT", "int": "BIGINT",
                   "integer": "BIGINT", "bigint": "DECIMAL(20,0)"}
_DDL_TYPES = {
    "tinyint": "TINYINT", "bool": "TINYINT", "boolean": "TINYINT", "smallint": "SMALLINT", "mediumint": "INT",
    "int": "INT", "integer": "INT", "bigint": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "real": "DOUBLE",
    "date": "DATE", "year": "SMALLINT", "datetime": "TIMESTAMP_NTZ", "timestamp": "TIMESTAMP", "time": "BIGINT",
    **{t: "STRING" for t in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json")},
    **{t: "BINARY" for t in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "bit")},
}
_NUMERIC = {"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE"}


def ddl_delta_type(column: AddedColumn) -> str | None:
    if column.mysql_type in ("decimal", "numeric", "dec", "fixed"):
        precision, _, scale = (column.args or "10,0").partition(",")
        if int(precision) > 38:
            return "STRING"
        return f"DECIMAL({int(precision)},{int(scale or 0)})"
    if column.unsigned and column.mysql_type in _UNSIGNED_WIDER:
        return _UNSIGNED_WIDER[column.mysql_type]
    return _DDL_TYPES.get(column.mysql_type)


def _existing_value(column: AddedColumn, delta_type: str) -> str | None:
    """The SQL literal every existing row takes (MySQL's DEFAULT, or NOT NULL's implicit zero),
    or None when the rows stay NULL; raises when it is not a plain literal we can give."""
    if column.default == "":
        return ""  # an expression the leader evaluated per row (CURRENT_TIMESTAMP, ...)
    if column.default is not None:
        return None if column.default.upper() == "NULL" else column.default.replace("\\'", "''")
    if not column.not_null:
        return None
    if delta_type in _NUMERIC or delta_type.startswith("DECIMAL"):
        return "0"
    if delta_type == "STRING" and column.mysql_type not in ("enum", "set", "json"):
        return "''"
    return ""  # an implicit value we do not reproduce (a zero date, the first ENUM member)


def leader_computed(column: AddedColumn) -> bool:
    """Whether the value an added column gives the existing rows is one the statement does not
    carry (an expression the leader evaluated, an implicit value, a type without a Delta type
    here): the lake cannot add such a column in place, the table must be copied again."""
    delta_type = ddl_delta_type(column)
    return delta_type is None or _existing_value(column, delta_type) == ""


def _add_columns(sink: "DeltaSink", ref, columns: list[AddedColumn]) -> None:
    """Add the columns now, with the values the leader gave every existing row (its rows events
    only carry the rows changed later), the values in ONE UPDATE: the session's transaction ids
    make it idempotent, and a second DML commit under the same ids would be skipped. A retry after
    a crash between the ALTER and the UPDATE finds the columns and runs the UPDATE again, which
    Delta skips if it was committed."""
    spark = sink.spark()
    from .tables import existing_columns

    values = {}
    for column in columns:
        if leader_computed(column):
            raise FollowerSchemaError(
                f"{ref.name}: ADD COLUMN {column.name} ({column.mysql_type}) gives the existing rows a value this "
                f"follower cannot reproduce from the statement; copy the table again: trigger the pipeline with conf "
                f'{{"resnapshot": ["{ref.name}"]}}')
        delta_type = ddl_delta_type(column)
        value = _existing_value(column, delta_type)
        if column.name.lower() not in (existing_columns(spark, ref) or {}):
            spark.sql(f"ALTER TABLE {ref.sql} ADD COLUMNS ({quote(column.name)} {delta_type})")
        if value is not None:
            values[column.name] = f"CAST({value} AS {delta_type})"
    if values:
        spark.sql(f"UPDATE {ref.sql} SET {', '.join(f'{quote(n)} = {v}' for n, v in values.items())}")


def _drop_database(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    database = segment.targets[0].database
    for name in [n for n in versions if n.split(".", 1)[0] == database]:
        _drop_table(sink, DdlTarget(*name.split(".", 1)), versions)


def _each_table(action: Callable) -> Callable:
    def apply(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
        for target in segment.targets:
            action(sink, target, versions)
    return apply


def _rename_tables(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    pairs = list(zip(segment.targets[0::2], segment.targets[1::2]))
    for old, new in pairs:
        _rename_table(sink, old, new, versions)


def _nothing(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    """Nothing to do: a database is a path prefix."""


_CREATE_HEAD = re.compile(rf"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_IDENT}(?:\.{_IDENT})?\s*\(",
                          re.I)
_COLUMN_HEAD = re.compile(rf"^\s*{_IDENT}\s+([A-Za-z]+)\s*(?:\(([^)]*)\))?(.*)$", re.I | re.S)
_NOT_COLUMN_DEFS = re.compile(r"^\s*(?:PRIMARY|INDEX|KEY|UNIQUE|CONSTRAINT|FOREIGN|FULLTEXT|SPATIAL|CHECK|PERIOD)\b",
                              re.I)
_GENERATED = re.compile(r"\b(?:GENERATED\s+ALWAYS|AS\s*\()", re.I)


def created_columns(statement: str) -> list[tuple[str, str]] | None:
    """(name, Delta type) of each column a ``CREATE TABLE name (...)`` defines, or None when the
    statement says less than the rows will (``LIKE``, ``AS SELECT``, a generated column, a type
    without a Delta type here): such a table is created with its first rows (or its copy)."""
    head = _CREATE_HEAD.match(statement)
    if not head:
        return None
    body, depth = statement[head.end():], 1
    for end, ch in enumerate(body):  # the definitions end at the parenthesis that closes the list
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            break
    else:
        return None
    if re.search(r"\bSELECT\b", body[end + 1:], re.I):
        return None  # CREATE TABLE ... SELECT: columns of the query too
    columns = []
    for definition in _clauses("ALTER TABLE x " + body[:end]):
        if _NOT_COLUMN_DEFS.match(definition):
            continue
        match = _COLUMN_HEAD.match(definition)
        if not match or _GENERATED.search(match.group(5) or ""):
            return None
        rest = match.group(5) or ""
        column = AddedColumn(_name(match, 1), match.group(3).lower(), (match.group(4) or "").replace(" ", ""),
                             bool(re.search(r"\bUNSIGNED\b", rest, re.I)), False, None)
        delta_type = ddl_delta_type(column)
        if delta_type is None:
            return None
        columns.append((column.name, delta_type))
    return columns or None


def _empty_with(table, columns: list[tuple[str, str]]) -> bool:
    """Whether a table delta-rs opened holds no rows and exactly these (name, Delta type) columns."""
    from .tables import lake_columns, same_type

    have = lake_columns(table)
    return not table.file_uris() and len(have) == len(columns) and all(
        name.lower() in have and have[name.lower()][0] == name and same_type(have[name.lower()][1], delta_type)
        for name, delta_type in columns)


def _create_table(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    """The table, empty, in the cut from its CREATE on (a table the leader creates and leaves
    empty is in the lake too). A table of that name the lake still holds (dropped earlier: emptied,
    kept for time travel) gets the new columns in one commit."""
    columns = created_columns(segment.statement)
    if columns is None:
        return
    target = segment.targets[0]
    ref = sink.ref(target.database, target.table)
    definition = ", ".join(f"{quote(name)} {delta_type}" for name, delta_type in columns)
    spark = sink.spark()
    replacing = re.match(r"^\s*CREATE\s+OR\s+REPLACE\b", segment.statement, re.I)
    if not table_exists(spark, ref):
        create_table(spark, ref, definition)
    elif ref.name not in versions or replacing:
        # (a retry finds the commit made: Delta skips it under the session's transaction ids; or,
        # after a crash that followed the CREATE, finds the table as the statement makes it)
        if not _empty_with(sink.delta_rs(target.database, target.table), columns):
            overwrite(spark, ref, spark.createDataFrame([], definition))
    else:
        return  # CREATE TABLE IF NOT EXISTS of a table in the cut
    versions[ref.name] = sink.version(target.database, target.table)


# DdlSegment.action -> how it is replayed on Delta; an action missing here stops the merge
ACTIONS: dict[str, Callable[["DeltaSink", DdlSegment, dict[str, int]], None]] = {
    "create_table": _create_table,
    "create_database": _nothing,
    "alter_database": _nothing,
    "drop_table": _each_table(_drop_table),
    "truncate_table": _each_table(_truncate),
    "rename_table": _rename_tables,
    "alter_table": _alter_table,
    "drop_database": _drop_database,
}


def replay(sink: "DeltaSink", segment: DdlSegment, versions: dict[str, int]) -> None:
    action = ACTIONS.get(segment.action)
    if action is None:
        raise FollowerSchemaError(
            f"DDL at {segment.start} ({segment.action}: {segment.statement[:200]!r}) has no replay on a Delta "
            "Lake follower; report it")
    action(sink, segment, versions)
