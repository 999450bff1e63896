"""The pipelines file: one entry per CDC pipeline, one Airflow DAG per entry.

```yaml
pipelines:
  - name: mysql_cdc                 # DAG id, checkpoint row, storage prefix
    schedule: "*/5 * * * *"         # cron or preset; null = manual runs only
    leader_conn_id: mysql_leader
    follower_conn_id: mysql_follower
    storage_uri: "${CDC_STORAGE_URI:-file://${PIPELINES_DIR}/../.local/cdc-batches}"
    aws_conn_id: aws_default        # used only for s3:// storage; null = boto3's default chain
    spark_conn_id: spark_default
    include: ["flvDb.*"]            # db.table globs
    exclude: []
    start_position: snapshot        # snapshot | current | earliest | FILE:POS (first run only)
    on_purged: fail                 # fail | snapshot: what a run does when its binlog was purged
    snapshot: {split_rows: 500000, workers: 2, decoder: native}  # chunk size, parallel copies, row parser
    extract: {workers: 2}           # binlog files of a long range read at once
    merge: {spark: always}          # always | when_needed: a batch that needs no Spark merged without spark-submit
    batches: {retain: 7d}           # applied change batches older than this are deleted (null: keep all)
    heartbeat: false                # true: each run commits a row on the leader (fresh lag figures)
    max_seconds_behind: 900         # the check_lag task fails past this (null: no alert)
    verify: {schedule: "@daily", chunk_rows: 100000, rechecks: 2, settle_timeout: 900}
```

The follower is one reference, ``follower: {kind: <kind>, <the kind's keys>}``; ``follower_conn_id:
<connection>`` is the short form of ``follower: {kind: mysql, conn_id: <connection>}``. A Delta Lake
follower (docs/lakehouse.md)::

    follower: {kind: delta, location: "s3://bucket/lake", changelog: ["shop.orders"]}  # changelog: true = all
    maintenance: {schedule: "@daily", retain_hours: 168}

``schedule: "@continuous"`` runs the pipeline back to back (docs/operate.md, "A continuous pipeline"):
its ``wait_timeout`` defaults to an hour and must be at least a minute.

Optional tuning fields: ``wait_timeout`` (seconds the sensor waits for the leader to move before the
run ends skipped), ``poke_interval`` (seconds between checks), ``retries`` and ``retry_delay``
(seconds, doubled on each retry of extract and merge), ``spark_conf`` (Spark properties of the
merge job's spark-submit, e.g. ``spark.executor.memory: 4g``).

String values may use ``${VAR}`` and ``${VAR:-default}``; ``${PIPELINES_DIR}`` is the directory of
the pipelines file, so a ``file://`` root can sit beside the deployment without an absolute path
written into the file.

Everything is checked when the file is loaded, so a mistake shows as a DAG import error that names
the file, the pipeline and the field — never as a task failure hours later. Nothing here imports
Airflow: the checks run the same in a unit test, the DAG processor and a pre-commit hook.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from .capture.filters import TableFilter
from .contracts import BinlogPosition, InvalidPosition
from .kinds import CONNECTION_KIND, KINDS, FollowerKind
from .kinds import kind as follower_kind
from .pipeline_options import BatchOptions, ExtractOptions, MaintenanceOptions, MergeOptions, SnapshotOptions, VerifyOptions
from .storage import normalize_uri
from .errors import PermanentError

PIPELINES_FILE_ENV = "CDC_PIPELINES_FILE"
DEFAULT_SCHEDULE = "*/5 * * * *"
START_POSITIONS = ("snapshot", "current", "earliest")
ON_PURGED = ("fail", "snapshot")
# Airflow's schedule presets (airflow.timetables ... cron_presets) plus the two non-cron ones.
SCHEDULE_PRESETS = frozenset(
    {"@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly", "@annually"}
)
# ``schedule: "@continuous"``: Airflow starts the next run as soon as one ends (one at a time). The
# sensor then waits for the leader far longer than a cron run's few seconds, deferred (no worker
# slot): an idle leader costs one run per wait, not a run every few seconds.
CONTINUOUS = "@continuous"
CONTINUOUS_WAIT_TIMEOUT = 3600.0
CONTINUOUS_MIN_WAIT = 60.0
# A DAG id and a storage prefix at once: no dots (they would read as db.table), no slashes.
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,99}$")
_VAR_START_RE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<default>:-)?")


class PipelineConfigError(ValueError, PermanentError):
    """The pipelines file is wrong; the message names the file, the pipeline and the field."""


@dataclass(frozen=True)
class FollowerConfig:
    """The pipeline's follower as the file describes it: ``follower: {kind: <kind>, ...}``, the keys
    besides ``kind`` being the kind's own (``kinds.base.FollowerKind.config_keys``), checked by the
    kind when the file is loaded."""

    kind: str
    section: Mapping[str, Any]

    def to_json(self, aws_conn_id: str | None) -> dict[str, Any]:
        """What operators and triggers carry (``hooks.follower.follower_hook``): JSON-safe."""
        return follower_kind(self.kind).reference(self.section, aws_conn_id)


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    leader_conn_id: str
    storage_uri: str
    follower_conn_id: str | None = None  # a MySQL/MariaDB follower: its Airflow connection
    follower: FollowerConfig | None = None  # ... or the follower described: {kind: ..., <its keys>}
    schedule: str | None = DEFAULT_SCHEDULE
    aws_conn_id: str | None = "aws_default"
    spark_conn_id: str = "spark_default"
    include: tuple[str, ...] = ("*.*",)
    exclude: tuple[str, ...] = ()
    # snapshot: the first run copies every included table, then streams from the copy's position
    start_position: str = "snapshot"
    on_purged: str = "fail"  # snapshot: a run whose binlog was purged copies every table again
    # a scheduled run with nothing new ends after this, skipped (a continuous one: CONTINUOUS_WAIT_TIMEOUT)
    wait_timeout: float = 5.0
    poke_interval: float = 1.0
    retries: int = 3
    retry_delay: float = 30.0
    spark_conf: tuple[tuple[str, str], ...] = ()  # Spark properties of the merge job's submit
    snapshot: SnapshotOptions = SnapshotOptions()
    extract: ExtractOptions = ExtractOptions()
    merge: MergeOptions = MergeOptions()  # whether every merge goes through spark-submit
    batches: BatchOptions = BatchOptions()  # how long change batches are kept (batch_retention)
    heartbeat: bool = False  # each run commits a row on the leader first (monitor.heartbeat)
    max_seconds_behind: float | None = None  # check_lag fails past it: Airflow's alerting picks it up
    verify: VerifyOptions = VerifyOptions()  # the pipeline's verification DAG (monitor.verify)
    maintenance: MaintenanceOptions = MaintenanceOptions()  # a Delta Lake follower's <name>_maintain DAG

    @property
    def table_filter(self) -> TableFilter:
        return TableFilter(include=self.include, exclude=self.exclude)

    @property
    def follower_config(self) -> dict[str, Any] | None:
        """The described follower as operators carry it (None: the MySQL connection)."""
        return self.follower.to_json(self.aws_conn_id) if self.follower is not None else None

    @property
    def kind(self) -> FollowerKind:
        """The follower's kind (``kinds``): the described one, or a connection's."""
        return follower_kind(self.follower.kind if self.follower is not None else CONNECTION_KIND)

    @property
    def follower_reference(self) -> dict[str, Any]:
        """The follower as every task carries it: one JSON-safe reference, the kind's own
        (``follower_conn_id`` is the short form of a MySQL follower's)."""
        if self.follower is not None:
            return self.follower_config
        return self.kind.reference({"conn_id": self.follower_conn_id}, self.aws_conn_id)

    def describe_follower(self) -> str:
        if self.follower is not None:
            return self.kind.describe(self.follower_config)
        return str(self.follower_conn_id)


# -- field checks: each returns the normalized value or raises ValueError with the problem ------


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty string, got {value!r}")
    return value.strip()


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _name(value: Any) -> str:
    value = _text(value)
    if not NAME_RE.match(value):
        raise ValueError(
            f"{value!r} is not a valid pipeline name: start with a letter, then letters, digits, '_' or '-' "
            "(at most 100 characters); it becomes the DAG id and the storage prefix"
        )
    return value


def _schedule(value: Any) -> str | None:
    if value is None:
        return None
    value = _text(value)
    if value.startswith("@"):
        if value not in SCHEDULE_PRESETS:
            raise ValueError(f"{value!r} is not a schedule preset; use one of {sorted(SCHEDULE_PRESETS)}")
        return value
    from croniter import croniter  # an Airflow dependency; imported here to keep module import cheap

    if not croniter.is_valid(value):
        raise ValueError(f"{value!r} is not a cron expression (example: '*/5 * * * *' for every 5 minutes)")
    return value


def _storage_uri(value: Any) -> str:
    return normalize_uri(_text(value))  # StorageError is a ValueError: reported with the field


def _globs(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"must be a list of db.table globs such as ['shop.*', '*.orders'], got {value!r}")
    return tuple(v.strip() for v in value)


def _spark_conf(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and k.startswith("spark.") for k in value):
        raise ValueError(
            f"must be a mapping of Spark properties such as {{'spark.executor.memory': '2g'}}, got {value!r}"
        )
    if any(isinstance(v, (dict, list)) or v is None for v in value.values()):
        raise ValueError(f"Spark property values must be strings or numbers, got {value!r}")
    return tuple(sorted((k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()))


def _options(kind: type) -> Callable[[Any], Any]:
    """A check for a section of options (``snapshot``, ``extract``): a mapping of its known keys."""
    def check(value: Any) -> Any:
        known = [f.name for f in fields(kind)]
        if not isinstance(value, dict):
            raise ValueError(f"must be a mapping with {known}, got {value!r}")
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"unknown key(s) {unknown}; known keys are {known}")
        return kind(**value)

    return check


def _scheduled_options(kind: type) -> Callable[[Any], Any]:
    """A check for a section of options that schedules a DAG of its own (``verify``,
    ``maintenance``): its known keys, and its ``schedule`` checked as the pipeline's is."""
    def check(value: Any) -> Any:
        options = _options(kind)(value)
        try:
            _schedule(options.schedule)
        except ValueError as exc:
            raise ValueError(f"schedule: {exc}") from None
        return options

    return check


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, got {value!r}")
    return value


def _start_position(value: Any) -> str:
    value = _text(value)
    if value in START_POSITIONS:
        return value
    try:
        return str(BinlogPosition.parse(value))
    except InvalidPosition as exc:
        raise ValueError(f"must be 'snapshot', 'current', 'earliest' or FILE:POS; {exc}") from None


def _on_purged(value: Any) -> str:
    value = _text(value)
    if value not in ON_PURGED:
        raise ValueError(f"must be one of {list(ON_PURGED)}, got {value!r}")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"must be a positive number of seconds, got {value!r}")
    return float(value)


def _non_negative_seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"must be a number of seconds >= 0, got {value!r}")
    return float(value)


def _optional_seconds(value: Any) -> float | None:
    return None if value is None else _seconds(value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"must be a whole number >= 0, got {value!r}")
    return value


def _follower(value: Any) -> FollowerConfig:
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping such as {{kind: delta, location: s3://bucket/lake}}, got {value!r}")
    if value.get("kind") not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {value.get('kind')!r}")
    kind = follower_kind(value["kind"])
    unknown = sorted(set(value) - kind.config_keys - {"kind"})
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; known keys are {sorted(kind.config_keys | {'kind'})}")
    section = {k: v for k, v in value.items() if k != "kind"}
    kind.reference(section, None)  # the kind's own checks, now: a bad value is named when the file loads
    return FollowerConfig(value["kind"], section)


_CHECKS = {
    "name": _name,
    "follower": _follower,
    "leader_conn_id": _text,
    "follower_conn_id": _text,
    "storage_uri": _storage_uri,
    "schedule": _schedule,
    "aws_conn_id": _optional_text,
    "spark_conn_id": _text,
    "include": _globs,
    "exclude": _globs,
    "start_position": _start_position,
    "on_purged": _on_purged,
    "wait_timeout": _seconds,
    "poke_interval": _seconds,
    "retries": _count,
    "retry_delay": _non_negative_seconds,
    "spark_conf": _spark_conf,
    "snapshot": _options(SnapshotOptions),
    "extract": _options(ExtractOptions),
    "merge": _options(MergeOptions),
    "batches": _options(BatchOptions),
    "heartbeat": _flag,
    "max_seconds_behind": _optional_seconds,
    "verify": _scheduled_options(VerifyOptions),
    "maintenance": _scheduled_options(MaintenanceOptions),
}


# -- loading ---------------------------------------------------------------------------------------


def _interpolate(value: Any, variables: dict[str, str], where: str) -> Any:
    """Expand ${VAR} and ${VAR:-default} in strings (a default may itself hold ${...}).

    One pass, left to right: what a variable expands to is never expanded again, so a value
    taken from the environment stays exactly what it is (a password holding '${HOME}' is not
    altered, X='a${X}' does not loop)."""
    if isinstance(value, list):
        return [_interpolate(v, variables, where) for v in value]
    if isinstance(value, dict):
        return {k: _interpolate(v, variables, where) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    return _expand(value, 0, variables, where, inside_default=False)[0]


def _expand(text: str, at: int, variables: dict[str, str], where: str, inside_default: bool) -> tuple[str, int]:
    """Expand ``text`` from ``at`` up to its end, or (inside a default) up to the closing brace."""
    out = []
    while at < len(text):
        if inside_default and text[at] == "}":
            return "".join(out), at
        match = _VAR_START_RE.match(text, at)
        if not match:
            out.append(text[at])
            at += 1
            continue
        name, at = match["name"], match.end()
        default = None
        if match["default"]:
            default, at = _expand(text, at, variables, where, inside_default=True)
        if at >= len(text) or text[at] != "}":
            raise PipelineConfigError(f"{where}: '${{{name}' is not closed with '}}'")
        at += 1
        found = variables.get(name, os.environ.get(name))
        if found not in (None, ""):
            out.append(found)
        elif default is not None:
            out.append(default)
        else:
            raise PipelineConfigError(
                f"{where}: environment variable {name} is not set and ${{{name}}} has no default"
            )
    if inside_default:
        raise PipelineConfigError(f"{where}: a ${{...:-default}} is not closed with '}}'")
    return "".join(out), at


def _entry(raw: Any, index: int, path: Path, variables: dict[str, str]) -> PipelineConfig:
    where = f"{path}: pipelines[{index}]"
    if not isinstance(raw, dict):
        raise PipelineConfigError(f"{where}: expected a mapping of fields, got {type(raw).__name__}")
    if isinstance(raw.get("name"), str):
        where += f" ({raw['name']})"
    known = [f.name for f in fields(PipelineConfig)]
    unknown = sorted(set(raw) - set(known), key=str)
    if unknown:
        raise PipelineConfigError(f"{where}: unknown field(s) {unknown}; known fields are {known}")
    missing = [
        f.name for f in fields(PipelineConfig)
        if f.default is MISSING and f.default_factory is MISSING and f.name not in raw
    ]
    if "follower_conn_id" not in raw and "follower" not in raw:
        # a MySQL follower's connection is what most pipelines name; 'follower' is the alternative
        missing.insert(1 if "leader_conn_id" in missing else 0, "follower_conn_id")
    if missing:
        raise PipelineConfigError(f"{where}: missing required field(s) {missing}")
    values = {}
    for key, value in raw.items():
        try:
            values[key] = _CHECKS[key](_interpolate(value, variables, f"{where}.{key}"))
        except ValueError as exc:
            if isinstance(exc, PipelineConfigError):
                raise
            raise PipelineConfigError(f"{where}: field '{key}': {exc}") from None
    if values.get("schedule") == CONTINUOUS:
        values.setdefault("wait_timeout", CONTINUOUS_WAIT_TIMEOUT)
        if values["wait_timeout"] < CONTINUOUS_MIN_WAIT:
            raise PipelineConfigError(
                f"{where}: field 'wait_timeout': {values['wait_timeout']:g}s with schedule {CONTINUOUS!r} would start "
                f"a run every {values['wait_timeout']:g}s while the leader is idle (a run that finds nothing ends "
                f"skipped and the next starts at once); give at least {CONTINUOUS_MIN_WAIT:g}s, or leave it out "
                f"({CONTINUOUS_WAIT_TIMEOUT:g}s)")
    config = PipelineConfig(**values)
    if (config.follower_conn_id is None) == (config.follower is None):
        raise PipelineConfigError(
            f"{where}: give the follower once: 'follower_conn_id' (a MySQL/MariaDB connection) or 'follower' "
            "({kind: ..., ...}), " + ("not both" if config.follower is not None else "got neither"))
    if not config.include:
        raise PipelineConfigError(f"{where}: field 'include': lists no glob, so nothing would be captured")
    try:
        config.table_filter  # the capture's own glob check, so the two can never disagree
    except ValueError as exc:
        field_name, _, problem = str(exc).partition(": ")  # TableFilter says "include: 'x' is not ..."
        raise PipelineConfigError(f"{where}: field '{field_name}': {problem}") from None
    if config.poke_interval > config.wait_timeout:
        raise PipelineConfigError(
            f"{where}: field 'poke_interval': {config.poke_interval:g}s is longer than wait_timeout "
            f"{config.wait_timeout:g}s, so the sensor would check only once"
        )
    return config


def load_pipelines(path: str | os.PathLike) -> list[PipelineConfig]:
    """Parse and check a pipelines file; raises PipelineConfigError naming what is wrong."""
    path = Path(path).resolve()
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise PipelineConfigError(
            f"cannot read the pipelines file {path}: {exc.strerror} (set {PIPELINES_FILE_ENV} to its path)"
        ) from None
    except yaml.YAMLError as exc:
        raise PipelineConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or set(data) != {"pipelines"}:
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise PipelineConfigError(f"{path}: expected one top-level key 'pipelines' (a list), found {found}")
    entries = data["pipelines"]
    if not isinstance(entries, list) or not entries:
        raise PipelineConfigError(f"{path}: 'pipelines' must be a non-empty list of pipeline entries")
    variables = {"PIPELINES_DIR": str(path.parent)}
    configs = [_entry(raw, i, path, variables) for i, raw in enumerate(entries)]
    seen: set[str] = set()
    for i, config in enumerate(configs):
        if config.name in seen:
            raise PipelineConfigError(
                f"{path}: pipelines[{i}]: field 'name': {config.name!r} is used twice; "
                "names are DAG ids and checkpoint keys and must be unique"
            )
        seen.add(config.name)
    return configs
