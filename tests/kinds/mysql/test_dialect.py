"""Leader DDL in the follower's dialect (``mysql_cdc.kinds.mysql.sink.dialect``), on inline statements. The
servers' side (both pairs, real copies and replays) is tests/kinds/mysql/test_cross_flavor.py."""

from __future__ import annotations

import pytest

from mysql_cdc.kinds.mysql.sink.dialect import MARIADB, MYSQL, DdlTranslator, DialectError, flavor_of
from mysql_cdc.retry_policy import is_permanent

MYSQL_TABLE = ("CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `s` varchar(10) COLLATE utf8mb4_0900_as_cs "
               "/*!80023 INVISIBLE */,\n  `b` varbinary(4),\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB "
               "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci")
MYSQL_DATABASE = ("CREATE DATABASE `shop` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_de_pb_0900_ai_ci */ "
                  "/*!80016 DEFAULT ENCRYPTION='N' */")


def test_mysql_definitions_on_a_mariadb_follower():
    to_mariadb = DdlTranslator(MYSQL, MARIADB)
    assert to_mariadb(MYSQL_TABLE) == (
        "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `s` varchar(10) COLLATE utf8mb4_uca1400_nopad_as_cs "
        "INVISIBLE,\n  `b` varbinary(4),\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB "
        "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_uca1400_nopad_ai_ci")
    assert to_mariadb(MYSQL_DATABASE) == (
        "CREATE DATABASE `shop` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_nopad_ai_ci */ ")
    assert to_mariadb("ALTER TABLE t MODIFY s TEXT COLLATE utf8mb4_0900_bin") == \
        "ALTER TABLE t MODIFY s TEXT COLLATE utf8mb4_bin"


def test_mariadb_definitions_on_a_mysql_follower():
    to_mysql = DdlTranslator(MARIADB, MYSQL)
    assert to_mysql("CREATE TABLE t (s VARCHAR(5) COLLATE utf8mb4_uca1400_german2_as_ci, "
                    "u VARCHAR(5) COLLATE utf8mb4_general_nopad_ci, v TEXT COLLATE utf8mb3_uca1400_ai_ci, "
                    "w BLOB) COLLATE=utf8mb4_nopad_bin") == (
        "CREATE TABLE t (s VARCHAR(5) COLLATE utf8mb4_0900_as_ci, u VARCHAR(5) COLLATE utf8mb4_general_ci, "
        "v TEXT COLLATE utf8mb3_unicode_520_ci, w BLOB) COLLATE=utf8mb4_bin")


def test_what_a_mysql_follower_has_no_equivalent_for_is_refused_naming_it():
    to_mysql = DdlTranslator(MARIADB, MYSQL)
    with pytest.raises(DialectError, match=r"no equivalent of MariaDB's INET6 type .* exclude the table") as refused:
        to_mysql("CREATE TABLE hosts (id INT PRIMARY KEY, `addr` INET6 NOT NULL)")
    assert is_permanent(refused.value)
    with pytest.raises(DialectError, match="a system-versioned table"):
        to_mysql("CREATE TABLE h (id INT) WITH SYSTEM VERSIONING")
    with pytest.raises(DialectError, match="a sequence"):
        to_mysql("CREATE SEQUENCE s START WITH 1")
    # a column named uuid, and uuid() as a default, are not the UUID type
    statement = "CREATE TABLE k (`uuid` CHAR(36) DEFAULT uuid(), id INT)"
    assert to_mysql(statement) == statement


def test_the_same_flavor_runs_the_leaders_text_as_it_is():
    assert DdlTranslator(MYSQL, MYSQL)(MYSQL_TABLE) == MYSQL_TABLE
    assert DdlTranslator(MARIADB, MARIADB)("CREATE TABLE h (id INT) WITH SYSTEM VERSIONING").endswith("VERSIONING")
    assert (flavor_of("10.11.19-MariaDB-0+deb12u1"), flavor_of("9.7.4")) == (MARIADB, MYSQL)
