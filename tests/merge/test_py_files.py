"""The job's ``--py-files`` zip (``packaging.build_py_files``): the package's sources with their
bytecode, which a driver imports without compiling, and which follows a changed source."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from mysql_cdc.packaging import PACKAGE_DIR, build_py_files

IMPORTED = "import mysql_cdc.answer as m; print(m.__file__, m.ANSWER)"


def _package(root: Path, answer: int) -> Path:
    package = root / "mysql_cdc"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "answer.py").write_text(f"ANSWER = {answer}\n")
    return package


def _run_from(zip_path: str) -> tuple[str, str]:
    out = subprocess.run([sys.executable, "-c", IMPORTED], env={**os.environ, "PYTHONPATH": zip_path},
                         capture_output=True, text=True, check=True)
    return tuple(out.stdout.split())


def test_modules_are_imported_from_their_bytecode(tmp_path):
    package = _package(tmp_path / "src", 41)
    zip_path = build_py_files(tmp_path, package)
    with zipfile.ZipFile(zip_path) as archive:
        assert {"mysql_cdc/answer.py", "mysql_cdc/answer.pyc"} <= set(archive.namelist())
    where, answer = _run_from(zip_path)
    assert where == f"{zip_path}/mysql_cdc/answer.pyc" and answer == "41"


def test_a_changed_source_gets_its_own_bytecode(tmp_path):
    package = _package(tmp_path / "src", 41)
    build_py_files(tmp_path, package)
    source = package / "answer.py"
    source.write_text("ANSWER = 42000\n")  # another size, and another time
    os.utime(source, (source.stat().st_atime + 10, source.stat().st_mtime + 10))
    where, answer = _run_from(build_py_files(tmp_path, package))
    assert where.endswith(".pyc") and answer == "42000"


def test_a_package_whose_cache_cannot_be_written_is_zipped_as_sources(tmp_path):
    package = _package(tmp_path / "src", 7)
    (package / "__pycache__").write_text("not a directory")  # no bytecode can be cached there
    zip_path = build_py_files(tmp_path, package)
    with zipfile.ZipFile(zip_path) as archive:
        assert "mysql_cdc/answer.pyc" not in archive.namelist()
    where, answer = _run_from(zip_path)
    assert where.endswith("answer.py") and answer == "7"


def test_the_real_package_zips_every_module_with_its_bytecode(tmp_path):
    with zipfile.ZipFile(build_py_files(tmp_path)) as archive:
        names = set(archive.namelist())
    sources = {str(Path("mysql_cdc") / p.relative_to(PACKAGE_DIR)) for p in PACKAGE_DIR.rglob("*.py")}
    assert sources <= names
    assert {s[:-3] + ".pyc" for s in sources} <= names
