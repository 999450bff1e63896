"""Errors of the merge job. Each message says what is wrong and how to fix it: the job prints it
as its one-line error and Airflow shows it to whoever runs the pipeline."""

from ..errors import PermanentError


class MergeError(RuntimeError):
    """The batch cannot be applied; nothing is committed past the last good transaction."""


class CheckpointError(MergeError):
    """The checkpoint moved while this merge ran (another merge of the pipeline is running).
    A checkpoint that does not fit the batch at all (none, a gap, a foreign pending DDL) is a
    ``contracts.ReplayError``, decided by ``contracts.replay`` for both sides."""


class TableCommitError(MergeError):
    """One table's commit of a segment failed. Says which table, and the recovery: a retry skips
    the segment's tables already committed; a table that fails again is copied anew. Whether a
    retry can help is the cause's to say (``retry_policy.is_permanent`` reads ``__cause__``)."""

    @classmethod
    def of(cls, table: str, rows: int, cause: BaseException) -> "TableCommitError":
        lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
        return cls(
            f"{table}: committing its {rows} net rows failed: {lines[0] if lines else type(cause).__name__}. "
            "A retry of the run applies what is missing (the segment's tables already committed are skipped); "
            f"if {table} fails again, copy it anew: a manual run with conf {{\"resnapshot\": [\"{table}\"]}}")


class FollowerSchemaError(MergeError, PermanentError):
    """A follower table is missing or its columns differ from the batch's. ``problem``: what is
    wrong, without the advice of the message (a snapshot, which fixes it itself, says that)."""

    def __init__(self, message: str, problem: str | None = None):
        super().__init__(message)
        self.problem = problem or message


class FollowerDivergedError(MergeError, PermanentError):
    """The follower's rows are not what the leader had before the batch: it was changed outside
    the pipeline, so applying the batch would not reproduce the leader."""


class FollowerVersionError(MergeError, PermanentError):
    """The follower server is older than the merge's queries need: no retry can fix it."""


class FollowerUnwritableError(MergeError, PermanentError):
    """The follower refuses every write, whatever the statement: it is read-only (a replica, a
    failover in progress, an operator's ``read_only``) or out of space. No retry within minutes
    helps; a person makes it writable or points the pipeline at the writable server."""


class SparkRefused(MergeError):
    """The job runs without Spark (the merge task judged the batch to need none: ``--without-spark``)
    and reached for a session. Raised before the step that wanted it changes anything; what was
    committed before stays, exactly once, and the merge task submits the job to Spark to do the rest."""
