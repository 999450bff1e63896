"""The docs' commands work as written: ``docs/by-hand.md``'s merge job, run through its own shell
block against a real pipeline (MariaDB leader and follower, the suite's S3 endpoint), with only
the placeholders filled in (the follower's address and password, the bucket's keys, the batch)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from merge_helpers import assert_same_database

REPO = Path(__file__).resolve().parents[1]


def _merge_block() -> str:
    page = (REPO / "docs" / "by-hand.md").read_text()
    section = page[page.index("## Running the merge job by hand"):]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def test_the_merge_by_hand_runs_as_written(make_pipeline, s3_bucket, leader, follower, tmp_path):
    pipeline = make_pipeline(s3_bucket=s3_bucket)
    batch = pipeline.capture([f"CREATE DATABASE {pipeline.database}",
                              f"CREATE TABLE {pipeline.database}.t (id INT PRIMARY KEY, v VARCHAR(8))",
                              f"INSERT INTO {pipeline.database}.t VALUES (1, 'a'), (2, 'b')"])
    block = _merge_block()
    documented = json.loads(re.search(r"<<'JSON'\n(.*?)\nJSON\n", block, re.S).group(1))
    # the documented shape is the one the job reads: fill in this pipeline's values, key for key
    ours = pipeline.secrets.storage.to_json()
    assert set(documented["sink"]["settings"]) <= set(vars(pipeline.follower_settings))
    assert set(documented["storage"]["options"]) <= set(ours["options"])
    documented["sink"]["settings"] = {k: getattr(pipeline.follower_settings, k) for k in documented["sink"]["settings"]}
    documented["storage"] = ours
    script = (block.replace(re.search(r"<<'JSON'\n.*?\nJSON\n", block, re.S).group(0),
                            f"<<'JSON'\n{json.dumps(documented)}\nJSON\n")
              .replace("/tmp/", f"{tmp_path}/").replace('"/tmp"', f'"{tmp_path}"')
              .replace("s3://bucket/cdc/shop/batches/<batch id>/manifest.json", pipeline.manifest_uri(batch)))
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert pipeline.follower_settings.password not in result.stdout + result.stderr
    assert_same_database(leader, follower, pipeline.database)
    assert pipeline.checkpoint().position == batch.end
