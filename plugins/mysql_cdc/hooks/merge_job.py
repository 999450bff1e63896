"""Everything the merge task needs around its spark-submit.

With ``merge: {spark: when_needed}`` a batch the follower kind can apply without Spark
(``FollowerKind.spark_needed``) is merged by the same job run with this worker's Python alone
(``merge_batch.py --without-spark``): no spark-submit JVM, no driver start. Should the job reach
for Spark all the same, it stops before that step changes anything and the batch is submitted to
Spark, which finds the checkpoint where the first run left it (every commit is exactly once).

Deciding whether Spark is needed at all (a batch already covered by the checkpoint is skipped, a
batch that captured nothing only moves the checkpoint), the job's inputs (the ``mysql_cdc`` zip
for ``--py-files`` and the 0600 secrets file), and the submit itself through the Spark provider's
``SparkSubmitHook``, with the command's arguments built by a pure function (``submit_arguments``).

The driver runs where ``spark-submit`` runs (client deploy mode): the secrets file and the zip are
paths on this machine, so a connection that asks for ``deploy-mode: cluster`` is refused with a
message, not discovered as a missing file on some cluster node.

How secrets travel: follower credentials and S3 settings are read from Airflow connections inside
the task, written to a file readable only by the task's user in a private temp directory, and
handed to spark-submit as the *path* in ``MYSQL_CDC_SECRETS_FILE``. The directory is deleted when
spark-submit returns, whatever happened. No secret is ever in argv (visible in ``ps`` and logged
by SparkSubmitHook), in XCom, in the manifest or in a log line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from ..contracts import ChangeBatch, Checkpoint, plan_replay
from ..packaging import MAINTAIN_JOB, MERGE_JOB, build_py_files, driver_java_options, launcher_env
from ..merge.netting import DRIVER_NET_ROWS_PROPERTY, driver_net_rows
from ..merge.report import SUMMARY_ENV, JobOutcome, MergeSummary
from ..pipeline_options import SPARK_ALWAYS, SPARK_WHEN_NEEDED
from ..kinds.base import SubmitNeeds
from ..job_secrets import SECRETS_ENV, JobSecrets
from ..spark_lines import DEFAULT_LINE, SparkTarget, spark_target
from ..table_assets import table_events
from .connections import required_connection
from .follower import FollowerHookBase, FollowerRef, follower_hook, follower_reference
from .storage import BatchStorageHook


class MergeJobError(AirflowException):
    """The merge job failed. The message starts with the job's own cause (its one-line error),
    then spark-submit's report (the command, secrets masked, and exit code); ``permanent``: the
    job's verdict on whether a retry can fix it (``mysql_cdc.retry_policy``)."""

    def __init__(self, message: str, permanent: bool):
        super().__init__(message)
        self.permanent = permanent

    @classmethod
    def of(cls, outcome: JobOutcome | None, submit_error: BaseException) -> "MergeJobError":
        if outcome is None or outcome.error is None:  # the job died before it could say (killed, OOM)
            return cls(f"the merge job ended without an error of its own (killed, out of memory, or "
                       f"Spark could not start; its log is above): {submit_error}", permanent=False)
        return cls(f"{outcome.error} [{submit_error}]", permanent=outcome.permanent)


SUBMIT = "submit"
SKIP = "skip"
ADVANCE = "advance"


@dataclass(frozen=True)
class MergePlan:
    """What the merge task does with the run's batches. ``batch``: the first that still needs
    work (the last when all are applied); ``manifest_uris``: it and those after it, in order."""

    action: str  # SUBMIT | SKIP (already applied) | ADVANCE (captured nothing)
    batch: ChangeBatch
    checkpoint: Checkpoint
    reason: str
    manifest_uris: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobInputs:
    py_files: str
    env: dict[str, str]
    needs: SubmitNeeds = SubmitNeeds()  # the follower kind's jars and Spark properties
    spark_line: str = DEFAULT_LINE  # the line of the Spark submitted to (``spark_lines``)


def manifest_arguments(manifest_uris: str | Sequence[str]) -> list[str]:
    """The merge job's arguments for ``manifest_uris`` (one, or several applied in order)."""
    uris = [manifest_uris] if isinstance(manifest_uris, str) else manifest_uris
    return [arg for uri in uris for arg in ("--manifest-uri", uri)]


def submit_arguments(application_args: Sequence[str], inputs: JobInputs, name: str, conf: Mapping[str, Any],
                     spark_binary: str) -> dict[str, Any]:
    """The ``SparkSubmitHook`` arguments of one job run: no secret among them (they travel in the
    file named by ``inputs.env``), so the command line it logs is safe as it is."""
    arguments = {
        "conf": driver_java_options({**dict(inputs.needs.conf), **conf}, inputs.spark_line),
        "py_files": inputs.py_files,
        "name": name,
        "application_args": list(application_args),
        "env_vars": {**launcher_env(inputs.spark_line), **inputs.env},
        "spark_binary": spark_binary,
        "deploy_mode": "client",
    }
    if inputs.needs.jars:
        arguments["jars"] = ",".join(inputs.needs.jars)
    return arguments


def read_outcome(path: Path) -> JobOutcome | None:
    """The job's outcome file, if it wrote one (a job killed outright writes none)."""
    return JobOutcome.from_json(path.read_text()) if path.is_file() else None


JOB_PROPERTY_PREFIX = "spark.mysql_cdc."  # the Spark properties the merge job itself reads


def job_here_arguments(manifest_uris: str | Sequence[str], conf: Mapping[str, Any]) -> list[str]:
    """The merge job's arguments when it runs without spark-submit: the pipeline's own properties
    (``spark.mysql_cdc.*``, the only ones the job reads), then the manifests."""
    own = [arg for key, value in sorted(conf.items()) if key.startswith(JOB_PROPERTY_PREFIX)
           for arg in ("--conf", f"{key}={value}")]
    return ["--without-spark", *own, *manifest_arguments(manifest_uris)]


def bound_to_this_process(binary: str, directory: Path) -> str:
    """A launcher of ``binary`` that the kernel kills when the process that started it dies
    (``setpriv --pdeathsig KILL``). SparkSubmitHook.on_kill stops spark-submit when Airflow asks
    the task to stop; a task process that is killed outright (SIGKILL, a lost worker) gets no such
    call, and its spark-submit, the Spark driver and the Python workers under it would go on
    merging. Killing spark-submit takes the rest with it (its children exit when it does).
    Without setpriv (util-linux; on every Debian) the binary is used as is, with a warning."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        import logging

        logging.getLogger(__name__).warning(
            "setpriv not found: a merge task killed outright would leave its spark-submit running")
        return binary
    launcher = directory / Path(binary).name  # its own name: SparkSubmitHook checks a spark-submit's
    launcher.write_text(f'#!/bin/sh\nexec "{setpriv}" --pdeathsig KILL -- "{binary}" "$@"\n')
    launcher.chmod(0o700)
    return str(launcher)


def spark_submit_binary(configured: str | None = None) -> str:
    """The spark-submit to run: the connection's ``spark-binary`` if it names one, else the one on
    PATH, else the one pyspark installed beside the running Python (``.venv/bin/airflow`` started
    without the venv on PATH still finds it). None of them: fail now, saying how to fix it."""
    for candidate in (configured, "spark-submit", str(Path(sys.executable).with_name("spark-submit"))):
        found = candidate and shutil.which(candidate)
        if found:
            return found
    raise AirflowFailException(
        "spark-submit was not found on PATH nor beside the running Python "
        f"({Path(sys.executable).parent}): install pyspark in Airflow's environment (pip install "
        "pyspark, which brings spark-submit) or put your Spark distribution's bin/ on PATH"
    )


class MergeJobHook(BaseHook):
    """``MergeJobHook(follower, storage_uri, aws_conn_id, spark_conn_id)``: ``follower`` the one
    reference to the follower (``hooks.follower.FollowerRef``: a MySQL connection id, or a kind's
    reference)."""

    hook_name = "MySQL CDC merge job"

    def __init__(self, follower: FollowerRef, storage_uri: str, aws_conn_id: str | None, spark_conn_id: str):
        super().__init__()
        self.follower_ref = follower_reference(follower)
        self.storage_uri = storage_uri
        self.aws_conn_id = aws_conn_id
        self.spark_conn_id = spark_conn_id

    @cached_property
    def follower(self) -> FollowerHookBase:
        return follower_hook(self.follower_ref)

    @cached_property
    def storage(self) -> BatchStorageHook:
        return BatchStorageHook(self.storage_uri, self.aws_conn_id)

    def plan(self, manifest_uris: str | Sequence[str]) -> MergePlan:
        """The plan for the run's batches, applied in order (a copy, then its catch-up): those
        already applied are passed over, and the first that is not decides. Raises ReplayError
        (``contracts.replay``) when a batch cannot be applied: a gap, no checkpoint, another
        leader's batch, a pending DDL it does not settle; no retry can fix those."""
        uris = [manifest_uris] if isinstance(manifest_uris, str) else list(manifest_uris)
        for i, uri in enumerate(uris):
            plan = self._plan_one(uri)
            last = i == len(uris) - 1
            if plan.action == SKIP and not last:
                self.log.info("%s", plan.reason)
                continue
            if plan.action == ADVANCE and not last:  # a batch follows: the job moves it with them
                plan = replace(plan, action=SUBMIT)
            return replace(plan, manifest_uris=tuple(uris[i:]))
        raise ValueError("no manifest to merge")

    def _plan_one(self, manifest_uri: str) -> MergePlan:
        batch = self.storage.read_manifest(manifest_uri)
        state = self.follower.state
        checkpoint = state.checkpoint(batch.pipeline)
        # the job's own rule (``contracts.replay``), asked before Spark starts: a batch it refuses
        # (a gap, no checkpoint, another leader's, a pending DDL it does not settle) fails here
        left = plan_replay(batch, checkpoint, state.table_positions(batch.pipeline))
        what = f"snapshot {batch.batch_id}" if batch.is_snapshot else f"batch {batch.range}"
        if left.noop:
            return MergePlan(SKIP, batch, checkpoint, f"{what} is already applied"
                             + ("" if batch.is_snapshot else f" (checkpoint {checkpoint.position})"))
        if left.moves_only:
            return MergePlan(ADVANCE, batch, checkpoint, f"{what} captured no change of this pipeline's tables "
                             f"after checkpoint {checkpoint.position}")
        if batch.is_snapshot:
            return MergePlan(SUBMIT, batch, checkpoint, f"applying {what}: {len(left.segments)} tables at {batch.start}")
        return MergePlan(SUBMIT, batch, checkpoint,
                         f"applying {what} ({batch.row_count} rows, {len(batch.segments)} segments) "
                         f"on checkpoint {checkpoint.position}")

    def record_merged(self, plan: MergePlan, run_id: str, net_rows: int, seconds: float) -> None:
        """Complete the run's row of the batch history (``contracts.history``)."""
        self.follower.state.record_merged(plan.batch.pipeline, run_id, net_rows, round(seconds, 3))

    def advance(self, plan: MergePlan) -> bool:
        """Move the checkpoint across a batch that only moves it (``ReplayPlan.moves_only``: no
        follower row changes, so no transaction has rows to share it with), without Spark; False
        if the checkpoint moved meanwhile (then the job decides)."""
        state = self.follower.state
        current = state.checkpoint(plan.batch.pipeline)
        left = plan_replay(plan.batch, current, state.table_positions(plan.batch.pipeline))
        return left.moves_only and state.move(current, left.end)

    def table_events(self, pipeline: str, manifest_uris: Sequence[str],
                     summaries: list[MergeSummary]) -> list[tuple[str, dict[str, Any]]]:
        """(asset URI, extra) for each follower table the merge changed (``table_assets``):
        the batches' manifests read again for their DDL, the tables' versions from the follower's state."""
        batches = [self.storage.read_manifest(uri) for uri in manifest_uris]
        return table_events(pipeline, summaries, batches, self.follower.table_uri,
                            self.follower.state.table_versions(pipeline))

    @cached_property
    def spark_connection(self):
        # SparkSubmitHook falls back to master "yarn" when the connection is missing, which on a
        # machine without YARN fails minutes later with an unrelated-looking error.
        conn = required_connection(self.spark_conn_id, "Spark")
        if conn.extra_dejson.get("deploy-mode") == "cluster":
            raise AirflowFailException(
                f"Spark connection {self.spark_conn_id!r} sets deploy-mode 'cluster', but the merge job's "
                "driver must run beside this task (it reads the job's secrets file and zip from local "
                "paths; executors still run on the cluster): remove deploy-mode or set it to 'client'"
            )
        return conn

    def submit(self, manifest_uris: Sequence[str], name: str, conf: Mapping[str, Any],
               spark: str = SPARK_ALWAYS) -> list[MergeSummary]:
        """Run the merge job for ``manifest_uris`` (applied in order, in one Spark application)
        and return their summaries; raises ``MergeJobError`` with the job's own cause first when
        it fails. ``spark``: the pipeline's ``merge.spark`` (``SPARK_WHEN_NEEDED``: a batch that
        needs no Spark is merged without spark-submit, ``run_here``)."""
        with self.job_inputs() as inputs:
            outcome_file = Path(inputs.env[SUMMARY_ENV])
            applied: list[MergeSummary] = []
            if spark == SPARK_WHEN_NEEDED:
                reason = self.spark_needed(manifest_uris, conf)
                if reason is None:
                    outcome = self.run_here(manifest_uris, inputs, conf)
                    if not outcome.spark_refused:
                        return outcome.summaries
                    applied = outcome.summaries
                    reason = outcome.error
                self.log.info("submitting the merge to Spark: %s", reason)
            try:
                self._spark_submit(MERGE_JOB, manifest_arguments(manifest_uris), inputs, name, conf)
            except Exception as exc:
                raise MergeJobError.of(read_outcome(outcome_file), exc) from None
            outcome = read_outcome(outcome_file)
            submitted = outcome.summaries if outcome is not None else []
            done = {s.batch_id for s in applied}  # applied without Spark: Spark's run found them applied
            return applied + [s for s in submitted if s.batch_id not in done]

    def spark_needed(self, manifest_uris: Sequence[str], conf: Mapping[str, Any]) -> str | None:
        """Why the batches need Spark (the follower kind's reason), or None."""
        value = conf.get(DRIVER_NET_ROWS_PROPERTY)
        rows = driver_net_rows(None if value is None else str(value))
        spec = self.follower.spec()
        for uri in manifest_uris:
            reason = spec.spark_needed(self.storage.read_manifest(uri), rows)
            if reason is not None:
                return reason
        return None

    def run_here(self, manifest_uris: Sequence[str], inputs: "JobInputs", conf: Mapping[str, Any]) -> JobOutcome:
        """The merge job run by this worker's Python without Spark (``merge_batch.py --without-spark``),
        its output in the task log; its outcome, a refusal of Spark included (``spark_refused``).
        Raises ``MergeJobError`` when it fails otherwise."""
        outcome_file = Path(inputs.env[SUMMARY_ENV])
        python = bound_to_this_process(sys.executable, Path(inputs.py_files).parent)
        command = [python, str(MERGE_JOB), *job_here_arguments(manifest_uris, conf)]
        # the job imports mysql_cdc from the same zip a submit ships (--py-files), not from plugins/
        path = os.pathsep.join(p for p in (inputs.py_files, os.environ.get("PYTHONPATH")) if p)
        self.log.info("merging without Spark: %s", " ".join(command))
        self.job_here = subprocess.Popen(command, env={**os.environ, **inputs.env, "PYTHONPATH": path},
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in self.job_here.stdout:
            self.log.info("%s", line.rstrip())
        returncode = self.job_here.wait()
        outcome = read_outcome(outcome_file)
        outcome_file.unlink(missing_ok=True)  # a submit after a refusal writes its own
        if returncode == 0 and outcome is not None:
            return outcome
        if outcome is not None and outcome.spark_refused:
            return outcome
        raise MergeJobError.of(outcome, RuntimeError(f"{' '.join(command)} exited with {returncode}"))

    def maintain(self, pipeline: str, retain_hours: float, name: str, conf: Mapping[str, Any]) -> None:
        """Run the lake maintenance job (``spark_jobs/maintain_lake.py``) for a Delta Lake follower;
        the follower's location and credentials travel in the same 0600 secrets file as a merge's."""
        with self.job_inputs() as inputs:
            self._spark_submit(MAINTAIN_JOB, ["--pipeline", pipeline, "--retain-hours", str(retain_hours)],
                               inputs, name, conf)

    @cached_property
    def spark(self) -> SparkTarget:
        """The connection's spark-submit (``spark_submit_binary``) and its Spark, known to be of a
        line the job is tested on (``spark_lines.spark_target``: refused before anything starts)."""
        target = spark_target(spark_submit_binary(self.spark_connection.extra_dejson.get("spark-binary")))
        self.log.info("Spark %s (%s)", target.version, target.binary)
        return target

    def _spark_submit(self, job: Path, args: list[str], inputs: JobInputs, name: str, conf: Mapping[str, Any]) -> None:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        binary = bound_to_this_process(self.spark.binary, Path(inputs.py_files).parent)
        self.spark_submit = SparkSubmitHook(conn_id=self.spark_conn_id, **submit_arguments(args, inputs, name, conf, binary))
        self.spark_submit.submit(str(job))

    def kill(self) -> None:
        """Stop a running submit (the task was killed or timed out)."""
        spark_submit = getattr(self, "spark_submit", None)
        if spark_submit is not None:
            spark_submit.on_kill()
        job_here = getattr(self, "job_here", None)
        if job_here is not None and job_here.poll() is None:
            job_here.kill()

    @contextmanager
    def job_inputs(self) -> Iterator[JobInputs]:
        """The zip for --py-files and the secrets file, alive only while the caller submits."""
        if not MERGE_JOB.is_file():
            raise FileNotFoundError(
                f"the merge job {MERGE_JOB} does not exist; deploy spark_jobs/ beside plugins/ "
                "or set MYSQL_CDC_SPARK_JOBS_DIR to its directory"
            )
        sink = self.follower.spec()
        needs = sink.submit_needs(self.spark.line)  # the jars of the line submitted to
        secrets = JobSecrets(sink=sink, storage=self.storage.spec())
        tmp = Path(tempfile.mkdtemp(prefix="mysql-cdc-merge-"))  # mode 0700: private to this user
        try:
            py_files = build_py_files(tmp)
            secrets_file = tmp / "job-secrets.json"
            secrets.write(str(secrets_file))  # created 0600 before a byte is written
            yield JobInputs(py_files=py_files, env={SECRETS_ENV: str(secrets_file),
                                                    SUMMARY_ENV: str(tmp / "summary.json")},
                            needs=needs, spark_line=self.spark.line)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
