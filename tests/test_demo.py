"""`make demo` as a user runs it: the script end to end (its own servers, real `airflow dags test`
runs), so a change to the DAGs cannot leave the first command of the README broken."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_make_demo_ends_equal():
    # a user's shell: none of the Airflow settings the test session's own fixtures export
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CDC_", "MYSQL_CDC"))}
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert out.count("check_lag=success") == 3 and "verify_follower=success" in out, out[-4000:]
    assert "0 bytes and 0.0 seconds behind" in out and "follower equals leader: 2 tables" in out, out[-4000:]
    assert out.rstrip().endswith("EQUAL: the follower equals the leader"), out[-4000:]


@pytest.mark.parametrize(("follower", "described", "table"), [
    ("delta", "follower Delta Lake at file://", "the Delta table flvDb.pet"),
    ("iceberg", "follower Iceberg catalog 'lake' in iceberg_catalog", "the Iceberg table flvDb.pet"),
])
def test_make_demo_with_a_lake_follower_ends_equal(follower, described, table):
    """`CDC_DEMO_FOLLOWER=delta|iceberg make demo`: the same runs into a Delta Lake or Iceberg tables,
    the leader's tables read back at the consistent cut (delta-rs, pyiceberg) and verified."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CDC_", "MYSQL_CDC"))}
    env["CDC_DEMO_FOLLOWER"] = follower
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert described in out and out.count("check_lag=success") == 3, out[-4000:]
    assert "verify_follower=success" in out and "follower equals leader: 2 tables" in out, out[-4000:]
    assert table in out and "0 bytes and 0.0 seconds behind" in out, out[-4000:]
    assert out.rstrip().endswith("EQUAL: the follower equals the leader"), out[-4000:]
