"""The demo workload: the seed document's flvDb.pet session (shared/seeds/000_*), then more.

Shared by ``scripts/demo.py`` and the Airflow end-to-end tests, so the demo shows exactly what
the tests prove. ``pet`` has no primary key on purpose: the follower must apply it by full
before-image, duplicates included.
"""

from __future__ import annotations


def seed_statements(db: str = "flvDb") -> list[str]:
    """The seed session, statement for statement (with ``USE`` made explicit)."""
    return [
        f"CREATE DATABASE {db}",
        f"USE {db}",
        "CREATE TABLE pet (name VARCHAR(20), owner VARCHAR(20), species VARCHAR(20), sex CHAR(1), birth DATE)",
        "INSERT INTO pet VALUES ('Puffball','Diane','hamster','f','1999-03-30')",
        "INSERT INTO pet VALUES ('Jack','Peter','dog','m','1999-03-30')",
        "UPDATE pet SET birth = '1989-08-31' WHERE name = 'Jack'",
        "ALTER TABLE pet ADD COLUMN last_vaccine DATE",
        "DELETE from pet where name='Puffball'",
        "INSERT INTO pet VALUES ('Spot', 'Jane', 'dog', 'm', '2010-11-2', Null)",
        "UPDATE pet SET last_vaccine='2020-6-10' WHERE name='Spot'",
    ]


def more_statements(db: str = "flvDb") -> list[str]:
    """A second session: a duplicate row (no key), a multi-row transaction, a keyed table."""
    return [
        f"USE {db}",
        "INSERT INTO pet VALUES ('Jack','Peter','dog','m','1989-08-31',NULL)",  # exact duplicate
        "START TRANSACTION",
        "INSERT INTO pet VALUES ('Bowser','Diane','dog','m','1979-08-31','2021-01-05')",
        "UPDATE pet SET owner = 'Gwen' WHERE name = 'Spot'",
        "DELETE FROM pet WHERE name = 'Jack' LIMIT 1",
        "COMMIT",
        "CREATE TABLE vet_visit (id INT PRIMARY KEY, pet VARCHAR(20), visited DATETIME(6), cost DECIMAL(8,2))",
        "INSERT INTO vet_visit VALUES (1,'Spot','2024-02-29 10:15:00.123456',120.50),(2,'Bowser','2024-03-01 09:00:00',80.00)",
        "UPDATE vet_visit SET id = 3, cost = 99.99 WHERE id = 2",  # a key change
    ]


def a_change(db: str = "flvDb") -> str:
    """One statement a user can run on the demo leader to watch a run carry it (make airflow prints it)."""
    return f"INSERT INTO {db}.pet VALUES ('Rex', 'You', 'dog', 'm', '2026-11-23', NULL)"
