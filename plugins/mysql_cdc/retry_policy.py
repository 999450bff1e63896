"""Which failures a retry can fix: the one place that decides, for the extract task, the merge task
and the merge job alike.

A **permanent** failure needs a person: a bad range or configuration, a gap, another leader's
batch, a missing privilege, binlog settings, an event or a type the capture does not understand, a
follower that lacks a collation or a table, a follower changed outside the pipeline. Airflow's
retries cannot fix it, so the task fails at once (``AirflowFailException``) instead of retrying
with backoff for minutes. A **transient** one may pass: a lost connection, a lock wait, a deadlock,
a killed executor, another merge of the pipeline holding the checkpoint. Anything not known to be
permanent is treated as transient: a retry of extract or merge is always safe (both are
idempotent), so the cost of a wrong guess is a few retries, never a lost change.

An error class says it is permanent by deriving from ``errors.PermanentError`` where it is
defined; an error that carries its own verdict (``permanent``: the merge job's outcome read back
by the merge task) says it with that attribute. Plain Python (no Airflow, no Spark): the merge job classifies its own error here and reports it to
the merge task in its outcome file.
"""

from __future__ import annotations

import re
from typing import Iterator

from .errors import PermanentError

# MySQL/MariaDB server errors that say the statement, the schema or the account is wrong
PERMANENT_SERVER_ERRORS = frozenset({
    1044, 1045, 1142, 1143, 1227, 1370,  # access denied / missing privilege
    1049,  # unknown database
    1054,  # unknown column
    1064,  # syntax error (a statement the follower's dialect does not have)
    1115,  # unknown character set
    1146,  # table does not exist
    1273,  # unknown collation
    1286,  # unknown storage engine
    1366, 1406,  # a value the follower's column cannot hold
    4161,  # unknown data type
    1290, 1836, 1792,  # the server is read-only (read_only, super_read_only, a read-only transaction)
    1021, 1114,  # disk full, table full
})
# ... and those that say "try again"
TRANSIENT_SERVER_ERRORS = frozenset({
    1040,  # too many connections
    1053,  # server shutdown in progress
    1205,  # lock wait timeout
    1213,  # deadlock
    1927, 4031,  # connection killed / closed for inactivity
    2002, 2003, 2006, 2013,  # cannot connect, server gone, connection lost
})


def server_error_code(exc: BaseException) -> int | None:
    """The MySQL error number of a PyMySQL error, or None."""
    import pymysql

    if isinstance(exc, pymysql.err.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return exc.args[0]
    return None


def causes(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc``, then the error it was raised from, and so on (each once)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def is_permanent(exc: BaseException) -> bool:
    """Whether no retry can fix ``exc`` (or the error it was raised from)."""
    for error in causes(exc):
        marked = getattr(error, "permanent", None)  # an error that carries its own verdict
        if isinstance(marked, bool):
            return marked
        code = server_error_code(error)
        if code in PERMANENT_SERVER_ERRORS:
            return True
        if code in TRANSIENT_SERVER_ERRORS:
            return False
        if isinstance(error, PermanentError):
            return True
    return False


# "INSERT command denied to user 'cdc'@'10.0.0.5' for table `shop`.`orders`" (1142; MySQL names the
# table alone: "... for table 'orders'"), the same for a column (1143); "Access denied for user
# 'cdc'@'%' to database 'shop'" (1044)
_DENIED_TABLE = re.compile(r"(?P<priv>[A-Z ]+?) command denied to user '(?P<user>[^']*)'@'[^']*' for "
                           r"(?:column '[^']*' in )?table (?:[`'](?P<db>[^`']+)[`']\.)?[`'](?P<table>[^`']+)[`']")
_DENIED_DB = re.compile(r"Access denied for user '(?P<user>[^']*)'@'[^']*' to database '(?P<db>[^']*)'")


def grant_hint(code: int | None, message: str) -> str | None:
    """The statement that grants what a server's access-denied error says is missing."""
    found = _DENIED_TABLE.search(message) if code in (1142, 1143) else \
        _DENIED_DB.search(message) if code == 1044 else None
    if found is None:
        return None
    groups = found.groupdict()
    privilege = groups.get("priv") or "the privileges docs/servers.md lists"
    schema = f"`{groups['db']}`" if groups.get("db") else f"<the schema of table `{groups['table']}`>"
    return (f"grant it: GRANT {privilege} ON {schema}.* TO '{found['user']}'@'%' "
            "(docs/servers.md lists every grant the pipeline needs)")


def describe(exc: BaseException) -> str:
    """The error as a person reads it first: the cause in its own words. A server error says
    which server error it is (and, for a missing privilege, the statement that grants it); ours
    already say what is wrong and how to fix it."""
    code = server_error_code(exc)
    if code is not None:
        message = exc.args[1] if len(exc.args) > 1 else ""
        hint = grant_hint(code, message)
        return f"{message} (MySQL error {code})" + (f"; {hint}" if hint else "")
    return str(exc).strip() or type(exc).__name__
