"""Which Spark the merge task submits to (``mysql_cdc.spark_lines``): the version read from the
Spark itself, by its layout or by asking it, and a line the job is not tested on refused."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from mysql_cdc.kinds.delta.submit import JARS_ENV, delta_jars
from mysql_cdc.retry_policy import is_permanent
from mysql_cdc.spark_lines import DEFAULT_LINE, TESTED_LINES, UntestedSparkError, spark_line, spark_version, spark_target
from spark_under_test import SPARK, SPARK_SUBMIT, spark_distribution

REPO = Path(__file__).resolve().parent.parent
VENV_SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
# the venv's pyspark, as requirements.txt pins it (the test process may import another line's:
# `make test-spark`)
VENV_PYSPARK = re.search(r"^pyspark==(\S+)", (REPO / "requirements.txt").read_text(), re.M).group(1)


def test_the_venvs_spark_is_the_default_line_and_read_without_starting_it():
    assert spark_version(str(VENV_SPARK_SUBMIT)) == VENV_PYSPARK
    assert spark_target(str(VENV_SPARK_SUBMIT)).line == DEFAULT_LINE


def test_a_distribution_is_read_from_its_jars_without_running_it(tmp_path):
    spark = spark_distribution(tmp_path / "spark-4.1.4-bin-hadoop3", "4.1.4")
    target = spark_target(str(spark.binary))
    assert (target.version, target.line) == ("4.1.4", "4.1")
    assert not spark.ran()


def test_a_launcher_of_another_layout_is_asked_for_its_version(tmp_path):
    """A wrapper script (as vendors and images install them) in front of the Spark under test's
    spark-submit: no jars beside it, so the Spark is asked (a real JVM starts)."""
    wrapper = tmp_path / "bin" / "spark-submit"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nPATH="{VENV_SPARK_SUBMIT.parent}:$PATH" exec "{SPARK_SUBMIT}" "$@"\n')
    wrapper.chmod(0o755)
    assert spark_version(str(wrapper)) == SPARK.version


@pytest.mark.parametrize("version", ["3.5.6", "4.3.0"])
def test_an_untested_line_is_refused_naming_the_tested_ones(tmp_path, version):
    spark = spark_distribution(tmp_path / f"spark-{version}", version)
    with pytest.raises(UntestedSparkError) as refused:
        spark_target(str(spark.binary))
    assert str(refused.value) == (
        f"{spark.binary} runs Spark {version}; the merge job is tested on Spark {', '.join(TESTED_LINES)} "
        "(docs/spark.md): set the Spark connection's spark-binary to the spark-submit of one of those lines "
        f"(pip install 'pyspark=={DEFAULT_LINE}.*' brings one)")
    assert is_permanent(refused.value)  # the task fails at once: no retry changes the Spark
    assert not spark.ran()


def test_a_launcher_that_says_no_version_is_refused_with_what_it_printed(tmp_path):
    launcher = tmp_path / "spark-submit"
    launcher.write_text("#!/bin/sh\necho 'Error: JAVA_HOME is not set' >&2\nexit 1\n")
    launcher.chmod(0o755)
    with pytest.raises(UntestedSparkError, match=r"--version did not print a Spark version \(exit 1\).*"
                                                 r"JAVA_HOME is not set"):
        spark_version(str(launcher))


def test_every_tested_line_has_its_pinned_jars_and_the_others_a_pyspark():
    for line in TESTED_LINES:
        jars = (REPO / "mk" / "spark-lines" / f"{line}.txt").read_text()
        assert f"io.delta:delta-spark_{line}_2.13:" in jars
    pins = dict(line.split() for line in (REPO / "mk" / "spark-lines" / "pyspark.txt").read_text().splitlines()
                if line.strip() and not line.startswith("#"))
    assert set(pins) == set(TESTED_LINES) - {DEFAULT_LINE}
    assert all(spark_line(pin.removeprefix("pyspark==")) == line for line, pin in pins.items())


def test_a_line_without_its_delta_jars_names_the_command_that_fetches_them(tmp_path, monkeypatch):
    monkeypatch.setenv(JARS_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=rf"no Delta Lake jars for Spark 4\.1 in {tmp_path}/spark-4\.1: run "
                                                r"`make spark-line SPARK=4\.1`"):
        delta_jars("4.1")
    with pytest.raises(FileNotFoundError, match=r"run `make jars`"):
        delta_jars(DEFAULT_LINE)
