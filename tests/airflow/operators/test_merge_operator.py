"""CdcMergeOperator and the pieces of its submit: the spark-submit arguments (a pure function), which
spark-submit runs, the driver's class-data archive, and the refusals that need no Spark. The merge's
real submits run in tests/airflow/dags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException

from mysql_cdc.hooks.merge_job import (
    JobInputs, job_here_arguments, manifest_arguments, spark_submit_binary, submit_arguments,
)
from mysql_cdc import packaging
from mysql_cdc.packaging import LOG4J2_CONFIG, driver_java_options, launcher_env
from mysql_cdc.spark_lines import DEFAULT_LINE
from mysql_cdc.operators import CdcMergeOperator
from mysql_cdc.job_secrets import SECRETS_ENV

PLUGINS = Path(__file__).resolve().parents[3] / "plugins"
MANIFEST = "s3://lake/cdc/shop/batches/0000000001.00000000000000000004-0000000001.00000000000000000900/manifest.json"


@pytest.fixture
def no_cds_archive(monkeypatch, tmp_path):
    """This machine's class-data archive (``make setup`` writes one) out of the way: the options
    below are the ones without it. The launcher's archive too (``no-launcher.jsa`` beside it)."""
    monkeypatch.setattr(packaging, "SPARK_CDS_ARCHIVE", tmp_path / "no-archive.jsa")
    monkeypatch.setattr(packaging, "SPARK_LAUNCHER_CDS_ARCHIVE", tmp_path / "no-launcher.jsa")
    monkeypatch.delenv(packaging.LAUNCHER_OPTS_ENV, raising=False)
    return tmp_path / "no-archive.jsa"


def test_submit_arguments_carry_no_secret_and_run_the_driver_here(no_cds_archive):
    inputs = JobInputs(py_files="/tmp/x/mysql_cdc.zip", env={SECRETS_ENV: "/tmp/x/job-secrets.json"})
    args = submit_arguments(manifest_arguments(MANIFEST), inputs, "mysql-cdc-merge-shop", {"spark.executor.memory": "2g"},
                            "/opt/spark/bin/spark-submit")
    assert args == {
        "conf": {"spark.executor.memory": "2g",
                 "spark.driver.extraJavaOptions":
                     f"-Dlog4j2.configurationFile=file:{LOG4J2_CONFIG} -XX:TieredStopAtLevel=1"},
        "py_files": "/tmp/x/mysql_cdc.zip",
        "name": "mysql-cdc-merge-shop",
        "application_args": ["--manifest-uri", MANIFEST],
        "env_vars": {SECRETS_ENV: "/tmp/x/job-secrets.json"},
        "spark_binary": "/opt/spark/bin/spark-submit",
        "deploy_mode": "client",
    }


def test_the_driver_logs_warnings_only_and_jits_one_tier_unless_the_user_says_otherwise(no_cds_archive):
    assert LOG4J2_CONFIG.is_file() and "rootLogger.level = warn" in LOG4J2_CONFIG.read_text()
    mine = {"spark.driver.extraJavaOptions": "-XX:+UseG1GC"}
    assert driver_java_options(mine, DEFAULT_LINE)["spark.driver.extraJavaOptions"] == \
        f"-XX:+UseG1GC -Dlog4j2.configurationFile=file:{LOG4J2_CONFIG} -XX:TieredStopAtLevel=1"
    theirs = {"spark.driver.extraJavaOptions":
              "-Dlog4j2.configurationFile=file:/etc/spark/log4j2.properties -XX:TieredStopAtLevel=4"}
    assert driver_java_options(theirs, DEFAULT_LINE) == theirs
    their_log4j2 = {"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:/etc/spark/log4j2.properties"}
    assert driver_java_options(their_log4j2, DEFAULT_LINE)["spark.driver.extraJavaOptions"] == \
        "-Dlog4j2.configurationFile=file:/etc/spark/log4j2.properties -XX:TieredStopAtLevel=1"


def test_the_driver_maps_the_class_data_archive_when_this_machine_has_one(no_cds_archive):
    options = lambda conf, line=DEFAULT_LINE: driver_java_options(conf, line)["spark.driver.extraJavaOptions"]  # noqa: E731
    assert "SharedArchiveFile" not in options({})
    no_cds_archive.write_bytes(b"")
    assert options({}).endswith(f" -XX:SharedArchiveFile={no_cds_archive}")
    # made from the venv's pyspark: a driver of another Spark line would not map its classes
    assert "SharedArchiveFile" not in options({}, "4.1")
    theirs = {"spark.driver.extraJavaOptions": "-XX:SharedArchiveFile=/opt/spark/their.jsa"}
    assert "their.jsa" in options(theirs) and str(no_cds_archive) not in options(theirs)


def test_the_launcher_maps_its_archive_when_this_machine_has_one(no_cds_archive, monkeypatch):
    launcher = no_cds_archive.with_name("no-launcher.jsa")
    assert launcher_env(DEFAULT_LINE) == {}
    launcher.write_bytes(b"")
    assert launcher_env(DEFAULT_LINE) == {"SPARK_LAUNCHER_OPTS": f"-XX:SharedArchiveFile={launcher}"}
    assert launcher_env("4.1") == {}  # made from the venv's pyspark's jars
    inputs = JobInputs(py_files="/tmp/x/mysql_cdc.zip", env={SECRETS_ENV: "/tmp/x/job-secrets.json"})
    assert submit_arguments([], inputs, "n", {}, "/opt/spark/bin/spark-submit")["env_vars"] == {
        "SPARK_LAUNCHER_OPTS": f"-XX:SharedArchiveFile={launcher}", SECRETS_ENV: "/tmp/x/job-secrets.json"}
    # the deployment's own launcher options are theirs: nothing added beside them
    monkeypatch.setenv("SPARK_LAUNCHER_OPTS", "-Xmx256m")
    assert launcher_env(DEFAULT_LINE) == {}


def test_the_archive_make_setup_writes_is_mapped_by_a_real_driver(tmp_path):
    """``-Xshare:on``: the JVM refuses to start unless it maps the archive (the default, auto,
    would quietly run without it). An empty job through spark-submit, with the merge's options;
    its launcher JVM with the launcher's archive, on the same terms."""
    assert packaging.SPARK_CDS_ARCHIVE.is_file(), "make setup writes it (scripts/spark_cds.py)"
    assert packaging.SPARK_LAUNCHER_CDS_ARCHIVE.is_file(), "make setup writes it beside the driver's"
    spark_submit = Path(sys.executable).parent / "spark-submit"
    job = tmp_path / "empty_job.py"
    job.write_text("from pyspark.sql import SparkSession\n"
                   "SparkSession.builder.getOrCreate().range(1).count()\n")
    options = driver_java_options({}, DEFAULT_LINE)["spark.driver.extraJavaOptions"] + " -Xshare:on"
    (launcher_opts,) = launcher_env(DEFAULT_LINE).values()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LAUNCHER_OPTS": f"{launcher_opts} -Xshare:on",
           "PATH": f"{spark_submit.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(spark_submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                           "--driver-java-options", options, str(job)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_the_command_the_spark_provider_builds_from_them(monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    monkeypatch.setenv("AIRFLOW_CONN_CDC_TEST_CLUSTER", json.dumps(
        {"conn_type": "spark", "host": "spark://10.1.2.3", "port": 7077}))
    inputs = JobInputs(py_files="/tmp/x/mysql_cdc.zip", env={SECRETS_ENV: "/tmp/x/job-secrets.json"})
    hook = SparkSubmitHook(conn_id="cdc_test_cluster", **submit_arguments(
        manifest_arguments(MANIFEST), inputs, "mysql-cdc-merge-shop", {}, "/opt/spark/bin/spark-submit"))
    command = hook._build_spark_submit_command("/repo/spark_jobs/merge_batch.py")
    assert command[0] == "/opt/spark/bin/spark-submit"
    assert command[command.index("--master") + 1] == "spark://10.1.2.3:7077"
    assert command[command.index("--deploy-mode") + 1] == "client"
    assert command[command.index("--py-files") + 1] == "/tmp/x/mysql_cdc.zip"
    assert command[-3:] == ["/repo/spark_jobs/merge_batch.py", "--manifest-uri", MANIFEST]
    assert "job-secrets.json" not in " ".join(command)  # the path travels in the environment only


def test_the_job_run_without_spark_gets_the_pipelines_own_properties_only():
    """Without spark-submit the job reads its ``spark.mysql_cdc.*`` properties from its arguments;
    Spark's own (memory, cores) mean nothing to it and stay out."""
    conf = {"spark.executor.memory": "4g", "spark.mysql_cdc.driverNetRows": 0}
    assert job_here_arguments(["s3://b/m1.json", "s3://b/m2.json"], conf) == [
        "--without-spark", "--conf", "spark.mysql_cdc.driverNetRows=0",
        "--manifest-uri", "s3://b/m1.json", "--manifest-uri", "s3://b/m2.json"]


def test_spark_submit_is_found_beside_the_running_python_without_path(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # what `.venv/bin/airflow` sees without the venv on PATH
    assert spark_submit_binary() == str(Path(sys.executable).with_name("spark-submit"))


def test_no_spark_submit_anywhere_fails_at_once_saying_how_to_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    with pytest.raises(AirflowFailException, match="spark-submit was not found on PATH nor beside the running "
                                                    "Python.*pip install pyspark"):
        spark_submit_binary()


def test_the_connection_spark_binary_wins(tmp_path, monkeypatch):
    custom = tmp_path / "spark3-submit"
    custom.write_text("#!/bin/sh\n")
    custom.chmod(0o755)
    assert spark_submit_binary(str(custom)) == str(custom)


def test_operator_templates_and_refuses_a_missing_manifest():
    operator = CdcMergeOperator(task_id="merge_batch", manifest_uri="None", storage_uri="file:///tmp/x",
                                conf={"spark.executor.memory": "{{ params.memory }}"})
    assert {"manifest_uri", "conf", "spark_conn_id"} <= set(operator.template_fields)
    with pytest.raises(AirflowFailException, match="the extract task returned no batch"):
        operator.execute({})
    operator.on_kill()  # nothing submitted: nothing to kill, no error
    assert os.environ.get(SECRETS_ENV) is None  # the secrets path is never put into Airflow's own environment


def test_a_merge_dies_with_the_task_process_that_started_it(tmp_path):
    """A task process killed outright (no on_kill) must not leave its merge running: the launcher
    makes the kernel kill spark-submit with it, and the Spark driver's Python and workers follow."""
    import signal
    import subprocess
    import time

    job = tmp_path / "endless_job.py"
    job.write_text(
        "import time\nfrom pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "def slow(it):\n    time.sleep(600)\n    yield from it\n"
        "spark.range(0, 2, 1, 2).mapInArrow(slow, 'id long').collect()\n"
    )
    task = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "from pathlib import Path\n"
        "from mysql_cdc.hooks.merge_job import bound_to_this_process, spark_submit_binary\n"
        f"launcher = bound_to_this_process(spark_submit_binary(), Path({str(tmp_path)!r}))\n"
        f"subprocess.Popen([launcher, '--master', 'local[2]', {str(job)!r}])\n"
        "time.sleep(600)\n"
    )], env={**os.environ, "PYTHONPATH": str(PLUGINS), "PYSPARK_PYTHON": sys.executable},
        stdout=open(tmp_path / "task.log", "w"), stderr=subprocess.STDOUT)

    def running() -> list[str]:
        """spark-submit's JVM and the driver (their arguments name the job) and every process under them."""
        rows = [line.split(None, 2) for line in subprocess.run(
            ["ps", "-ww", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout.splitlines()[1:]]
        ours = {pid for pid, _, args in rows if str(job) in args}
        grew = True
        while grew:
            below = {pid for pid, ppid, _ in rows if ppid in ours} - ours
            grew, ours = bool(below), ours | below
        return [f"{pid} {args}" for pid, _, args in rows if pid in ours]

    try:
        deadline = time.monotonic() + 120
        # wait until the Spark tasks run in Python workers: the whole tree is there to outlive the task
        while not any("pyspark.daemon" in line for line in running()):
            assert task.poll() is None, f"the task process ended: {task.returncode}"
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.5)
        task.send_signal(signal.SIGKILL)  # the task dies without a word
        deadline = time.monotonic() + 30
        while running():
            assert time.monotonic() < deadline, f"the merge outlived its task: {running()}"
            time.sleep(0.5)
    finally:
        task.kill()
        for line in running():
            os.kill(int(line.split()[0]), signal.SIGKILL)


def test_a_merge_without_spark_dies_with_the_task_process_that_started_it(tmp_path):
    """The job run without spark-submit (``merge: {spark: when_needed}``) is bound to the task
    process the same way: killed outright, the task takes the job with it."""
    import signal
    import subprocess
    import time

    job = tmp_path / "endless_merge.py"
    job.write_text("import time\ntime.sleep(600)\n")
    task = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "from pathlib import Path\n"
        "from mysql_cdc.hooks.merge_job import bound_to_this_process\n"
        f"launcher = bound_to_this_process(sys.executable, Path({str(tmp_path)!r}))\n"
        f"subprocess.Popen([launcher, {str(job)!r}])\n"
        "time.sleep(600)\n"
    )], env={**os.environ, "PYTHONPATH": str(PLUGINS)})

    def running() -> bool:
        return str(job) in subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout

    try:
        deadline = time.monotonic() + 30
        while not running():
            assert task.poll() is None and time.monotonic() < deadline, "the job never started"
            time.sleep(0.2)
        task.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while running():
            assert time.monotonic() < deadline, "the merge outlived its task"
            time.sleep(0.2)
    finally:
        task.kill()
