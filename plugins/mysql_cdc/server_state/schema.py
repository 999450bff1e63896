"""The ``_mysql_cdc`` schema in a MySQL/MariaDB server (a MySQL follower, an Iceberg catalog's
server): the tables that hold a pipeline's state.

``checkpoint`` (one row per pipeline) and ``table_position`` (per copied table) are written by the
merge job in the same transaction as the follower rows they cover; ``batch_history``,
``failed_tries`` and ``verification`` are records of runs, written by the Airflow side in short
transactions of their own. ``ensure_state_tables`` creates what is missing (and adds the columns an
older checkpoint table lacks); every reader treats a missing table as "nothing recorded yet".
"""

from __future__ import annotations

from ..contracts import RESERVED_SCHEMA
from ..mysql_server import is_absent

STATE_SCHEMA = RESERVED_SCHEMA
CHECKPOINT_TABLE = f"`{STATE_SCHEMA}`.`checkpoint`"
TABLE_POSITION_TABLE = f"`{STATE_SCHEMA}`.`table_position`"
HISTORY_TABLE = f"`{STATE_SCHEMA}`.`batch_history`"
TRIES_TABLE = f"`{STATE_SCHEMA}`.`failed_tries`"
VERIFICATION_TABLE = f"`{STATE_SCHEMA}`.`verification`"

CREATE_SQL = (
    f"CREATE DATABASE IF NOT EXISTS `{STATE_SCHEMA}`",
    f"""CREATE TABLE IF NOT EXISTS {CHECKPOINT_TABLE} (
        pipeline VARCHAR(190) NOT NULL PRIMARY KEY,
        binlog_file VARCHAR(255) NOT NULL,
        binlog_pos BIGINT UNSIGNED NOT NULL,
        gtid VARCHAR(255) NULL,
        batch_id VARCHAR(255) NULL,
        pending_ddl_pos VARCHAR(300) NULL,
        pending_ddl_fingerprint VARCHAR(64) NULL,
        updated_at DATETIME(6) NOT NULL,
        gtid_set TEXT NULL,
        leader_id VARCHAR(64) NULL
    ) ENGINE=InnoDB""",
    f"""CREATE TABLE IF NOT EXISTS {TABLE_POSITION_TABLE} (
        pipeline VARCHAR(190) NOT NULL,
        db_name VARCHAR(64) NOT NULL,
        table_name VARCHAR(64) NOT NULL,
        binlog_file VARCHAR(255) NOT NULL,
        binlog_pos BIGINT UNSIGNED NOT NULL,
        batch_id VARCHAR(255) NOT NULL,
        state VARCHAR(16) NOT NULL,
        updated_at DATETIME(6) NOT NULL,
        PRIMARY KEY (pipeline, db_name, table_name)
    ) ENGINE=InnoDB""",
    f"""CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} (
        id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
        pipeline VARCHAR(190) NOT NULL,
        run_id VARCHAR(250) NOT NULL,
        batch_id VARCHAR(255) NULL,
        kind VARCHAR(16) NOT NULL,
        start_position VARCHAR(300) NULL,
        end_position VARCHAR(300) NULL,
        end_time DATETIME(6) NULL,
        rows_in BIGINT NOT NULL DEFAULT 0,
        net_rows BIGINT NULL,
        extract_seconds DOUBLE NULL,
        merge_seconds DOUBLE NULL,
        status VARCHAR(16) NOT NULL,
        error TEXT NULL,
        extracted_at DATETIME(6) NULL,
        merged_at DATETIME(6) NULL,
        UNIQUE KEY run (pipeline, run_id),
        KEY recent (pipeline, id)
    ) ENGINE=InnoDB""",
    f"""CREATE TABLE IF NOT EXISTS {TRIES_TABLE} (
        id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
        pipeline VARCHAR(190) NOT NULL,
        run_id VARCHAR(250) NOT NULL,
        task_id VARCHAR(250) NOT NULL,
        try_number INT NOT NULL,
        error TEXT NOT NULL,
        failed_at DATETIME(6) NOT NULL,
        UNIQUE KEY one_try (pipeline, run_id, task_id, try_number)
    ) ENGINE=InnoDB""",
    f"""CREATE TABLE IF NOT EXISTS {VERIFICATION_TABLE} (
        id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
        pipeline VARCHAR(190) NOT NULL,
        started_at DATETIME(6) NOT NULL,
        finished_at DATETIME(6) NOT NULL,
        status VARCHAR(16) NOT NULL,
        result JSON NOT NULL,
        KEY recent (pipeline, id)
    ) ENGINE=InnoDB""",
)
# columns added since the checkpoint table was first created: (name, definition);
# ensure_state_tables adds any that an older checkpoint table lacks
_ADDED_COLUMNS = (("gtid_set", "TEXT NULL"), ("leader_id", "VARCHAR(64) NULL"))


def ensure_state_tables(conn) -> None:
    """Create the schema's tables that are missing (each statement is IF NOT EXISTS)."""
    with conn.cursor() as cur:
        for stmt in CREATE_SQL:
            cur.execute(stmt)
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 'checkpoint'",
            (STATE_SCHEMA,),
        )
        present = {row[0] if not isinstance(row, dict) else row["COLUMN_NAME"] for row in cur.fetchall()}
        for name, definition in _ADDED_COLUMNS:
            if name not in present:
                cur.execute(f"ALTER TABLE {CHECKPOINT_TABLE} ADD COLUMN {name} {definition}")


def rows_if_present(conn, sql: str, args: tuple = ()) -> list[tuple]:
    """The rows of a query on the ``_mysql_cdc`` tables, or [] when the table (or the schema) does
    not exist yet: the follower of a pipeline that never wrote it."""
    import pymysql

    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return [tuple(r.values()) if isinstance(r, dict) else r for r in cur.fetchall()]
    except pymysql.MySQLError as exc:
        if is_absent(exc):
            return []
        raise
