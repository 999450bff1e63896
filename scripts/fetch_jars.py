#!/usr/bin/env python3
"""Fetch the Spark packages a Delta Lake follower needs into the project (``make jars``).

    python scripts/fetch_jars.py mk/spark-jars.txt .local/jars

Each line of the list is a Maven coordinate ``group:artifact:version``; its jar is downloaded from
Maven Central (or ``$MAVEN_REPO``, an internal mirror), checked against the repository's SHA-1
and written atomically. A jar already present with the right checksum is kept. The merge job
submits the directory's jars with ``--jars`` (``mysql_cdc.kinds.delta.sink.jars``), so no Spark job
downloads anything at submit time and a cluster without internet runs the same job.
"""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.request
from pathlib import Path

DEFAULT_REPO = "https://repo1.maven.org/maven2"


def coordinates(list_file: Path) -> list[tuple[str, str, str]]:
    found = []
    for number, line in enumerate(list_file.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(":")
        if len(parts) != 3 or not all(parts):
            raise SystemExit(f"{list_file}:{number}: expected group:artifact:version, got {line!r}")
        found.append((parts[0], parts[1], parts[2]))
    return found


def jar_name(artifact: str, version: str) -> str:
    return f"{artifact}-{version}.jar"


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:
        return response.read()


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def install(repo: str, group: str, artifact: str, version: str, target: Path) -> str:
    url = f"{repo}/{group.replace('.', '/')}/{artifact}/{version}/{jar_name(artifact, version)}"
    expected = fetch(url + ".sha1").decode().split()[0].strip().lower()
    path = target / jar_name(artifact, version)
    if path.is_file() and sha1(path.read_bytes()) == expected:
        return "kept"
    data = fetch(url)
    if sha1(data) != expected:
        raise SystemExit(f"{url}: SHA-1 {sha1(data)} differs from the repository's {expected}; not installed")
    tmp = path.with_suffix(".jar.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return f"fetched ({len(data) >> 10} KiB)"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    list_file, target = Path(argv[0]), Path(argv[1])
    target.mkdir(parents=True, exist_ok=True)
    repo = os.environ.get("MAVEN_REPO", DEFAULT_REPO).rstrip("/")
    wanted = coordinates(list_file)
    for group, artifact, version in wanted:
        try:
            outcome = install(repo, group, artifact, version, target)
        except OSError as exc:
            raise SystemExit(f"cannot fetch {group}:{artifact}:{version} from {repo}: {exc} "
                             "(set MAVEN_REPO to a reachable mirror of Maven Central)") from None
        print(f"{group}:{artifact}:{version}: {outcome}")
    keep = {jar_name(a, v) for _, a, v in wanted}
    for stale in target.glob("*.jar"):
        if stale.name not in keep:  # a version the list no longer names
            stale.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
