#!/usr/bin/env python3
"""Start REAL local services for tests and the demo: MariaDB servers and a moto S3 server.

Nothing here is mocked in-process: every service is a separate OS process listening on
127.0.0.1, so the code under test talks to it exactly as it would talk to production
(TCP MySQL protocol, binlog replication protocol, HTTP S3 API).

The front of ``scripts/services/`` (one module per service, ``process`` for what they share):
its importable API (stdlib + pymysql only)::

    free_port() -> int
    MariaDBServer(base_dir, name, server_id, binlog, port=None, extra_args=())
        .start() / .stop() / .connect(...) / .create_user(...) / .conn_params(...)
    MotoS3Server(base_dir, port=None)
        .start() / .stop() / .endpoint_url / .client_kwargs()

CLI (used by ``make demo``)::

    python scripts/local_services.py up     --dir DIR [--s3]   # writes DIR/services.json
    python scripts/local_services.py status --dir DIR
    python scripts/local_services.py down   --dir DIR [--clean]

Every child process is started in its own session (``start_new_session=True``) so that it
outlives the CLI invocation like a daemon and does not receive the terminal's Ctrl-C.
Each child also carries the environment marker ``MYSQL_CDC_LOCAL_SERVICE=<its dir>``;
``stop``/``down`` only signal a pid whose /proc environ carries that marker, so a recycled
pid that now belongs to somebody else's process is never killed.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pymysql

from services.mariadb import MariaDBServer
from services.moto_s3 import MotoS3Server
from services.mysql import MySQLServer, mysql_available
from services.process import (
    FAKE_AWS_ACCESS_KEY_ID, FAKE_AWS_REGION, FAKE_AWS_SECRET_ACCESS_KEY, ServiceError, free_port, make_preexec,
    pid_alive, pid_has_marker, stop_stale, tail, terminate,
)
from services.spark_cluster import SparkStandaloneCluster

__all__ = [
    "free_port",
    "make_preexec",
    "tail",
    "MariaDBServer",
    "MySQLServer",
    "mysql_available",
    "MotoS3Server",
    "SparkStandaloneCluster",
    "ServiceError",
    "FAKE_AWS_ACCESS_KEY_ID",
    "FAKE_AWS_SECRET_ACCESS_KEY",
    "FAKE_AWS_REGION",
]

# --------------------------------------------------------------------------- CLI

SERVICES_FILE = "services.json"


def _services_path(d: Path) -> Path:
    return d / SERVICES_FILE


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _stop_recorded(entry: dict[str, Any]) -> str:
    """Stop one services.json entry by pid (only if the pid still belongs to it)."""
    pid = entry.get("pid")
    marker = entry.get("service_dir")
    if not pid or not marker:
        return "no pid"
    if not pid_alive(pid):
        return "not running"
    if not pid_has_marker(pid, marker):
        return f"pid {pid} is not ours any more; left alone"
    terminate(pid, None, group=(entry.get("kind") == "moto_s3"))
    return "stopped" if not pid_alive(pid) else "STILL RUNNING"


def cmd_down(d: Path, clean: bool = False, quiet: bool = False) -> int:
    path = _services_path(d)
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        for key, entry in data.get("services", {}).items():
            result = _stop_recorded(entry)
            if not quiet:
                print(f"{key}: {result}")
        path.unlink()
    elif not quiet:
        print(f"no {path}; nothing recorded")
    # Also catch servers whose start was interrupted before services.json was written.
    for name in ("leader", "follower"):
        stop_stale(d / name / "mariadbd.pid", str((d / name).resolve()))
    stop_stale(d / "moto_s3" / "moto.pid", str((d / "moto_s3").resolve()), group=True)
    if clean:
        for name in ("leader", "follower", "moto_s3"):
            shutil.rmtree(d / name, ignore_errors=True)
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    d: Path = args.dir
    d.mkdir(parents=True, exist_ok=True)
    cmd_down(d, quiet=True)  # stale services from a previous run

    started: list[MariaDBServer | MotoS3Server] = []
    try:
        t0 = time.monotonic()
        leader = MariaDBServer(d, "leader", server_id=1, binlog=True, port=args.leader_port)
        started.append(leader.start())
        follower = MariaDBServer(d, "follower", server_id=2, binlog=False, port=args.follower_port)
        started.append(follower.start())
        leader_user = leader.create_user(
            "cdc_leader", args.leader_password,
            ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.*"],
        )
        follower_user = follower.create_user(
            "cdc_follower", args.follower_password, ["ALL PRIVILEGES ON *.*"],
        )
        services: dict[str, Any] = {
            "leader": {**leader.to_dict(), "user": leader_user["user"],
                       "password": leader_user["password"]},
            "follower": {**follower.to_dict(), "user": follower_user["user"],
                         "password": follower_user["password"]},
        }
        if args.s3:
            s3 = MotoS3Server(d, port=args.s3_port)
            started.append(s3.start())
            services["s3"] = s3.to_dict()
        data = {"dir": str(d), "started_at": time.time(),
                "startup_seconds": round(time.monotonic() - t0, 2), "services": services}
        _write_json_atomic(_services_path(d), data)
    except BaseException:
        for svc in reversed(started):
            with contextlib.suppress(Exception):
                svc.stop()
        raise
    print(json.dumps(data, indent=2, sort_keys=True))
    return 0


def cmd_status(d: Path) -> int:
    path = _services_path(d)
    if not path.exists():
        print(f"no {path}: services are down")
        return 1
    data = json.loads(path.read_text())
    ok = True
    for key, e in data.get("services", {}).items():
        alive = bool(e.get("pid")) and pid_alive(e["pid"]) and pid_has_marker(e["pid"], e["service_dir"])
        detail = ""
        if alive and e.get("kind") == "mariadb":
            try:
                c = pymysql.connect(host=e["host"], port=e["port"], user=e["root_user"],
                                    password=e["root_password"], connect_timeout=3)
                with c.cursor() as cur:
                    cur.execute("SELECT @@version, @@log_bin")
                    ver, log_bin = cur.fetchone()
                c.close()
                detail = f"version={ver} log_bin={log_bin}"
            except pymysql.MySQLError as exc:
                alive, detail = False, f"connect failed: {exc}"
        elif alive and e.get("kind") == "moto_s3":
            up = MotoS3Server(d, port=e["port"])._http_up()
            alive, detail = up, e["endpoint_url"] if up else "no HTTP answer"
        ok &= alive
        print(f"{key:9s} {'UP' if alive else 'DOWN':5s} pid={e.get('pid')} "
              f"port={e.get('port')} {detail}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start leader+follower MariaDB (and moto S3 with --s3)")
    up.add_argument("--dir", type=Path, required=True)
    up.add_argument("--s3", action="store_true", help="also start a moto S3 server")
    up.add_argument("--leader-port", type=int)
    up.add_argument("--follower-port", type=int)
    up.add_argument("--s3-port", type=int)
    up.add_argument("--leader-password", default="cdc_leader_pw")
    up.add_argument("--follower-password", default="cdc_follower_pw")
    down = sub.add_parser("down", help="stop services recorded in DIR/services.json")
    down.add_argument("--dir", type=Path, required=True)
    down.add_argument("--clean", action="store_true", help="also delete datadirs/logs")
    st = sub.add_parser("status", help="show whether recorded services are up")
    st.add_argument("--dir", type=Path, required=True)
    args = p.parse_args(argv)
    args.dir = args.dir.resolve()
    if args.command == "up":
        try:
            return cmd_up(args)
        except ServiceError as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            return 1
    if args.command == "down":
        return cmd_down(args.dir, clean=args.clean)
    return cmd_status(args.dir)


if __name__ == "__main__":
    sys.exit(main())

