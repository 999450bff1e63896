"""GTID sets in the servers' own notation: parsed, added to, compared, printed back."""

import pytest

from mysql_cdc.capture.gtid import event_gtid
from mysql_cdc.contracts.gtid_set import GtidSetError, MariaDBGtidState, MySQLGtidSet, parse_gtid_set

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "4f22ab58-82db-22f2-af44-d91bb0530673"


def test_mysql_set_intervals_tags_and_membership():
    gtids = MySQLGtidSet.parse(f"{A.upper()}:1-5:7,\n{B}:1-3:audit:1-2")
    assert f"{A}:5" in gtids and f"{A}:6" not in gtids and f"{A}:7" in gtids
    assert f"{B}:audit:2" in gtids and f"{B}:audit:3" not in gtids and f"{B}:other:1" not in gtids
    gtids.add(f"{A}:6")  # fills the hole: one interval
    gtids.add(f"{B}:audit:3")
    assert str(gtids) == f"{A}:1-7,{B}:1-3:audit:1-3"
    assert MySQLGtidSet.parse(str(gtids)) == gtids


def test_mysql_set_covers():
    big = MySQLGtidSet.parse(f"{A}:1-10,{B}:1-3")
    assert big.covers(MySQLGtidSet.parse(f"{A}:2-4:9,{B}:3"))
    assert not big.covers(MySQLGtidSet.parse(f"{A}:9-11"))
    assert not big.covers(MySQLGtidSet.parse(f"{B}:tag:1"))
    assert big.covers(MySQLGtidSet.parse(""))


def test_mariadb_state_per_domain():
    state = MariaDBGtidState.parse("0-1-100,1-2-7")
    assert "0-3-100" in state and "0-1-101" not in state and "2-1-1" not in state
    state.add("0-3-101")  # a new server in the domain after a failover: the seqno goes on
    assert str(state) == "0-3-101,1-2-7"
    assert state.covers(MariaDBGtidState.parse("0-1-50,1-2-7")) and not state.covers(MariaDBGtidState.parse("1-2-8"))


@pytest.mark.parametrize("flavor, text", [("mysql", "not-a-uuid:1-5"), ("mysql", f"{A}:x-y"),
                                          ("mariadb", "0-1"), ("mariadb", f"{A}:5")])
def test_bad_sets_are_named(flavor, text):
    with pytest.raises(GtidSetError, match="is not|neither"):
        parse_gtid_set(flavor, text)


def test_gtids_in_show_binlog_events_info():
    assert event_gtid(f"SET @@SESSION.GTID_NEXT= '{A}:12'") == f"{A}:12"
    assert event_gtid(f"SET @@SESSION.GTID_NEXT= '{A}:audit:3'") == f"{A}:audit:3"
    assert event_gtid("SET @@SESSION.GTID_NEXT= 'ANONYMOUS'") is None
    assert event_gtid("BEGIN GTID 0-1-42") == "0-1-42" and event_gtid("GTID 0-1-43") == "0-1-43"
    assert event_gtid("use `db`; CREATE TABLE t (id INT)") is None
