"""Errors of the merge job. Each message says what is wrong and how to fix it: the job prints it
as its one-line error and Airflow shows it to whoever runs the pipeline."""


class MergeError(RuntimeError):
    """The batch cannot be applied; nothing is committed past the last good transaction."""


class CheckpointError(MergeError):
    """The checkpoint is missing, or it does not fit this batch (a gap, a foreign pending DDL)."""


class FollowerSchemaError(MergeError):
    """A follower table is missing or its columns differ from the batch's."""


class FollowerDivergedError(MergeError):
    """The follower's rows are not what the leader had before the batch: it was changed outside
    the pipeline, so applying the batch would not reproduce the leader."""
