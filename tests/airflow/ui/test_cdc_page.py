"""The CDC pipelines page and ``GET /cdc/api/pipelines``, served by a real ``airflow api-server``
with the plugin, read by a tool (HTTP with a token) and by a person (headless Debian chromium via
Playwright, logged in through Airflow's login form), after real DAG runs of a pipeline."""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from playwright.sync_api import expect

from mysql_cdc.capture.leader import Leader
from mysql_cdc.server_state.checkpoint import read_checkpoint
from mysql_cdc.server_state.history import read_history
from mysql_cdc.mysql_server import MySQLSettings

PIPELINE = "cdc_ui"
SUCCESS = "success"


@dataclass
class Shown:
    db: str
    leader: object
    leader_settings: MySQLSettings
    follower_settings: MySQLSettings
    storage: Path
    run_id: str | None = None

    def batch_bytes(self) -> tuple[int, int]:
        """The pipeline's batches in the store: how many, and their bytes."""
        root = self.storage / PIPELINE / "batches"
        return (sum(1 for d in root.iterdir() if d.is_dir()),
                sum(f.stat().st_size for f in root.rglob("*") if f.is_file()))

    def checkpoint(self):
        conn = self.follower_settings.connect()
        try:
            return read_checkpoint(conn, PIPELINE).position
        finally:
            conn.close()

    def leader_position(self):
        with Leader(self.leader_settings) as server:
            return server.current_position()

    def history_range(self) -> tuple[str, str]:
        """The first merged batch's start and the checkpoint: a range the follower has."""
        conn = self.follower_settings.connect()
        try:
            first = min(r.start_position for r in read_history(conn, PIPELINE) if r.status == "merged")
            return first, str(read_checkpoint(conn, PIPELINE).position)
        finally:
            conn.close()


@pytest.fixture(scope="module")
def shown(leader, leader_user, follower_user, tmp_path_factory, airflow_connections, dag_runner_factory) -> Shown:
    """A pipeline with one merged batch and one verification, as the page and the API show it."""
    db = f"ui_{uuid.uuid4().hex[:8]}"
    settings = MySQLSettings(**leader_user)
    with Leader(settings) as server:
        start = str(server.current_position())
    storage = tmp_path_factory.mktemp("ui-batches")
    Path(os.environ["CDC_PIPELINES_FILE"]).write_text(yaml.safe_dump({"pipelines": [
        {"name": PIPELINE, "leader_conn_id": "mysql_leader", "follower_conn_id": "mysql_follower",
         "storage_uri": f"file://{storage}", "include": [f"{db}.*"], "schedule": None, "start_position": start,
         "wait_timeout": 3, "poke_interval": 1, "retries": 0, "verify": {"schedule": None, "chunk_rows": 2}},
    ]}))
    leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, amount INT)",
                    *(f"INSERT INTO {db}.orders VALUES ({i}, {i * 5})" for i in range(1, 5))])
    runner = dag_runner_factory()
    first = runner.run(PIPELINE)
    assert first.tasks["merge_batch"] == SUCCESS, first.log_file
    leader.run_sql([f"UPDATE {db}.orders SET amount = amount + 1 WHERE id > 2",
                    *(f"INSERT INTO {db}.orders VALUES ({i}, {i * 5})" for i in range(5, 8))])
    run = runner.run(PIPELINE)  # a second batch: two points on the lag chart
    assert run.tasks["merge_batch"] == SUCCESS, run.log_file
    assert runner.run(f"{PIPELINE}_verify").tasks == {"verify_follower": SUCCESS}
    return Shown(db, leader, settings, MySQLSettings(**follower_user), storage, run.run_id)


def test_the_api_needs_airflow_credentials(api_server, shown):
    status, body = api_server.get("/cdc/api/pipelines")
    assert (status, body) == (401, {"detail": "log in to Airflow first"})


def test_the_api_answers_from_the_servers(api_server, shown):
    token = api_server.token()
    status, body = api_server.get("/cdc/api/pipelines", token)
    assert status == 200
    (pipeline,) = body
    checkpoint = shown.checkpoint()
    assert pipeline["name"] == PIPELINE and pipeline["error"] is None
    assert pipeline["checkpoint_position"] == str(checkpoint) == pipeline["leader_position"]
    assert (pipeline["bytes_behind"], pipeline["seconds_behind"]) == (0, 0.0)
    batch = pipeline["last_batch"]
    # 2 updates + 3 inserts (an update is one change row)
    assert (batch["run_id"], batch["status"], batch["rows_in"], batch["net_rows"]) == (shown.run_id, "merged", 5, 5)
    assert batch["end_position"] == str(checkpoint) and batch["merge_seconds"] > 0
    assert pipeline["verification"]["status"] == "ok" and pipeline["verification"]["tables"] == 1
    # what the last run's retire_batches kept (the default 7d: every batch of these minutes)
    stored = pipeline["batch_storage"]
    assert (stored["retain"], stored["deleted_batches"]) == ("7d", 0)
    assert (stored["kept_batches"], stored["kept_bytes"]) == shown.batch_bytes() and stored["kept_bytes"] > 0

    # the leader moves and nothing merges: the next answer says so at once (no cache)
    shown.leader.run_sql([f"INSERT INTO {shown.db}.orders VALUES (9, 45)"])
    moved = shown.leader_position()
    (pipeline,) = api_server.get("/cdc/api/pipelines", token)[1]
    assert pipeline["leader_position"] == str(moved)
    assert pipeline["bytes_behind"] == moved.offset - checkpoint.offset > 0
    assert pipeline["seconds_behind"] is not None and pipeline["seconds_behind"] >= 0


def test_the_cli_lag_gives_the_apis_figures(api_server, shown):
    """``python -m mysql_cdc.cli lag``, run as a person runs it where Airflow runs (its connections
    in the environment): the same figures as the API, as JSON and as a table."""
    import json
    import subprocess
    import sys

    plugins = Path(__file__).resolve().parents[3] / "plugins"
    env = {**os.environ, "PYTHONPATH": str(plugins)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mysql_cdc.cli", "lag", *args], env=env, capture_output=True,
                              text=True, timeout=120)

    (api,) = api_server.get("/cdc/api/pipelines", api_server.token())[1]
    as_json = cli("--pipeline", PIPELINE, "--json")
    assert as_json.returncode == 0, as_json.stderr
    mine = json.loads(as_json.stdout)
    for body in (mine, api):  # the one figure that moves with the clock
        body.pop("seconds_behind")
    assert mine == api

    table = cli()
    assert table.returncode == 0, table.stderr
    header, rule, row = table.stdout.splitlines()
    assert header.split()[:3] == ["pipeline", "checkpoint", "leader"] and set(rule) <= {"-", " "}
    assert row.startswith(PIPELINE) and api["checkpoint_position"] in row and api["leader_position"] in row
    assert f"{api['bytes_behind']:,}" in row and "stream merged (5 rows)" in row and "ok at" in row

    unknown = cli("--pipeline", "no_such_pipeline")
    assert unknown.returncode == 2 and "no pipeline named 'no_such_pipeline'" in unknown.stderr


def test_the_page_shows_the_pipeline_and_re_snapshots_chosen_tables(logged_in_page, api_server, shown,
                                                                      tmp_path_factory):
    page = logged_in_page
    section = page.locator(f"#pipeline-{PIPELINE}")
    assert section.locator("[data-figure=checkpoint_position] .value").inner_text() == str(shown.checkpoint())
    assert section.locator("[data-figure=leader_position] .value").inner_text() == str(shown.leader_position())
    assert section.locator("tr.batch").count() == 2
    assert section.locator("tr.batch a").first.inner_text() == shown.run_id  # newest first
    assert section.locator("p.verification").inner_text().startswith("OK at ")
    assert section.locator("svg.lag-chart circle").count() == 2  # one point per merged batch
    batches, size = shown.batch_bytes()
    storage = section.locator("[data-figure=batch_storage]")
    assert storage.locator(".value").inner_text() == f"{size / 2**20:,.1f} MiB"
    assert storage.locator(".label").inner_text().startswith(f"in {batches} change batches (retain 7d; 0 batches deleted at ")
    page.screenshot(path=str(tmp_path_factory.getbasetemp() / "cdc-page.png"), full_page=True)

    # the browser refuses what is not a db.table glob before anything is sent
    tables = section.locator("form.resnapshot input[name=tables]")
    tables.fill("orders")
    assert tables.evaluate("input => input.checkValidity()") is False
    tables.fill(f"{shown.db}.orders")
    section.locator("form.resnapshot button").click()
    page.wait_for_selector(".message")
    message = page.locator(".message").inner_text()
    found = re.fullmatch(rf"Triggered {PIPELINE} run (\S+) re-copying {shown.db}\.orders", message)
    assert found, message
    assert triggered_conf(found[1]) == {"resnapshot": [f"{shown.db}.orders"]}


def triggered_conf(run_id: str) -> dict:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return session.scalars(select(DagRun.conf).where(DagRun.dag_id == PIPELINE, DagRun.run_id == run_id)).one()


def test_airflow_navigation_links_the_page(logged_in_page, api_server, shown):
    page = logged_in_page
    page.goto(f"{api_server.url}/")
    page.get_by_role("link", name=re.compile("CDC pipel")).click()
    page.wait_for_url("**/plugin/cdc")
    frame = page.frame_locator("iframe")
    assert frame.locator("h1").inner_text() == "CDC pipelines"
    assert frame.locator(f"#pipeline-{PIPELINE} h2").inner_text() == PIPELINE


def run_count() -> int:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    with create_session() as session:
        return session.scalar(select(func.count()).select_from(DagRun).where(DagRun.dag_id == PIPELINE))


def latest_conf() -> dict:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return session.scalars(select(DagRun.conf).where(DagRun.dag_id == PIPELINE).order_by(DagRun.id.desc())).first()


def test_the_replay_form_checks_before_it_submits(logged_in_page, shown, dag_runner):
    page = logged_in_page
    form = page.locator(f"#pipeline-{PIPELINE} form.replay")
    start, end = form.locator("input[name=start]"), form.locator("input[name=end]")
    runs = run_count()

    start.fill("binlog-3:4")
    form.locator("button").click()
    assert 'start: "binlog-3:4" is not FILE:OFFSET, e.g. binlog.000003:1146' in start.evaluate(
        "i => i.validationMessage")
    assert end.evaluate("i => i.validity.valueMissing")  # start without end cannot be sent
    start.fill("binlog.000002:900")
    end.fill("binlog.000002:120")
    form.locator("button").click()
    assert "end binlog.000002:120 must be after start binlog.000002:900" in end.evaluate("i => i.validationMessage")
    assert run_count() == runs and "/cdc/" in page.url  # nothing was sent

    # a range the follower already has: the run re-reads it and the merge is a no-op
    first, checkpoint = shown.history_range()
    start.fill(first)
    end.fill(checkpoint)
    form.locator("button").click()
    page.wait_for_selector(".message")
    message = page.locator(".message").inner_text()
    assert re.fullmatch(rf"Triggered {PIPELINE} run \S+ replaying {first} → {checkpoint}", message), message
    assert run_count() == runs + 1 and latest_conf() == {"start": first, "end": checkpoint}
    # what that run does (run here with the same conf: no scheduler picks up the queued one)
    replay = dag_runner.run(PIPELINE, conf=latest_conf())
    assert (replay.tasks["extract_batch"], replay.tasks["merge_batch"]) == (SUCCESS, "skipped"), replay.log_file
    assert "is already applied" in replay.log


def test_the_server_checks_the_replay_range_again(logged_in_page, api_server, shown):
    """A post that skipped the browser's checks (a script, an old page) is answered in words."""
    page = logged_in_page
    response = page.request.post(f"{api_server.url}/cdc/pipelines/{PIPELINE}/replay",
                                 form={"start": "binlog.000001:4", "end": ""},
                                 headers={"Origin": api_server.url})
    assert response.ok and "Not replayed: param &#x27;end&#x27;: is missing" in response.text()


def test_airflows_trigger_form_refuses_a_malformed_position(logged_in_page, api_server, shown):
    page = logged_in_page
    runs = run_count()
    page.goto(f"{api_server.url}/dags/{PIPELINE}")
    page.get_by_test_id("trigger-dag-button").click()
    page.fill("#element_start", "yesterday")
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Trigger").click()
    dialog.get_by_text("Invalid input for param start").wait_for()
    assert run_count() == runs  # refused before a run existed
    toast = page.get_by_role("status", name="Failed to Trigger Dag")
    expect(toast.first).to_be_visible()
    page.mouse.move(5, 5)  # a toast under the pointer stays; it covers the Trigger button until it goes
    expect(toast).to_have_count(0, timeout=30_000)

    first, checkpoint = shown.history_range()
    page.fill("#element_start", first)
    page.fill("#element_end", checkpoint)
    dialog.get_by_role("button", name="Trigger").click()
    dialog.wait_for(state="hidden")
    assert run_count() == runs + 1 and latest_conf() == {"start": first, "end": checkpoint, "resnapshot": None}
