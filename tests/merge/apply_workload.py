"""A seeded random OLTP workload for the leader, with schema changes between transactions.

It keeps a model of the tables it created (name, key kind, extra columns) so every statement it
generates is valid SQL for the current schema; statements may still fail at run time (a key
collision, a unique violation), which the leader rejects and the workload moves on from, exactly
like an application would.

Table kinds: an INT primary key, a composite (INT, VARCHAR) primary key, no key at all (with
duplicate rows), and a UNIQUE key but no primary key. Values come from small domains so that
keys collide, rows repeat and updates hit the same rows again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pymysql

KINDS = ("int_key", "composite_key", "keyless", "unique_no_pk")

_BASE_DDL = {
    "int_key": "id INT NOT NULL PRIMARY KEY, a INT, s VARCHAR(40), d DECIMAL(12,3), t DATETIME(6)",
    "composite_key": "k1 INT NOT NULL, k2 VARCHAR(8) NOT NULL, a INT, s VARCHAR(40), PRIMARY KEY (k1, k2)",
    "keyless": "a INT, s VARCHAR(40), f FLOAT",
    "unique_no_pk": "u INT NOT NULL, a INT, s VARCHAR(40), UNIQUE KEY uq (u)",
}
_BASE_COLUMNS = {
    "int_key": ["id", "a", "s", "d", "t"],
    "composite_key": ["k1", "k2", "a", "s"],
    "keyless": ["a", "s", "f"],
    "unique_no_pk": ["u", "a", "s"],
}
# case and trailing spaces matter: under utf8mb4_unicode_ci 'a' = 'A' = 'a ', bytes differ
_STRINGS = ["a", "A", "a ", "b", "tab\there", "new\nline", "back\\slash", "😀", "é", "", "quote'", "x" * 40]


@dataclass
class Table:
    name: str
    kind: str
    extra: dict[str, str] = field(default_factory=dict)  # added column -> 'int' or 'text'

    @property
    def columns(self) -> list[str]:
        return _BASE_COLUMNS[self.kind] + list(self.extra)


class Workload:
    def __init__(self, seed: int, database: str):
        self.rng = random.Random(seed)
        self.db = database
        self.tables: list[Table] = []
        self.counter = 0
        self.ddl_done: set[str] = set()

    # -- values ---------------------------------------------------------------------------------

    def _value(self, column: str, table: Table) -> str:
        r = self.rng
        kind = table.extra.get(column)
        if column in ("id", "k1", "u"):
            return str(r.randint(1, 30))
        if column == "k2":
            return pymysql.converters.escape_string(r.choice(["a", "B", "c", "dd"])).join("''")
        if r.random() < 0.15 and column not in ("id", "k1", "k2", "u"):
            return "NULL"
        if column == "a" or kind == "int":
            return str(r.randint(-3, 3))
        if column == "d":
            return f"{r.randint(-99999, 99999)}.{r.randint(0, 999):03d}"
        if column == "t":
            return f"'2024-0{r.randint(1, 9)}-1{r.randint(0, 9)} 12:34:56.{r.randint(0, 999999):06d}'"
        if column == "f":
            return r.choice(["0.1", "-2.5", "3.14159", "1e-7"])
        # added text columns are VARCHAR(20): a longer value would be an error, not a change
        strings = [v for v in _STRINGS if len(v) <= 20] if kind == "text" else _STRINGS
        return "'" + pymysql.converters.escape_string(r.choice(strings)) + "'"

    def _where(self, table: Table) -> str:
        r = self.rng
        if table.kind == "int_key":
            return f"id = {r.randint(1, 30)}"
        if table.kind == "composite_key":
            return f"k1 = {r.randint(1, 30)}"
        if table.kind == "unique_no_pk":
            return f"u = {r.randint(1, 30)}"
        return f"a = {r.randint(-3, 3)}" if r.random() < 0.7 else "a IS NULL"

    # -- statements -----------------------------------------------------------------------------

    def insert(self, table: Table) -> str:
        columns = table.columns
        rows = []
        for _ in range(self.rng.randint(1, 4)):
            row = "(" + ", ".join(self._value(c, table) for c in columns) + ")"
            rows.append(row)
            if table.kind == "keyless" and self.rng.random() < 0.4:
                rows.append(row)  # an exact duplicate
        ignore = "IGNORE " if table.kind != "keyless" and self.rng.random() < 0.5 else ""
        return f"INSERT {ignore}INTO `{table.name}` ({', '.join(columns)}) VALUES {', '.join(rows)}"

    def update(self, table: Table) -> str:
        r = self.rng
        settable = [c for c in table.columns if c not in ("id", "k1", "k2", "u")]
        sets = [f"{c} = {self._value(c, table)}" for c in r.sample(settable, r.randint(1, len(settable)))]
        if table.kind in ("int_key", "unique_no_pk") and r.random() < 0.3:
            key = "id" if table.kind == "int_key" else "u"
            sets.append(f"{key} = {key} + {r.randint(1, 5)}")  # a key change
        if table.kind == "composite_key" and r.random() < 0.3:
            sets.append(f"k2 = {self._value('k2', table)}")
        limit = " LIMIT 1" if table.kind == "keyless" and r.random() < 0.5 else ""
        return f"UPDATE `{table.name}` SET {', '.join(sets)} WHERE {self._where(table)}{limit}"

    def delete(self, table: Table) -> str:
        limit = " LIMIT 1" if table.kind == "keyless" and self.rng.random() < 0.6 else ""
        return f"DELETE FROM `{table.name}` WHERE {self._where(table)}{limit}"

    def transaction(self) -> tuple[list[str], bool]:
        """Statements of one transaction and whether it commits (else it rolls back)."""
        statements = []
        for _ in range(self.rng.randint(1, 6)):
            table = self.rng.choice(self.tables)
            action = self.rng.choices([self.insert, self.update, self.delete], weights=[5, 3, 2])[0]
            statements.append(action(table))
        return statements, self.rng.random() < 0.85

    # -- schema changes -------------------------------------------------------------------------

    def _new_name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def create_table(self, kind: str | None = None) -> str:
        table = Table(self._new_name("t"), kind or self.rng.choice(KINDS))
        self.tables.append(table)
        return f"CREATE TABLE `{table.name}` ({_BASE_DDL[table.kind]})"

    def ddl(self) -> str:
        r = self.rng
        table = r.choice(self.tables)
        choices = ["add", "add", "truncate", "rename", "create"]
        if table.extra:
            choices += ["drop_column", "modify"]
        if len(self.tables) > 2:
            choices.append("drop_table")
        # every kind of change at least once, then at random
        fresh = [c for c in choices if c not in self.ddl_done]
        action = r.choice(fresh or choices)
        self.ddl_done.add(action)
        if action == "add":
            column, kind = self._new_name("c"), r.choice(["int", "text"])
            table.extra[column] = kind
            definition = "INT DEFAULT 7" if kind == "int" else "VARCHAR(20) NULL"
            return f"ALTER TABLE `{table.name}` ADD COLUMN {column} {definition}"
        if action == "drop_column":
            column = r.choice(list(table.extra))
            del table.extra[column]
            return f"ALTER TABLE `{table.name}` DROP COLUMN {column}"
        if action == "modify":
            column = r.choice(list(table.extra))
            definition = "BIGINT NULL" if table.extra[column] == "int" else "VARCHAR(60) NOT NULL DEFAULT 'z'"
            if table.extra[column] == "text":
                # NOT NULL: existing NULLs must go first, in their own transaction
                return (f"UPDATE `{table.name}` SET {column} = 'z' WHERE {column} IS NULL;"
                        f"ALTER TABLE `{table.name}` MODIFY COLUMN {column} {definition}")
            return f"ALTER TABLE `{table.name}` MODIFY COLUMN {column} {definition}"
        if action == "truncate":
            return f"TRUNCATE TABLE `{table.name}`"
        if action == "rename":
            old, table.name = table.name, self._new_name("r")
            return f"RENAME TABLE `{old}` TO `{table.name}`"
        if action == "drop_table":
            self.tables.remove(table)
            return f"DROP TABLE `{table.name}`"
        return self.create_table()

    # -- running it -----------------------------------------------------------------------------

    def setup(self, conn) -> None:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{self.db}`")
            cur.execute(f"USE `{self.db}`")
            for kind in KINDS:
                cur.execute(self.create_table(kind))

    def run(self, conn, transactions: int, ddl_probability: float = 0.2) -> dict[str, int]:
        """Run transactions (and DDL between them) on ``conn`` (in the workload's database)."""
        stats = {"commits": 0, "rollbacks": 0, "failed_statements": 0, "ddl": 0}
        with conn.cursor() as cur:
            cur.execute(f"USE `{self.db}`")
            for _ in range(transactions):
                if self.rng.random() < ddl_probability:
                    for statement in self.ddl().split(";"):
                        cur.execute(statement)
                    stats["ddl"] += 1
                statements, commit = self.transaction()
                cur.execute("BEGIN")
                for statement in statements:
                    try:
                        cur.execute(statement)
                    except pymysql.err.IntegrityError:
                        stats["failed_statements"] += 1  # the statement is undone, the transaction goes on
                cur.execute("COMMIT" if commit else "ROLLBACK")
                stats["commits" if commit else "rollbacks"] += 1
        return stats
