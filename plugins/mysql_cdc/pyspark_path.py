"""Where a Spark job's driver imports pyspark and py4j from: their compiled copies when it has them.

spark-submit puts ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's ``py4j-<version>-src.zip``
first on the Python driver's path. Python compiles every module it imports from a zip afresh
(zipimport writes no bytecode cache), which cost each of our jobs 0.6-0.8 s of its start on this
machine (2 cores; a bare driver importing the merge's modules: 2.0 s against 2.7-3.1 s). pip's
pyspark is a whole Spark distribution whose zips hold the very modules installed, compiled, beside
them; so when the driver's Python has the same version of a package installed, the zip moves
behind it on the path and the installed copy is imported. A zip of another version (a Spark
distribution newer or older than the driver's pyspark) stays first, as spark-submit put it.

Plain Python only: the job's entry calls ``prefer_installed`` before anything imports pyspark.
"""

from __future__ import annotations

import importlib.machinery
import logging
import re
import sys
import zipfile
from pathlib import Path

log = logging.getLogger("mysql_cdc.merge")

# the zips spark-submit puts on the driver's path -> the package each holds
_ZIPPED = {"pyspark": re.compile(r"(^|/)pyspark\.zip$"), "py4j": re.compile(r"(^|/)py4j-[^/]*-src\.zip$")}


def version_source(root: str | Path, package: str) -> bytes | None:
    """The bytes of ``<package>/version.py`` under ``root``: a directory of installed packages, or a
    zip of them. None when there is none."""
    member = f"{package}/version.py"
    try:
        if zipfile.is_zipfile(root):
            with zipfile.ZipFile(root) as archive:
                return archive.read(member)
        return (Path(root) / member).read_bytes()
    except (KeyError, OSError):
        return None


def installed_root(package: str, path: list[str]) -> str | None:
    """The directory of ``path`` (no zips) that holds ``package`` installed, as the import system
    finds it; None when none does."""
    spec = importlib.machinery.PathFinder.find_spec(package, [p for p in path if not zipfile.is_zipfile(p)])
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


def reordered(path: list[str]) -> tuple[list[str], list[str]]:
    """``path`` with each of spark-submit's zips moved behind the rest when an installed copy of its
    package has the same ``version.py``; and the zips moved."""
    moved = []
    for package, name in _ZIPPED.items():
        zips = [p for p in path if name.search(p)]
        root = installed_root(package, path)
        if root is None:
            continue
        installed = version_source(root, package)
        moved += [z for z in zips if installed is not None and version_source(z, package) == installed]
    return [p for p in path if p not in moved] + moved, moved


def prefer_installed() -> None:
    """Reorder this interpreter's ``sys.path`` (``reordered``); a no-op once pyspark is imported."""
    if "pyspark" in sys.modules or "py4j" in sys.modules:
        return  # too late: the modules already imported stay where they came from
    sys.path[:], moved = reordered(sys.path)
    if moved:
        log.debug("pyspark and py4j imported from their installed copies, not %s", ", ".join(moved))
