"""A pipeline's options: the pipelines file's ``snapshot``, ``extract``, ``merge``, ``batches``,
``verify`` and ``maintenance`` sections, as frozen dataclasses that check their values (``pipeline_config``
rejects unknown keys and names the bad field)."""

from __future__ import annotations

from dataclasses import dataclass


def _check_options(options, least: dict[str, int]) -> None:
    """An options section's counts are whole numbers of at least ``least[name]``, and its
    ``decoder`` (every section that has one) is one of the two decoders."""
    for name, minimum in least.items():
        value = getattr(options, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name}: must be a whole number >= {minimum}, got {value!r}")
    decoder = getattr(options, "decoder", "native")
    if decoder not in ("native", "python"):
        raise ValueError(f"decoder: must be 'native' or 'python', got {decoder!r}")


@dataclass(frozen=True)
class SnapshotOptions:
    """How a snapshot copy is cut and run (the pipelines file's ``snapshot`` section)."""

    split_rows: int = 500_000  # rows per chunk of a table with an integer primary key
    workers: int = 2  # chunks copied at once, each in its own process and read view
    # who parses the copied rows: "native" (the compiled decoder, native/) or "python" (PyMySQL,
    # the reference the compiled one is tested against)
    decoder: str = "native"

    def __post_init__(self) -> None:
        _check_options(self, {"split_rows": 1, "workers": 1})


@dataclass(frozen=True)
class ExtractOptions:
    """How a long range is read (the pipelines file's ``extract`` section)."""

    workers: int = 2  # binlog files of a range read at once, each part by its own reader process
    # which decoder reads rows events: "native" (compiled, native/) or "python" (mysql-replication,
    # the reference the compiled one is tested against)
    decoder: str = "native"
    # binlog megabytes a part must have to be read by a process of its own: below it, starting
    # the process costs more than the compiled decoder takes to read the part (0: no minimum)
    min_part_mb: int = 64

    def __post_init__(self) -> None:
        _check_options(self, {"workers": 1, "min_part_mb": 0})


@dataclass(frozen=True)
class BatchOptions:
    """How long change batches are kept (the pipelines file's ``batches`` section): applied batches
    older than ``retain`` ("7d", "36h", "90m"; at least 1h) are deleted at the end of each run
    (``batch_retention``); null keeps every batch."""

    retain: str | None = "7d"

    def __post_init__(self) -> None:
        if self.retain is not None:
            from .batch_retention import parse_retain

            try:
                parse_retain(self.retain)
            except ValueError as exc:
                raise ValueError(f"retain: {exc}") from None


@dataclass(frozen=True)
class VerifyOptions:
    """The pipelines file's ``verify`` section."""

    schedule: str | None = "@daily"  # the verification DAG's schedule (null: manual runs only)
    chunk_rows: int = 100_000  # key values per checksum chunk
    rechecks: int = 2  # merges to wait for before a still-differing chunk counts as drift
    settle_timeout: float = 900.0  # seconds to wait for a merge before each recheck

    def __post_init__(self) -> None:
        _check_options(self, {"chunk_rows": 1, "rechecks": 0})
        timeout = self.settle_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"settle_timeout: must be a positive number of seconds, got {timeout!r}")


# merge.spark: when the merge task runs the merge job through spark-submit
SPARK_ALWAYS, SPARK_WHEN_NEEDED = "always", "when_needed"


@dataclass(frozen=True)
class MergeOptions:
    """The pipelines file's ``merge`` section. ``spark``: ``always`` submits every batch's merge job
    to the Spark connection (a Spark application per run, in the Spark UI and history server);
    ``when_needed`` runs the same job with this worker's Python alone when the follower kind says
    the batch needs no Spark (``FollowerKind.spark_needed``: a MySQL or Iceberg follower's batch of
    tables netted on the driver), sparing spark-submit's JVM and the driver's start, and submits the others."""

    spark: str = SPARK_ALWAYS

    def __post_init__(self) -> None:
        if self.spark not in (SPARK_ALWAYS, SPARK_WHEN_NEEDED):
            raise ValueError(f"spark: must be {SPARK_ALWAYS!r} or {SPARK_WHEN_NEEDED!r}, got {self.spark!r}")


@dataclass(frozen=True)
class MaintenanceOptions:
    """The pipelines file's ``maintenance`` section (a Delta Lake follower): the ``<name>_maintain``
    DAG compacts every table (``OPTIMIZE``) and deletes files older versions no longer need
    (``VACUUM``) past ``retain_hours`` (at least 1; Delta's own default is 168, a week)."""

    schedule: str | None = "@daily"
    retain_hours: float = 168.0

    def __post_init__(self) -> None:
        hours = self.retain_hours
        if isinstance(hours, bool) or not isinstance(hours, (int, float)) or hours < 1:
            raise ValueError(f"retain_hours: must be a number of hours >= 1, got {hours!r}")
