"""The server invariant behind reading each table id's map once (``BinlogReader``'s
``freeze_schema``): a table whose definition changes gets a new table id, so a map with a known
id is the same map again. Checked on both servers against every kind of change a capture meets,
instant ALTERs included, by reading every table map of the range with the library unfrozen."""

from __future__ import annotations

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import TableMapEvent

from mysql_cdc.mysql_server import MySQLSettings

from .conftest import leader_position

CHANGES = [
    "ALTER TABLE {db}.t ADD COLUMN b INT",  # instant on both servers
    "ALTER TABLE {db}.t ADD COLUMN c VARCHAR(10) FIRST",
    "ALTER TABLE {db}.t MODIFY COLUMN b BIGINT",
    "ALTER TABLE {db}.t DROP COLUMN c",
    "ALTER TABLE {db}.t RENAME COLUMN b TO b2",
    "TRUNCATE TABLE {db}.t",
    "FLUSH TABLES",
]


def _maps(settings: MySQLSettings, start) -> list[tuple[int, tuple]]:
    stream = BinLogStreamReader(connection_settings=settings.replication_settings(), server_id=424242,
                                log_file=start.file, log_pos=start.offset, resume_stream=True, blocking=False,
                                only_events=[TableMapEvent])
    try:
        return [(e.table_id, tuple((c.name, c.type) for c in e.columns)) for e in stream if e.table == "t"]
    finally:
        stream.close()


@pytest.mark.parametrize("server", ["mariadb", "mysql"])
def test_a_changed_table_gets_a_new_table_id(server, request, unique_name):
    if server == "mariadb":
        leader, user = request.getfixturevalue("leader"), request.getfixturevalue("leader_user")
    else:
        leader, user = request.getfixturevalue("mysql_leader"), request.getfixturevalue("mysql_leader_user")
    settings = MySQLSettings(**user)
    db = unique_name
    start = leader_position(settings)
    statements = [f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT)",
                  f"INSERT INTO {db}.t (id, a) VALUES (1, 1)"]
    for i, change in enumerate(CHANGES, start=2):
        statements += [change.format(db=db), f"INSERT INTO {db}.t (id, a) VALUES ({i}, {i})"]
    leader.run_sql(statements)

    maps = _maps(settings, start)
    assert len(maps) == len(CHANGES) + 1
    definitions_by_id: dict[int, set] = {}
    for table_id, definition in maps:
        definitions_by_id.setdefault(table_id, set()).add(definition)
    # every id names one definition; and each definition change came with a new id
    assert all(len(d) == 1 for d in definitions_by_id.values()), definitions_by_id
    changed = [i for i in range(1, len(maps)) if maps[i][1] != maps[i - 1][1]]
    assert len(changed) == 5 and all(maps[i][0] != maps[i - 1][0] for i in changed)
