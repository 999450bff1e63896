"""The job's driver imports pyspark and py4j from their installed, compiled copies when spark-submit's
zips hold the same versions (``mysql_cdc.pyspark_path``), and from the zips otherwise."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from mysql_cdc.pyspark_path import reordered

from spark_under_test import SPARK_SUBMIT

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


def _package(root: Path, name: str, version: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    (root / name / "version.py").write_text(f'__version__ = "{version}"\n')
    return root


def _zip(path: Path, name: str, version: str) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(f"{name}/version.py", f'__version__ = "{version}"\n')
    return str(path)


def test_zips_of_the_installed_versions_move_behind_the_installed_packages(tmp_path):
    site = str(_package(_package(tmp_path / "site", "pyspark", "4.2.0"), "py4j", "0.10.9.9"))
    pyspark_zip = _zip(tmp_path / "pyspark.zip", "pyspark", "4.2.0")
    py4j_zip = _zip(tmp_path / "py4j-0.10.9.9-src.zip", "py4j", "0.10.9.9")
    path, moved = reordered(["/job/mysql_cdc.zip", pyspark_zip, py4j_zip, site])
    assert path == ["/job/mysql_cdc.zip", site, pyspark_zip, py4j_zip]
    assert moved == [pyspark_zip, py4j_zip]


def test_a_zip_of_another_version_stays_first(tmp_path):
    site = str(_package(_package(tmp_path / "site", "pyspark", "4.2.0"), "py4j", "0.10.9.9"))
    pyspark_zip = _zip(tmp_path / "pyspark.zip", "pyspark", "4.1.1")  # another Spark's distribution
    py4j_zip = _zip(tmp_path / "py4j-0.10.9.9-src.zip", "py4j", "0.10.9.9")
    path, moved = reordered([pyspark_zip, py4j_zip, site])
    assert path == [pyspark_zip, site, py4j_zip]
    assert moved == [py4j_zip]


def test_nothing_installed_keeps_the_path(tmp_path):
    pyspark_zip = _zip(tmp_path / "pyspark.zip", "pyspark", "4.2.0")
    path = [pyspark_zip, str(tmp_path / "empty")]
    assert reordered(path) == (path, [])


DRIVER = """
import sys
from mysql_cdc.pyspark_path import prefer_installed
prefer_installed()
import pyspark, py4j
from pyspark import SparkContext
SparkContext._ensure_initialized()  # the driver's gateway works with the modules imported
print("imported", pyspark.__file__, py4j.__file__, SparkContext._jvm.java.lang.System.getProperty("spark.master"))
"""


def test_a_submitted_driver_imports_the_installed_pyspark(tmp_path):
    """Real spark-submit (the line under test): its zips are on the driver's path, and the driver
    imports the installed pyspark and py4j, not the zips' (which it compiles at every start)."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = subprocess.run([str(SPARK_SUBMIT), "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(script)],
                         capture_output=True, text=True, timeout=300,
                         env={**_env(), "PYTHONPATH": f"{PLUGINS}:{_env().get('PYTHONPATH', '')}"})
    assert out.returncode == 0, out.stdout + out.stderr
    line = next(line for line in out.stdout.splitlines() if line.startswith("imported "))
    _, pyspark_file, py4j_file, master = line.split()
    assert ".zip" not in pyspark_file and ".zip" not in py4j_file, line
    assert master == "local[1]"


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
