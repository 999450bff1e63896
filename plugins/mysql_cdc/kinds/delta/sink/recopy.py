"""Which tables of a batch a Delta Lake follower must copy again instead of merging
(``merge.recopy``), with Delta's types: a column is held in its Spark SQL type, and only the exact
widenings of ``tables.widens`` are made in place. Only ``deltalake`` reads the lake (the hook's), no
Spark starts.
"""

from __future__ import annotations

import re

from ....contracts import ChangeBatch
from ....merge.recopy import LakeColumns, LakeTypes
from ....merge.recopy import tables_to_copy as _tables_to_copy
from .tables import delta_type, widens

DELTA_TYPES = LakeTypes(delta_type, widens, "Delta")

_DELTA_RS_TYPES = {"byte": "TINYINT", "short": "SMALLINT", "integer": "INT", "long": "BIGINT", "float": "FLOAT",
                   "double": "DOUBLE", "boolean": "BOOLEAN", "string": "STRING", "binary": "BINARY", "date": "DATE",
                   "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ"}


def spark_type(delta_rs_type: str) -> str:
    """A delta-rs primitive type name (``integer``, ``decimal(10,2)``) as Spark SQL spells it."""
    match = re.match(r"^decimal\((\d+),\s*(\d+)\)$", delta_rs_type)
    if match:
        return f"DECIMAL({match[1]},{match[2]})"
    return _DELTA_RS_TYPES.get(delta_rs_type, delta_rs_type.upper())


def tables_to_copy(batch: ChangeBatch, lake: LakeColumns) -> dict[str, str]:
    """``db.table`` -> why, for each table of ``batch`` the lake must copy again."""
    return _tables_to_copy(batch, lake, DELTA_TYPES)
