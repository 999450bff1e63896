"""Airflow-side fixtures: a temp AIRFLOW_HOME with SQLite metadata, connections from AIRFLOW_CONN_*
pointing at the session's real MariaDB/moto servers, and real DAG runs through ``dag.test()``.

Airflow reads its configuration when ``airflow`` is first imported, so the environment is set at
import time of this conftest, before any test module imports Airflow. The DAGs folder is the
repository's ``dags/`` (Airflow 3.3's ``dag.test()`` only runs a DAG that sits in the configured
dags folder); the pipelines it builds come from a per-session file named by CDC_PIPELINES_FILE.

No ``__init__.py`` in tests/airflow: it would make this directory the ``airflow`` package.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent

if "airflow" in sys.modules:  # pragma: no cover - a guard for whoever reorders conftests
    raise RuntimeError("airflow was imported before tests/airflow/conftest.py could configure it")

_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="mysql-cdc-airflow-home-"))
# A real StatsD endpoint for Airflow's metrics: a UDP socket bound now, before Airflow reads its
# configuration, so every datagram of the session queues here (see the `statsd` fixture).
_STATSD = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
_STATSD.bind(("127.0.0.1", 0))
_STATSD.setblocking(False)
os.environ.update(
    {
        "AIRFLOW_HOME": str(_AIRFLOW_HOME),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_AIRFLOW_HOME}/airflow.db",
        # Every session writes its own pipelines file (see `pipelines_file`); until then, parsing
        # the dags folder must not pick up the repository's default pipeline.
        "CDC_PIPELINES_FILE": str(_AIRFLOW_HOME / "pipelines.yaml"),
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(_STATSD.getsockname()[1]),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
    }
)

from spark_under_test import HOME_ENV as SPARK_HOME_ENV, SPARK_JARS, SPARK_SUBMIT  # noqa: E402  (no Airflow import)



class _LiveStream(io.TextIOBase):
    """Writes to whatever ``sys.<name>`` is at the moment of writing.

    ``import airflow`` gives the root logger a StreamHandler bound to the sys.stdout of that
    moment. Under pytest that is the capture stream of one test, closed when the test ends, after
    which every stdlib log line of later DAG runs would be lost ("I/O operation on closed file").
    """

    def __init__(self, name: str, fallback):
        super().__init__()
        self._name, self._fallback = name, fallback

    def _target(self):
        current = getattr(sys, self._name)
        return self._fallback if current is self else current

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return False


def _import_airflow() -> tuple[list[logging.Handler], int]:
    """Import Airflow (it configures logging on import) and take its root handlers back out.

    The root logger is process-wide: left in place, Airflow's stdout handler would also print the
    log lines of every later test directory into their captured stdout. The handlers are put back
    only around this directory's tests (``_airflow_root_logging``).
    """
    root = logging.getLogger()
    handlers_before, level_before = list(root.handlers), root.level
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _LiveStream("stdout", saved[0]), _LiveStream("stderr", saved[1])
    try:
        import airflow  # noqa: F401  (configures logging, now bound to the live streams)
    finally:
        sys.stdout, sys.stderr = saved
    added = [h for h in root.handlers if h not in handlers_before]
    airflow_level = root.level
    for handler in added:
        root.removeHandler(handler)
    root.setLevel(level_before)
    return added, airflow_level


_AIRFLOW_ROOT_HANDLERS, _AIRFLOW_ROOT_LEVEL = _import_airflow()


@pytest.fixture(autouse=True)
def _airflow_root_logging():
    """Airflow's root logging, for the duration of one test of this directory."""
    root = logging.getLogger()
    handlers_before, level_before = list(root.handlers), root.level
    for handler in _AIRFLOW_ROOT_HANDLERS:
        root.addHandler(handler)
    root.setLevel(_AIRFLOW_ROOT_LEVEL)
    yield
    for handler in list(root.handlers):
        # pytest's own capture handlers come and go per test phase; everything else that was not
        # there before this test (Airflow's, and any a DAG run added) goes.
        if handler not in handlers_before and not type(handler).__module__.startswith("_pytest"):
            root.removeHandler(handler)
    root.setLevel(level_before)


# Distinctive secrets: the leak test greps every task log and spark-submit command line for them.
AWS_ACCESS_KEY = "AKIAMYSQLCDCTEST0001"
AWS_SECRET_KEY = "moto-secret-4f1d9c2e-must-never-be-logged"
S3_BUCKET = "mysql-cdc-e2e"


@pytest.fixture(scope="session", autouse=True)
def _airflow_home():
    """Create the SQLite metadata DB once; remove the temp AIRFLOW_HOME at the end."""
    log = _AIRFLOW_HOME / "db-migrate.log"
    with open(log, "w") as out:
        done = subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        pytest.fail(f"airflow db migrate failed; see {log}:\n{log.read_text()[-3000:]}")
    yield _AIRFLOW_HOME
    shutil.rmtree(_AIRFLOW_HOME, ignore_errors=True)


def conn_json(conn_type: str, **fields) -> str:
    return json.dumps({"conn_type": conn_type, **fields})


def mysql_conn(params: dict) -> str:
    return conn_json("mysql", host=params["host"], port=params["port"], login=params["user"],
                     password=params["password"])


@dataclass(frozen=True)
class S3Endpoint:
    url: str
    bucket: str
    access_key: str
    secret_key: str

    def client_kwargs(self) -> dict:
        """boto3's client kwargs (what ``airflow_deployment.pipeline_connections`` takes)."""
        return {"endpoint_url": self.url, "region_name": "us-east-1", "aws_access_key_id": self.access_key,
                "aws_secret_access_key": self.secret_key}


@pytest.fixture(scope="session")
def s3_endpoint(s3_server) -> S3Endpoint:
    """The moto server with a bucket for batches, reached with the distinctive keys above."""
    import boto3

    boto3.client("s3", **{**s3_server.client_kwargs(), "aws_access_key_id": AWS_ACCESS_KEY,
                          "aws_secret_access_key": AWS_SECRET_KEY}).create_bucket(Bucket=S3_BUCKET)
    return S3Endpoint(s3_server.endpoint_url, S3_BUCKET, AWS_ACCESS_KEY, AWS_SECRET_KEY)


@pytest.fixture(scope="session")
def venv_bin() -> Path:
    return VENV_BIN


@pytest.fixture(scope="session")
def airflow_connections(leader_user, follower_user, s3_endpoint):
    """AIRFLOW_CONN_* for the default conn ids, pointing at the session's servers."""
    env = {
        "AIRFLOW_CONN_MYSQL_LEADER": mysql_conn(leader_user),
        "AIRFLOW_CONN_MYSQL_FOLLOWER": mysql_conn(follower_user),
        "AIRFLOW_CONN_AWS_DEFAULT": conn_json(
            "aws", login=AWS_ACCESS_KEY, password=AWS_SECRET_KEY,
            extra={"endpoint_url": s3_endpoint.url, "region_name": "us-east-1"},
        ),
        # the Spark under test (tests/merge/spark_under_test.py): found on PATH for the default line,
        # named by the connection for another (`make test-spark SPARK=<line>`), as a user names theirs
        "AIRFLOW_CONN_SPARK_DEFAULT": conn_json("spark", host="local[2]", extra=(
            {"spark-binary": str(SPARK_SUBMIT)} if os.environ.get(SPARK_HOME_ENV) else {})),
    }
    os.environ.update(env)
    yield env
    for key in env:
        os.environ.pop(key, None)


@dataclass
class SparkSubmitSpy:
    """A ``spark-submit`` first on PATH that records each call, then runs the real one.

    Records argv, whether the secrets file existed with mode 0600 while the job ran, and the
    exit code. ``crash_next()`` makes the next call run the merge job with
    MYSQL_CDC_CRASH_AT=before_commit, the job's own test hook (os._exit(137) before commit).
    """

    bin_dir: Path
    calls_file: Path
    crash_flag: Path

    def calls(self) -> list[dict]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines() if line.strip()]

    def crash_next(self) -> None:
        self.crash_flag.write_text("before_commit")


SPY_SCRIPT = r"""#!/usr/bin/env bash
# Test double: record the call, then run the real spark-submit.
secrets="${MYSQL_CDC_SECRETS_FILE:-}"
mode=""
[ -n "$secrets" ] && [ -f "$secrets" ] && mode=$(stat -c %a "$secrets")
crash=""
if [ -f "__CRASH__" ]; then crash=$(cat "__CRASH__"); rm -f "__CRASH__"; export MYSQL_CDC_CRASH_AT="$crash"; fi
"__REAL__" "$@"
rc=$?
__PYTHON__ - "$rc" "$secrets" "$mode" "$crash" "$@" >> "__CALLS__" <<'PY'
import json, sys
rc, secrets, mode, crash, *argv = sys.argv[1:]
print(json.dumps({"rc": int(rc), "secrets_file": secrets, "secrets_mode": mode, "crash": crash, "argv": argv}))
PY
exit $rc
"""


@pytest.fixture(scope="module")
def spark_submit_spy(tmp_path_factory) -> SparkSubmitSpy:
    # laid out as a Spark home (bin/, jars/ of the Spark it runs), so the merge task reads its
    # version from the jars as it does a distribution's, without a `--version` call of the spy
    home = tmp_path_factory.mktemp("spark-spy")
    (home / "jars").symlink_to(SPARK_JARS, target_is_directory=True)
    bin_dir = home / "bin"
    bin_dir.mkdir()
    spy = SparkSubmitSpy(bin_dir, bin_dir / "calls.jsonl", bin_dir / "crash-next")
    script = (SPY_SCRIPT.replace("__REAL__", str(SPARK_SUBMIT))
              .replace("__PYTHON__", sys.executable)
              .replace("__CALLS__", str(spy.calls_file))
              .replace("__CRASH__", str(spy.crash_flag)))
    target = bin_dir / "spark-submit"
    target.write_text(script)
    target.chmod(0o755)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{bin_dir}{os.pathsep}{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
        # The job's Python must be this venv's (pyarrow, pymysql, boto3), driver and workers alike.
        mp.setenv("PYSPARK_PYTHON", sys.executable)
        yield spy


@dataclass
class RunResult:
    dag_id: str
    run_id: str
    state: str
    tasks: dict[str, str]  # task_id -> final state
    tries: dict[str, int]
    seconds: float
    log: str
    log_file: Path = field(repr=False)


class DagRunner:
    """Real DAG runs through ``dag.test()``, each run's console output (the task logs) kept."""

    def __init__(self, capfd, log_dir: Path, all_logs: list[str]):
        self.capfd = capfd
        self.log_dir = log_dir
        self.all_logs = all_logs

    def run(self, dag_id: str, conf: dict | None = None, only: list[str] | None = None) -> RunResult:
        """One run of ``dag_id``; ``only``: of those tasks alone (their upstream left out)."""
        from airflow.dag_processing.dagbag import DagBag

        bag = DagBag(dag_folder=str(REPO_ROOT / "dags"))
        assert not bag.import_errors, f"DAG import errors: {bag.import_errors}"
        dag = bag.get_dag(dag_id)
        assert dag is not None, f"no DAG {dag_id!r} in {sorted(bag.dag_ids)}"
        if only:
            dag = dag.partial_subset(task_ids=only, include_upstream=False)
        self.capfd.readouterr()
        started = time.monotonic()
        dag_run = dag.test(run_conf=conf)
        seconds = time.monotonic() - started
        out, err = self.capfd.readouterr()
        log = out + err
        self.all_logs.append(log)
        log_file = self.log_dir / f"{dag_id}-{len(self.all_logs):02d}.log"
        log_file.write_text(log)
        tis = dag_run.get_task_instances()
        return RunResult(
            dag_id=dag_id,
            run_id=dag_run.run_id,
            state=str(dag_run.state),
            tasks={ti.task_id: str(ti.state) for ti in tis},
            tries={ti.task_id: ti.try_number for ti in tis},
            seconds=seconds,
            log=log,
            log_file=log_file,
        )


@pytest.fixture(scope="module")
def task_logs() -> list[str]:
    """Console output of every DAG run of the module (what the task logs held)."""
    return []


@pytest.fixture
def dag_runner(capfd, tmp_path_factory, task_logs, airflow_connections, spark_submit_spy) -> DagRunner:
    return DagRunner(capfd, tmp_path_factory.getbasetemp(), task_logs)


@pytest.fixture(scope="module")
def dag_runner_factory(tmp_path_factory, task_logs, airflow_connections, spark_submit_spy):
    """DagRunner for module fixtures that run DAGs (capfd is per test: output goes to the log)."""

    class _NoCapture:
        def readouterr(self):
            return "", ""

    return lambda: DagRunner(_NoCapture(), tmp_path_factory.getbasetemp(), task_logs)


class StatsdListener:
    """The metrics Airflow sent to the session's StatsD socket: ``name:value|type`` lines."""

    def drain(self) -> list[str]:
        lines = []
        while True:
            try:
                data = _STATSD.recv(65536)
            except BlockingIOError:
                return lines
            lines.extend(data.decode().splitlines())


@pytest.fixture(scope="session")
def statsd() -> StatsdListener:
    """A real task process sets up Airflow's metrics backend in the task runner's ``main()``
    (``stats.initialize``); ``dag.test()`` runs tasks in this process without it, so the same call
    is made here, with the same arguments, to send the tasks' metrics as a deployment would."""
    from airflow.sdk._shared.observability.metrics import stats
    from airflow.sdk.configuration import conf
    from airflow.sdk.observability.metrics import stats_utils

    stats.initialize(factory=stats_utils.get_stats_factory(),
                     export_legacy_names=conf.getboolean("metrics", "legacy_names_on"))
    return StatsdListener()


# -- the API server and a browser: the Airflow UI as a user sees it ------------------------------

UI_USER, UI_PASSWORD = "cdc-admin", "ui-test-password-7f3a"
BROWSER_ARGS = [  # Debian's chromium, started as the machine's own docs say it works here
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ApiServer:
    url: str
    log: Path

    def token(self) -> str:
        """A JWT for the test user, as a tool gets one (POST /auth/token)."""
        import urllib.request

        request = urllib.request.Request(
            f"{self.url}/auth/token", json.dumps({"username": UI_USER, "password": UI_PASSWORD}).encode(),
            {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())["access_token"]

    def get(self, path: str, token: str | None = None) -> tuple[int, object]:
        import urllib.error
        import urllib.request

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(f"{self.url}{path}", headers=headers),
                                        timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")


@pytest.fixture(scope="session")
def api_server(airflow_connections, tmp_path_factory):
    """``airflow api-server`` on a free port, sharing this session's metadata DB, connections and
    pipelines file, with the plugins folder (the CDC page) and one simple-auth-manager user."""
    home = tmp_path_factory.mktemp("api-server")
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({UI_USER: UI_PASSWORD}))
    port = _free_port()
    env = {**os.environ,
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{UI_USER}:admin",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
           "AIRFLOW__CORE__LAZY_LOAD_PLUGINS": "False"}
    log = home / "api-server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(VENV_BIN / "airflow"), "api-server", "--port", str(port)], env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = ApiServer(f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            pytest.fail(f"airflow api-server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            status, _ = server.get("/api/v2/monitor/health")
            if status == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"airflow api-server did not answer within 120 s:\n{log.read_text()[-3000:]}")
        time.sleep(1)
    yield server
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    """Headless Debian chromium driven by Playwright (never a downloaded browser).

    Module-scoped on purpose: Playwright's sync API keeps an asyncio loop running on this thread
    while it is open, and a DAG run whose sensor defers (``dag.test()`` runs the trigger with
    ``asyncio.run``) cannot start inside it; stopping it with the module lets later modules run
    DAGs."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium, args=BROWSER_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def logged_in_page(browser, api_server):
    """A fresh browser context logged in through Airflow's own login form."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{api_server.url}/cdc/")
    page.fill("input[name=username]", UI_USER)
    page.fill("input[name=password]", UI_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/cdc/**")
    yield page
    context.close()


@pytest.fixture
def asset_events():
    """``asset_events(alias)``: (asset URI, extra) of every asset event emitted through the asset
    alias ``alias``, oldest first, as Airflow's database holds them."""
    return _asset_events


def _asset_events(alias: str) -> list[tuple[str, dict]]:
    from airflow.models.asset import AssetAliasModel, AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        found = session.scalar(select(AssetAliasModel).where(AssetAliasModel.name == alias))
        if found is None:
            return []
        events = sorted((e for e in found.asset_events), key=lambda e: e.id)
        uris = dict(session.execute(select(AssetModel.id, AssetModel.uri)).all())
        return [(uris[e.asset_id], dict(e.extra or {})) for e in events]
