"""The rows of a mysql-replication rows event, with what its ``None`` values mean told apart.

mysql-replication returns ``None`` for an SQL NULL and for several values it cannot represent, and
says which in ``none_sources`` (an empty SET, a zero date, a column missing from a MINIMAL image).
One case it cannot say: a MySQL JSON column holding the JSON document ``null`` also decodes to
``None``, and reads back as source ``"null"`` exactly like SQL NULL. Writing it as NULL would
silently change the row, so this module reads the rows itself, through the library's own
per-column reader:

- the library records an SQL NULL in its per-event ``none_sources`` record *before* returning
  ``None``; a JSON ``null`` records nothing;
- clearing that record before each row image makes "``None`` with no record" mean exactly
  "the JSON document null" for a JSON column, which becomes ``JSON_NULL``.

Only events of tables with a JSON column take this path; all others use ``event.rows`` as is. The
compiled row decoder (issue "Capture at compiled speed") replaces this with its own null bitmap.
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication.constants import FIELD_TYPE, NONE_SOURCE
from pymysqlreplication.row_event import UpdateRowsEvent

# mysql-replication's per-event record of why a value is None (a name-mangled private attribute:
# checked to exist, so a library upgrade that renames it fails loudly here, never silently)
_NONE_SOURCES = "_RowsEvent__none_sources"
JSON_NULL_SOURCE = "json null"  # our own none_sources value: the JSON document null


class _JsonNull:
    """The JSON document ``null`` (not SQL NULL)."""

    def __repr__(self) -> str:
        return "JSON_NULL"


JSON_NULL = _JsonNull()


def _has_json(event) -> bool:
    return any(c.type == FIELD_TYPE.JSON for c in event.columns)


def _image(event, bitmap) -> tuple[dict[str, Any], dict[str, str]]:
    """One row image: values by column name and, for each None, why."""
    record = getattr(event, _NONE_SOURCES, None)
    if record is None:
        raise RuntimeError(
            "mysql-replication no longer keeps RowsEvent.__none_sources; mysql_cdc.capture.rows "
            "cannot tell SQL NULL from JSON null with this version: pin the version in requirements.txt"
        )
    record.clear()
    values = event._read_column_data(bitmap)
    sources = {}
    for column in event.columns:
        name = column.name
        if values.get(name) is not None:
            continue
        if name in record:
            sources[name] = record[name]
        elif column.type == FIELD_TYPE.JSON:
            sources[name] = JSON_NULL_SOURCE
        else:
            sources[name] = NONE_SOURCE.NULL
    return values, sources


def event_rows(event) -> list[dict]:
    """``event.rows`` in the library's shape (``values``/``none_sources``, or the ``before_``/
    ``after_`` pairs of an update), with JSON ``null`` told apart from SQL NULL."""
    if not _has_json(event):
        return event.rows
    if not event.complete:
        return []
    rows = []
    while event.packet.read_bytes < event.event_size:  # the library's own end-of-rows test
        if isinstance(event, UpdateRowsEvent):
            before, before_sources = _image(event, event.columns_present_bitmap)
            after, after_sources = _image(event, event.columns_present_bitmap2)
            rows.append({"before_values": before, "before_none_sources": before_sources,
                         "after_values": after, "after_none_sources": after_sources})
        else:
            values, sources = _image(event, event.columns_present_bitmap)
            rows.append({"values": values, "none_sources": sources})
    return rows
