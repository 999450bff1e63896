"""What ``spark-submit`` needs to run the merge job with the same contract code as the Airflow side.

``build_py_files`` zips this very package (``mysql_cdc``) for ``--py-files``: the job imports the
contracts from the zip, so there is one definition of each, shipped with every submit.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# spark_jobs/ sits beside plugins/ in the repository and in the docker-compose mounts;
# deployments that place it elsewhere set MYSQL_CDC_SPARK_JOBS_DIR.
SPARK_JOBS_DIR = Path(os.environ.get("MYSQL_CDC_SPARK_JOBS_DIR", PACKAGE_DIR.parent.parent / "spark_jobs"))
MERGE_JOB = SPARK_JOBS_DIR / "merge_batch.py"


def build_py_files(dest_dir: str | os.PathLike) -> str:
    """Zip the ``mysql_cdc`` package into ``dest_dir``; returns the zip's path."""
    dest = Path(dest_dir) / "mysql_cdc.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(PACKAGE_DIR.rglob("*.py")):
            zf.write(path, Path("mysql_cdc") / path.relative_to(PACKAGE_DIR))
    return str(dest)
