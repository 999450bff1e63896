#!/usr/bin/env python3
"""Write the Spark driver's class-data sharing (CDS) archive: ``spark_cds.py OUT``.

A merge is a fresh driver JVM, and on 2 cores about half of a small merge's spark-submit is that JVM
loading and verifying Spark's ~10,000 classes (13-14 s of CPU for an empty job here; 7 s with the
archive). The archive holds those classes already parsed: the JVM maps it instead. It is specific
to this JDK build and this Spark installation (the classpath), so it is made on the machine that
runs the drivers, by running a small job once with ``-XX:ArchiveClassesAtExit``
(``spark_cds_warmup.py``). ``mysql_cdc.packaging`` adds ``-XX:SharedArchiveFile`` to every submit
when the archive exists; a JVM that cannot use it (another JDK build) says so and runs without it.

The same run writes ``launcher.jsa`` beside it: the archive of the launcher JVM that spark-submit
starts first to build the driver's command (``SPARK_LAUNCHER_OPTS``; ``packaging.launcher_env``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "plugins"))

from mysql_cdc.packaging import LAUNCHER_OPTS_ENV, launcher_archive  # noqa: E402 - after the path


def main(out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    launcher_out = launcher_archive(out)
    launcher_partial = launcher_out.with_suffix(".partial")
    for stale in (partial, launcher_partial):
        stale.unlink(missing_ok=True)
    venv_bin = Path(sys.executable).parent
    # spark-class puts SPARK_LAUNCHER_OPTS on the launcher JVM's command line: its archive is
    # dumped by the same submit
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYSPARK_PYTHON": sys.executable, LAUNCHER_OPTS_ENV: f"-XX:ArchiveClassesAtExit={launcher_partial}"}
    env.pop("PYTHONPATH", None)
    # the same JIT option as the merge's (packaging.DRIVER_DEFAULTS): an archive dumped under other
    # options is still valid, this keeps the dump run as short as a merge's start
    cmd = [str(venv_bin / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--driver-java-options", f"-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={partial}",
           str(HERE / "spark_cds_warmup.py")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    # the dump warns about each class it cannot archive (Delta's jars, loaded by Spark's own class
    # loader; generated classes): expected, so the output is shown only when the run failed
    if done.returncode != 0 or not partial.is_file() or not launcher_partial.is_file():
        sys.stderr.write((done.stdout + done.stderr)[-4000:])
        print(f"spark_cds: the warm-up job failed (exit {done.returncode}); no archive written", file=sys.stderr)
        return 1
    launcher_partial.replace(launcher_out)
    partial.replace(out)  # last: make's target, so a run that stopped before it is made again
    print(f"spark_cds: wrote {out} ({out.stat().st_size // 2**20} MiB) and {launcher_out.name} "
          f"({launcher_out.stat().st_size // 2**10} KiB)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} OUT.jsa")
    raise SystemExit(main(Path(sys.argv[1])))
