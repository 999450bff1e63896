"""TLS to every server, verified: MariaDB and MySQL leaders and followers started with a CA and a server
certificate this fixture makes, and ``require_secure_transport=ON`` (no plain TCP at all).

A pipeline whose connections name the CA runs through a snapshot (worker processes), the stream,
the merge job (spark-submit: driver and executors, the TLS settings in its 0600 secrets file) and
verification, every connection verified. The same pipeline given another CA (what a server
presenting a certificate another CA signed, a man in the middle, looks like from the client) fails
at once with an error naming the server, its connection and the fix, and changes nothing."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import logging
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from local_services import MariaDBServer, MySQLServer
from merge_helpers import Pipeline, assert_same_database, job_output, spark_submit
from mysql_cdc.capture.filters import TableFilter
from mysql_cdc.kinds.mysql.verify import checksum_sides
from mysql_cdc.server_state import MySQLStateStore
from mysql_cdc.monitor.verify import verify_pipeline
from mysql_cdc.mysql_server import MySQLSettings, TlsError, TlsSettings
from mysql_cdc.pipeline_options import VerifyOptions
from mysql_cdc.storage import StorageSpec

TLS_ARGS = ("--require-secure-transport=ON",)


def _name(text: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def _pem(obj) -> str:
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM).decode()
    return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _certificate(subject: str, key, issuer: str, issuer_key, ca: bool) -> x509.Certificate:
    now = dt.datetime.now(dt.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: Path, name: str) -> dict[str, Path]:
    """A CA, a server certificate it signed (for 127.0.0.1 and localhost) and a client
    certificate it signed, as PEM files."""
    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = _certificate(f"{name} CA", ca_key, f"{name} CA", ca_key, ca=True)
    server = _certificate("127.0.0.1", server_key, f"{name} CA", ca_key, ca=False)
    client = _certificate("cdc_writer", client_key, f"{name} CA", ca_key, ca=False)
    files = {"ca": directory / f"{name}-ca.pem", "cert": directory / f"{name}-server.pem",
             "key": directory / f"{name}-server-key.pem", "client_cert": directory / f"{name}-client.pem",
             "client_key": directory / f"{name}-client-key.pem"}
    for what, obj in (("ca", ca), ("cert", server), ("key", server_key), ("client_cert", client),
                      ("client_key", client_key)):
        files[what].write_text(_pem(obj))
    return files


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, dict[str, Path]]:
    directory = tmp_path_factory.mktemp("pki")
    return {"ours": make_pki(directory, "ours"), "theirs": make_pki(directory, "theirs")}


def _tls_server(request, services_dir, pki, flavor: str, role: str, server_id: int) -> MariaDBServer:
    ours = pki["ours"]
    kind = MySQLServer if flavor == "mysql" else MariaDBServer
    server = kind(services_dir, f"tls-{flavor}-{role}", server_id=server_id, binlog=role == "leader",
                  die_with_parent=True, extra_args=(f"--ssl-ca={ours['ca']}", f"--ssl-cert={ours['cert']}",
                                                    f"--ssl-key={ours['key']}", *TLS_ARGS))
    request.addfinalizer(server.stop)
    return server.start()


@pytest.fixture(scope="module", params=["mariadb", "mysql"])
def tls_servers(request, services_dir, pki):
    """A leader and a follower of one flavor, each with the fixture's CA and certificate, refusing
    plain TCP."""
    offset = 0 if request.param == "mariadb" else 10
    return (_tls_server(request, services_dir, pki, request.param, "leader", 21 + offset),
            _tls_server(request, services_dir, pki, request.param, "follower", 22 + offset))


@pytest.fixture
def tls_leader(tls_servers):
    return tls_servers[0]


@pytest.fixture
def tls_follower(tls_servers):
    return tls_servers[1]


def tls(pki, which: str = "ours", mode: str = "VERIFY_IDENTITY") -> TlsSettings:
    return TlsSettings(mode=mode, ca=pki[which]["ca"].read_text())


def pipeline_over_tls(tls_leader, tls_follower, tmp_path, unique_name, leader_tls, follower_tls) -> Pipeline:
    leader_user = tls_leader.create_user("cdc_reader", "reader-pw", ["REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD ON *.*"])
    follower_user = tls_follower.create_user("cdc_writer", "writer-pw", ["ALL PRIVILEGES ON *.*"])
    tls_follower.run_sql([f"ALTER USER 'cdc_writer'@'{host}' REQUIRE NONE" for host in ("%", "localhost")])
    return Pipeline(name=f"pipe_{unique_name}", database=unique_name, leader=tls_leader, follower=tls_follower,
                    leader_settings=MySQLSettings(**leader_user, conn_id="tls_leader", tls=leader_tls),
                    follower_settings=MySQLSettings(**follower_user, conn_id="tls_follower", tls=follower_tls),
                    storage=StorageSpec(f"file://{tmp_path}/store"))


def test_the_servers_refuse_plain_tcp(tls_leader):
    import pymysql

    with pytest.raises(pymysql.err.OperationalError):
        tls_leader.connect(ssl_disabled=True)


def _tls_version(conn) -> str:
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
        return cur.fetchone()[1]


def test_without_tls_settings_a_connection_encrypts_when_the_server_can_and_builds_its_context_once(
        tls_leader, services_dir, request):
    """PyMySQL's PREFERRED mode, as ``MySQLSettings.connect`` and the binlog stream use it: encrypted
    to a server offering TLS, plain to one without, every connection wrapped by one context (built
    once per process, not per connection)."""
    from mysql_cdc.capture.leader import Leader
    from mysql_cdc.capture.stream.binlog_stream import BinlogReader

    settings = MySQLSettings(**tls_leader.conn_params())
    first, second = settings.connect(), settings.connect()
    assert _tls_version(first).startswith("TLS") and _tls_version(second).startswith("TLS")
    assert first.ctx is second.ctx
    with Leader(settings) as leader:
        end = leader.current_position()
    with BinlogReader(settings, end) as reader:
        list(reader)  # connects: the stream's connection is PREFERRED too, with the same context
        assert reader.stream._stream_connection.ctx is first.ctx
    first.close()
    second.close()
    plain = MariaDBServer(services_dir, f"{tls_leader.name}-plain", server_id=29, binlog=False, die_with_parent=True,
                          extra_args=("--skip-ssl",))
    request.addfinalizer(plain.stop)
    conn = MySQLSettings(**plain.start().conn_params()).connect()
    assert _tls_version(conn) == ""
    conn.close()


def test_a_pipeline_runs_over_verified_tls_through_snapshot_stream_merge_and_verification(
        tls_leader, tls_follower, pki, tmp_path, unique_name, spark):
    # the follower's writer must also show a client certificate (REQUIRE X509): its key travels to
    # the merge job's driver and executors in the secrets file, and nowhere else
    ours = pki["ours"]
    client = TlsSettings(mode="VERIFY_IDENTITY", ca=ours["ca"].read_text(), cert=ours["client_cert"].read_text(),
                         key=ours["client_key"].read_text())
    pipeline = pipeline_over_tls(tls_leader, tls_follower, tmp_path, unique_name, tls(pki), client)
    tls_follower.run_sql([f"ALTER USER 'cdc_writer'@'{host}' REQUIRE X509" for host in ("%", "localhost")])
    pipeline.start()
    conn = pipeline.leader_settings.connect()
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
        assert cur.fetchone()[1].startswith("TLS")
    conn.close()
    db = pipeline.database
    tls_leader.run_sql([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(16))",
                        f"INSERT INTO {db}.t VALUES (1, 'copied'), (2, 'copied')"])
    copy = pipeline.snapshot()  # worker processes, each its own verified session
    result = spark_submit(pipeline, copy, tmp_path / "copy")
    assert result.returncode == 0, job_output(result)[-3000:]
    stream = pipeline.capture([f"INSERT INTO {db}.t VALUES (3, 'streamed')", f"UPDATE {db}.t SET v = 'x' WHERE id = 1"])
    result = spark_submit(pipeline, stream, tmp_path / "stream")  # driver and executors: TLS from the secrets file
    assert result.returncode == 0, job_output(result)[-3000:]
    assert "PRIVATE KEY" not in job_output(result) and ours["client_key"].read_text() not in job_output(result)
    assert_same_database(tls_leader, tls_follower, db)
    verified = verify_pipeline(pipeline.name, pipeline.leader_settings, checksum_sides(pipeline.follower_settings),
                               MySQLStateStore(pipeline.follower_settings), TableFilter((f"{db}.*",)),
                               VerifyOptions(chunk_rows=10, rechecks=0), log=lambda _: None)
    assert verified.status == "ok", verified.describe()


def test_a_server_whose_certificate_another_ca_signed_fails_the_run_at_once(
        tls_leader, tls_follower, pki, tmp_path, unique_name):
    good = pipeline_over_tls(tls_leader, tls_follower, tmp_path, unique_name, tls(pki), tls(pki)).start()
    db = good.database
    batch = good.capture([f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY)",
                          f"INSERT INTO {db}.t VALUES (1)"])
    checkpoint = good.checkpoint()
    # the same servers reached by connections that trust another CA: the server is not who it says
    for mode in ("VERIFY_CA", "VERIFY_IDENTITY"):
        with pytest.raises(TlsError) as caught:
            MySQLSettings(**tls_leader.conn_params(), conn_id="tls_leader", tls=tls(pki, "theirs", mode)).connect()
        message = str(caught.value)
        assert f"the server at 127.0.0.1:{tls_leader.port} (Airflow connection 'tls_leader')" in message
        assert "set the connection's extra ssl.ca to the CA that signed the server's certificate" in message
    # the merge job, its follower trusting another CA: refused before anything is written
    mitm = pipeline_over_tls(tls_leader, tls_follower, tmp_path, unique_name, tls(pki), tls(pki, "theirs"))
    mitm.name, mitm.database = good.name, good.database
    result = spark_submit(mitm, batch, tmp_path / "mitm")
    assert result.returncode != 0
    assert "TLS to the server at 127.0.0.1" in job_output(result) and "tls_follower" in job_output(result)
    assert good.checkpoint() == checkpoint
    assert tls_follower.scalar(f"SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{db}'") == 0
    # the stream, its leader trusting another CA
    from dataclasses import replace

    from mysql_cdc.capture.stream.binlog_stream import BinlogReader

    mitm_leader = replace(good.leader_settings, tls=tls(pki, "theirs"))

    with pytest.raises(TlsError):
        with BinlogReader(mitm_leader, batch.start) as reader:
            next(iter(reader))


def test_an_iceberg_catalog_on_a_tls_server_is_reached_verified(tls_follower, pki, tmp_path, unique_name):
    """The Iceberg kind's JDBC catalog (its sink, state store, verification and maintenance all open
    it) connects as its Airflow connection says: verified against the CA, a table created, written
    and read back through it; trusting another CA, it is refused with the error naming the server,
    its connection and the fix."""
    from dataclasses import replace

    import pyarrow as pa

    from mysql_cdc.kinds.iceberg.catalog import CatalogRef

    tls_follower.run_sql([f"CREATE DATABASE {unique_name}"])
    ref = CatalogRef("lake", MySQLSettings(**tls_follower.conn_params(), conn_id="tls_catalog", tls=tls(pki)),
                     unique_name, StorageSpec(f"file://{tmp_path}/warehouse"))
    catalog = ref.open()
    with catalog.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Ssl_version'").one()[1].startswith("TLS")
    catalog.create_namespace("shop")
    catalog.create_table(("shop", "t"), schema=pa.schema([pa.field("id", pa.int64())])).append(
        pa.table({"id": pa.array([1, 2], pa.int64())}))
    assert sorted(ref.open().load_table(("shop", "t")).scan().to_arrow().column("id").to_pylist()) == [1, 2]
    mitm = replace(ref, server=replace(ref.server, tls=tls(pki, "theirs")))
    with pytest.raises(TlsError) as caught:
        mitm.open().load_table(("shop", "t"))
    assert f"the server at 127.0.0.1:{tls_follower.port} (Airflow connection 'tls_catalog')" in str(caught.value)


def _server_closing_during_the_tls_handshake():
    """A TCP server that greets like a MySQL server offering TLS, reads the client's switch to TLS
    and its first handshake bytes, then closes the connection: what a client sees when the server
    is killed at that moment. (A stand-in: a real server cannot be killed at that instant reliably;
    tests/merge/test_leader_restart.py kills real ones at random moments.)"""
    import socket
    import struct
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    capabilities = 0x0001 | 0x0200 | 0x0800 | 0x8000 | 0x80000  # long password, 4.1, SSL, secure auth, plugin auth
    greeting = (b"\x0a" + b"9.0.0-fake\x00" + struct.pack("<I", 1) + b"12345678\x00"
                + struct.pack("<H", capabilities & 0xFFFF) + b"\x21" + struct.pack("<H", 2)
                + struct.pack("<H", capabilities >> 16) + b"\x15" + b"\x00" * 10 + b"123456789012\x00"
                + b"mysql_native_password\x00")

    def serve():
        conn, _ = listener.accept()
        with conn:
            conn.sendall(struct.pack("<I", len(greeting))[:3] + b"\x00" + greeting)
            conn.recv(4 + 32)  # the client's SSL request
            conn.recv(4096)  # its TLS ClientHello: then the connection is gone
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


def test_a_server_gone_during_the_tls_handshake_is_a_lost_connection_not_a_tls_error(pki):
    """A server killed while a client negotiates TLS (the leader's restart during a snapshot) is a
    lost connection, which the task's retry mends, not a ``TlsError`` (permanent: no retry), with
    and without TLS settings."""
    import pymysql

    from mysql_cdc.retry_policy import is_permanent

    for settings_tls in (None, tls(pki, mode="REQUIRED")):
        port = _server_closing_during_the_tls_handshake()
        with pytest.raises(pymysql.err.OperationalError) as caught:
            MySQLSettings("127.0.0.1", port, tls=settings_tls).connect()
        assert not isinstance(caught.value, TlsError) and not is_permanent(caught.value), caught.value


def test_the_airflow_connection_carries_tls_in_its_extras(monkeypatch, pki, tmp_path):
    from mysql_cdc.hooks import ConnectionConfigError, LeaderHook
    from mysql_cdc.kinds.mysql.hook import FollowerHook

    def conn(conn_id, **extra):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(
            {"conn_type": "mysql", "host": "127.0.0.1", "port": 3306, "login": "cdc", "password": "pw", "extra": extra}))

    conn("cdc_tls_leader", ssl={"ca": str(pki["ours"]["ca"])})
    settings = LeaderHook("cdc_tls_leader").settings
    assert (settings.tls.mode, settings.tls.ca) == ("VERIFY_IDENTITY", pki["ours"]["ca"].read_text())
    conn("cdc_tls_ca_only", ssl=json.dumps({"ca": str(pki["ours"]["ca"])}), ssl_mode="verify_ca")
    assert FollowerHook("cdc_tls_ca_only").settings.tls.mode == "VERIFY_CA"
    # a CA file that does not exist: named, with the connection, before anything connects
    conn("cdc_tls_missing", ssl={"ca": str(tmp_path / "no-such-ca.pem")})
    with pytest.raises(ConnectionConfigError) as caught:
        LeaderHook("cdc_tls_missing").settings
    assert "leader connection 'cdc_tls_missing': cannot read extra ssl.ca" in str(caught.value)
    assert "no-such-ca.pem" in str(caught.value)
    conn("cdc_tls_bad_mode", ssl_mode="VERIFY_IDENTITY")
    with pytest.raises(ConnectionConfigError, match="ssl_mode VERIFY_IDENTITY needs the CA"):
        LeaderHook("cdc_tls_bad_mode").settings
    # no TLS settings: the task log says once what the connection then does
    conn("cdc_no_tls")
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logging.getLogger("mysql_cdc.connections").addHandler(handler)
    try:
        LeaderHook("cdc_no_tls").settings
        FollowerHook("cdc_no_tls").settings
    finally:
        logging.getLogger("mysql_cdc.connections").removeHandler(handler)
    said = [r.getMessage() for r in records if "has no TLS settings" in r.getMessage()]
    assert len(said) == 1 and "verifies nothing" in said[0]


def test_the_key_never_shows_in_settings_or_specs(pki):
    key = pki["ours"]["key"].read_text()
    settings = MySQLSettings("db", tls=TlsSettings(mode="VERIFY_CA", ca=pki["ours"]["ca"].read_text(),
                                                   cert=pki["ours"]["cert"].read_text(), key=key))
    assert key not in repr(settings) and "BEGIN" not in repr(settings)
    from mysql_cdc.kinds.mysql import follower_spec

    spec = follower_spec(settings)
    assert key not in repr(spec)
    assert MySQLSettings(**spec.settings).tls == settings.tls  # the job gets it back whole
