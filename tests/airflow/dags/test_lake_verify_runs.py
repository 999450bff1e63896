"""The verify DAG of a lake pipeline, each lake kind's, run as users run it: it compares the
follower at its consistent cut with the leader, names a drifted table and the manual run that
repairs it, and that run's resnapshot leaves the follower equal again."""

from __future__ import annotations

import json
import re

SUCCESS, FAILED = "success", "failed"


def test_verify_dag_compares_the_lake_and_its_resnapshot_repairs_drift(dag_runner, lake_kind_dag, leader):
    name, pipeline, assert_equals_leader = lake_kind_dag
    db = pipeline.database
    assert dag_runner.run(name).tasks["merge_batch"] == SUCCESS
    clean = dag_runner.run(f"{name}_verify")
    assert clean.tasks == {"verify_follower": SUCCESS}, clean.log_file
    assert "follower equals leader: 2 tables, 3 chunks, 3 leader rows" in clean.log  # t by id: 2 chunks

    leader.run_sql(["SET sql_log_bin = 0", f"UPDATE {db}.t SET v = 'lost' WHERE id = 2"])  # never in the binlog
    drift = dag_runner.run(f"{name}_verify")
    assert drift.tasks == {"verify_follower": FAILED}, drift.log_file
    assert f"DRIFT in {db}.t " in drift.log
    assert [(c.table, c.lo, c.hi) for c in pipeline.state.latest_verification(name).drifted] == [(f"{db}.t", 2, None)]
    conf = json.loads(re.search(r"repair with a manual run with conf (\{.*?\]\})", drift.log)[1])
    assert conf == {"resnapshot": [f"{db}.t"]}

    repair = dag_runner.run(name, conf=conf)  # the message, followed literally
    assert repair.tasks["merge_batch"] == SUCCESS, repair.log_file
    assert_equals_leader(pipeline)
    assert dag_runner.run(f"{name}_verify").tasks == {"verify_follower": SUCCESS}
