"""The shared contracts (position, change batch, change row, checkpoint).

Imported by the Airflow plugin and shipped to the Spark merge job: there is one definition of each.
Nothing here imports Airflow or Spark.
"""

from .batch import (
    MANIFEST_NAME,
    ChangeBatch,
    ColumnSpec,
    DdlSegment,
    DdlTarget,
    ManifestError,
    RowSegment,
    Segment,
    TableChanges,
    batch_id_for,
    batch_prefix,
    batches_prefix,
)
from .checkpoint import CHECKPOINT_SCHEMA, Checkpoint, ensure_checkpoint_table, read_checkpoint, write_checkpoint
from .position import POSITION_PATTERN, BinlogPosition, InvalidPosition, PositionRange
from .replay import (
    MissingCheckpointError,
    RangeGapError,
    ReplayError,
    ReplayPlan,
    already_applied,
    plan_replay,
    require_checkpoint,
)

__all__ = [
    "POSITION_PATTERN",
    "MissingCheckpointError",
    "RangeGapError",
    "ReplayError",
    "ReplayPlan",
    "already_applied",
    "plan_replay",
    "require_checkpoint",
    "CHECKPOINT_SCHEMA",
    "MANIFEST_NAME",
    "BinlogPosition",
    "ChangeBatch",
    "Checkpoint",
    "ColumnSpec",
    "DdlSegment",
    "DdlTarget",
    "InvalidPosition",
    "ManifestError",
    "PositionRange",
    "RowSegment",
    "Segment",
    "TableChanges",
    "batch_id_for",
    "batch_prefix",
    "batches_prefix",
    "ensure_checkpoint_table",
    "read_checkpoint",
    "write_checkpoint",
]
