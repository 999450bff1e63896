"""Classify the statements a ROW-format binlog still carries as text (Query events).

With ``binlog_format=ROW`` data changes arrive as row events; Query events carry transaction
control, DDL, and account/routine statements. We need to know, for each DDL, which databases and
tables it touches: to filter it by the pipeline's globs, and so the merge job can fingerprint
exactly those objects around the statement (crash safety, see contracts.checkpoint).

Only the head of a statement is parsed (verb, object kind, names); the statement itself is replayed
verbatim on the follower. A statement that looks like table DDL but whose names cannot be read is
an error, never a silent skip: skipping it could leave the follower's schema behind the leader's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...contracts import DdlTarget
from ...errors import PermanentError


class UnparseableDdl(ValueError, PermanentError):
    pass


@dataclass(frozen=True)
class ParsedStatement:
    action: str  # "create_table", "alter_table", ..., or "ignore" / "transaction"
    targets: tuple[DdlTarget, ...] = ()

    @property
    def is_ddl(self) -> bool:
        return self.action not in ("ignore", "transaction")


_TOKEN = re.compile(
    r"""
    \s+ | --[^\n]*\n? | \#[^\n]*\n? | /\*(?!!)(?:.|\n)*?\*/      # whitespace and comments
    | (?P<bq>`(?:[^`]|``)*`)                                      # `quoted identifier`
    | (?P<dq>"(?:[^"]|"")*")                                      # "ANSI quoted identifier"
    | (?P<sq>'(?:[^'\\]|\\.|'')*')                                # 'string'
    | (?P<vc>/\*!\d*)|(?P<vce>\*/)                                # /*!50100 ... */ version comments
    | (?P<word>[^\s`"'.,;()=]+)                                   # bare word or identifier
    | (?P<punct>[.,;()=])
    """,
    re.VERBOSE,
)


def _tokens(sql: str, limit: int = 400) -> list[tuple[str, str]]:
    """(kind, text) tokens of the statement head; identifiers are unquoted."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(sql) and len(out) < limit:
        m = _TOKEN.match(sql, pos)
        if not m:
            raise UnparseableDdl(f"cannot tokenize statement near {sql[pos:pos + 40]!r}")
        pos = m.end()
        if m["bq"]:
            out.append(("ident", m["bq"][1:-1].replace("``", "`")))
        elif m["dq"]:
            out.append(("ident", m["dq"][1:-1].replace('""', '"')))
        elif m["sq"]:
            out.append(("string", m["sq"]))
        elif m["word"]:
            out.append(("word", m["word"]))
        elif m["punct"]:
            out.append(("punct", m["punct"]))
        # comments, whitespace and version-comment markers are dropped: /*!40101 X */ reads as X
    return out


class _Cursor:
    def __init__(self, tokens: list[tuple[str, str]], default_schema: str, statement: str):
        self.tokens = tokens
        self.i = 0
        self.default_schema = default_schema
        self.statement = statement

    def peek(self, offset: int = 0) -> str:
        j = self.i + offset
        return self.tokens[j][1].upper() if j < len(self.tokens) and self.tokens[j][0] == "word" else ""

    def accept(self, *words: str) -> bool:
        """Consume the word sequence if it is next."""
        if all(self.peek(k) == w for k, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def skip_any(self, *words: str) -> None:
        while any(self.accept(w) for w in words):
            pass

    def name(self) -> DdlTarget:
        """``tbl`` or ``db.tbl``; unqualified names live in the statement's default schema."""
        first = self._ident()
        if self.i < len(self.tokens) and self.tokens[self.i] == ("punct", "."):
            self.i += 1
            return DdlTarget(first, self._ident())
        if not self.default_schema:
            raise UnparseableDdl(f"table {first!r} is unqualified and the statement has no default schema")
        return DdlTarget(self.default_schema, first)

    def database(self) -> DdlTarget:
        return DdlTarget(self._ident())

    def _ident(self) -> str:
        if self.i >= len(self.tokens) or self.tokens[self.i][0] not in ("ident", "word"):
            raise UnparseableDdl("expected a name")
        text = self.tokens[self.i][1]
        self.i += 1
        return text

    def comma(self) -> bool:
        if self.i < len(self.tokens) and self.tokens[self.i] == ("punct", ","):
            self.i += 1
            return True
        return False


# Statements with no effect on table data or structure: accounts, routines, views, maintenance.
_IGNORED_HEADS = (
    "GRANT", "REVOKE", "SET", "FLUSH", "ANALYZE", "OPTIMIZE", "REPAIR", "CHECK", "CHECKSUM",
    "INSTALL", "UNINSTALL", "KILL", "RESET", "PURGE", "CALL", "DO", "HANDLER", "SAVEPOINT",
    "RELEASE", "LOCK", "UNLOCK", "SHUTDOWN",
)
_IGNORED_OBJECTS = (
    "USER", "ROLE", "VIEW", "PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "SERVER", "SEQUENCE",
    "PACKAGE", "LOGFILE", "TABLESPACE", "RESOURCE", "SPATIAL", "AGGREGATE",
)
_TRANSACTION = ("BEGIN", "COMMIT", "ROLLBACK", "XA", "START")


def _create(c: _Cursor) -> ParsedStatement:
    c.accept("OR", "REPLACE")
    if c.accept("DATABASE") or c.accept("SCHEMA"):
        c.accept("IF", "NOT", "EXISTS")
        return ParsedStatement("create_database", (c.database(),))
    temporary = c.accept("TEMPORARY")
    if c.accept("TABLE"):
        if temporary:
            return ParsedStatement("ignore")  # session-local; its rows are never logged either
        c.accept("IF", "NOT", "EXISTS")
        return ParsedStatement("create_table", (c.name(),))
    c.skip_any("UNIQUE", "FULLTEXT", "SPATIAL", "ONLINE", "OFFLINE")
    if c.accept("INDEX"):
        c.accept("IF", "NOT", "EXISTS")
        c._ident()  # index name
        while c.i < len(c.tokens) and c.peek() != "ON":
            c.i += 1  # index type clauses like USING BTREE
        if not c.accept("ON"):
            raise UnparseableDdl("CREATE INDEX without ON <table>")
        return ParsedStatement("alter_table", (c.name(),))
    return _ignored_object(c)


def _ignored_object(c: _Cursor) -> ParsedStatement:
    """Views, routines, users...: DEFINER=`u`@`h`, ALGORITHM=, SQL SECURITY may come before the
    object kind, so look a few tokens ahead for it."""
    for kind, text in c.tokens[c.i : c.i + 12]:
        if kind == "word" and text.upper() in _IGNORED_OBJECTS:
            return ParsedStatement("ignore")
        if kind == "word" and text.upper() in ("TABLE", "DATABASE", "SCHEMA", "INDEX"):
            break  # a table-level statement in a shape we do not know: refuse, do not skip
    raise UnparseableDdl("unknown statement kind")


def _alter(c: _Cursor) -> ParsedStatement:
    c.skip_any("ONLINE", "IGNORE")
    if c.accept("DATABASE") or c.accept("SCHEMA"):
        # ALTER DATABASE may omit the name (then it is the default schema)
        if c.peek() in ("", "CHARACTER", "DEFAULT", "CHARSET", "COLLATE", "COMMENT", "UPGRADE", "READ"):
            return ParsedStatement("alter_database", (DdlTarget(c.default_schema),))
        return ParsedStatement("alter_database", (c.database(),))
    if c.accept("TABLE"):
        c.accept("IF", "EXISTS")
        target = c.name()
        targets = [target]
        # ALTER TABLE a ... RENAME [TO|AS] b: the new name is a target too
        for j in range(c.i, len(c.tokens) - 1):
            if c.tokens[j][0] == "word" and c.tokens[j][1].upper() == "RENAME":
                k = j + 1
                nxt = c.tokens[k][1].upper() if c.tokens[k][0] == "word" else ""
                if nxt in ("COLUMN", "INDEX", "KEY"):
                    continue
                if nxt in ("TO", "AS"):
                    k += 1
                sub = _Cursor(c.tokens, c.default_schema, c.statement)
                sub.i = k
                targets.append(sub.name())
        return ParsedStatement("alter_table", tuple(targets))
    return _ignored_object(c)


def _drop(c: _Cursor) -> ParsedStatement:
    if c.accept("DATABASE") or c.accept("SCHEMA"):
        c.accept("IF", "EXISTS")
        return ParsedStatement("drop_database", (c.database(),))
    temporary = c.accept("TEMPORARY")
    if c.accept("TABLE") or c.accept("TABLES"):
        if temporary:
            return ParsedStatement("ignore")
        c.accept("IF", "EXISTS")
        targets = [c.name()]
        while c.comma():
            targets.append(c.name())
        return ParsedStatement("drop_table", tuple(targets))
    c.skip_any("ONLINE", "OFFLINE")
    if c.accept("INDEX"):
        c.accept("IF", "EXISTS")
        c._ident()
        if not c.accept("ON"):
            raise UnparseableDdl("DROP INDEX without ON <table>")
        return ParsedStatement("alter_table", (c.name(),))
    return _ignored_object(c)


def _rename(c: _Cursor) -> ParsedStatement:
    if not (c.accept("TABLE") or c.accept("TABLES")):
        return _ignored_object(c)  # RENAME USER
    targets = []
    while True:
        targets.append(c.name())
        c.accept("WAIT")  # MariaDB: RENAME TABLE t WAIT n TO u
        if c.peek() and c.peek().isdigit():
            c.i += 1
        if not c.accept("TO"):
            raise UnparseableDdl("RENAME TABLE without TO")
        targets.append(c.name())
        if not c.comma():
            break
    return ParsedStatement("rename_table", tuple(targets))


def _truncate(c: _Cursor) -> ParsedStatement:
    c.accept("TABLE")
    return ParsedStatement("truncate_table", (c.name(),))


_VERBS = {"CREATE": _create, "ALTER": _alter, "DROP": _drop, "RENAME": _rename, "TRUNCATE": _truncate}


def parse_statement(statement: str, default_schema: str) -> ParsedStatement:
    """What a Query event's statement does. Raises UnparseableDdl with the statement named."""
    try:
        c = _Cursor(_tokens(statement), default_schema or "", statement)
        head = c.peek()
        if head in _TRANSACTION:
            return ParsedStatement("transaction")
        if head in _IGNORED_HEADS:
            return ParsedStatement("ignore")
        verb = _VERBS.get(head)
        if verb is None:
            raise UnparseableDdl(f"unknown statement kind {head!r}")
        c.i += 1
        return verb(c)
    except UnparseableDdl as exc:
        raise UnparseableDdl(
            f"cannot parse the statement {statement[:200]!r} (default schema {default_schema!r}): {exc}. "
            "mysql-cdc replays DDL on the follower and must know which tables it touches; "
            "if the statement only concerns tables you do not capture, exclude them, otherwise report this"
        ) from None
