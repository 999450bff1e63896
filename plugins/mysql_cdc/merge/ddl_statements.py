"""The leader's DDL statements, read for what a lake follower replays: the columns a statement
renames, drops, adds (with the value the existing rows take) or creates, and their lake types.

The lake kinds (Delta, Iceberg) replay DDL by what it does to a table's columns, each in its own
table format; what the statement says is read here once. The types are Spark SQL's names, as the
batch's columns map to them (``capture.types``; each kind maps them on to its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


# a MySQL column type of a DDL statement -> its lake (Spark SQL) type, as capture types the binlog's columns
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


def ddl_spark_type(column: AddedColumn) -> str | None:
    if column.mysql_type in ("decimal", "numeric", "dec", "fixed"):
        precision, _, scale = (column.args or "10,0").partition(",")
        if int(precision) > 38:
            return "STRING"
        return f"DECIMAL({int(precision)},{int(scale or 0)})"
    if column.unsigned and column.mysql_type in _UNSIGNED_WIDER:
        return _UNSIGNED_WIDER[column.mysql_type]
    return _DDL_TYPES.get(column.mysql_type)


def existing_value(column: AddedColumn, lake_type: str) -> str | None:
    """The SQL literal every existing row takes (MySQL's DEFAULT, or NOT NULL's implicit zero),
    or None when the rows stay NULL; raises when it is not a plain literal we can give."""
    if column.default == "":
        return ""  # an expression the leader evaluated per row (CURRENT_TIMESTAMP, ...)
    if column.default is not None:
        return None if column.default.upper() == "NULL" else column.default.replace("\\'", "''")
    if not column.not_null:
        return None
    if lake_type in _NUMERIC or lake_type.startswith("DECIMAL"):
        return "0"
    if lake_type == "STRING" and column.mysql_type not in ("enum", "set", "json"):
        return "''"
    return ""  # an implicit value we do not reproduce (a zero date, the first ENUM member)


def leader_computed(column: AddedColumn) -> bool:
    """Whether the value an added column gives the existing rows is one the statement does not
    carry (an expression the leader evaluated, an implicit value, a type without a lake type
    here): a lake cannot add such a column in place, the table must be copied again."""
    lake_type = ddl_spark_type(column)
    return lake_type is None or existing_value(column, lake_type) == ""


_CREATE_HEAD = re.compile(rf"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_IDENT}(?:\.{_IDENT})?\s*\(",
                          re.I)
_COLUMN_HEAD = re.compile(rf"^\s*{_IDENT}\s+([A-Za-z]+)\s*(?:\(([^)]*)\))?(.*)$", re.I | re.S)
_NOT_COLUMN_DEFS = re.compile(r"^\s*(?:PRIMARY|INDEX|KEY|UNIQUE|CONSTRAINT|FOREIGN|FULLTEXT|SPATIAL|CHECK|PERIOD)\b",
                              re.I)
_GENERATED = re.compile(r"\b(?:GENERATED\s+ALWAYS|AS\s*\()", re.I)


def created_columns(statement: str) -> list[tuple[str, str]] | None:
    """(name, lake type) of each column a ``CREATE TABLE name (...)`` defines, or None when the
    statement says less than the rows will (``LIKE``, ``AS SELECT``, a generated column, a type
    without a lake type here): such a table is created with its first rows (or its copy)."""
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
        lake_type = ddl_spark_type(column)
        if lake_type is None:
            return None
        columns.append((column.name, lake_type))
    return columns or None
