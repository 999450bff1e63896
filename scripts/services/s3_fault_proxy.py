"""A fault-injecting HTTP proxy in front of an S3 endpoint (moto), on loopback, for the tests.

Every client of the product's object storage (boto3, delta-rs's object_store, Spark's S3A) is
pointed at ``endpoint_url``; the proxy forwards each request to the real endpoint unless a rule
(``FaultRule``) matches it, in which case it answers as a failing S3 would:

- ``"503"``, ``"500"``, ``"403"``: an S3 error (``SlowDown``, ``InternalError``, ``AccessDenied``)
  without forwarding the request;
- ``"reset"``: the request read, then the connection reset (RST) with no answer;
- ``"cut"``: the request forwarded, the answer's status, headers and half its body sent, then the
  connection reset (a connection reset in the middle of an object);
- ``"stall"``: no answer for ``stall_seconds``, then the connection closed (a timeout).

A rule applies to the first ``times`` requests it matches (``times=None``: every one). What was
injected is kept (method, path, fault), so a test can assert it really happened.

The proxy is a process of its own (``S3FaultProxy`` starts it; a test adds and clears rules through
its control path ``/__fault_proxy__/``): in the test process, its threads would wait for the GIL
while delta-rs's query engine holds it blocking on the very request the proxy has to answer.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

from .process import make_preexec

_ERRORS = {"503": ("SlowDown", "Please reduce your request rate."),
           "500": ("InternalError", "We encountered an internal error. Please try again."),
           "403": ("AccessDenied", "Access Denied")}
# hop-by-hop headers, and Expect (the proxy answers 100-continue itself; S3 signatures leave it out)
_NOT_FORWARDED = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "te", "upgrade"}


@dataclass
class FaultRule:
    fault: str  # one of "503", "500", "403", "reset", "cut", "stall"
    method: str | None = None  # GET, PUT, POST, HEAD, DELETE; None: any
    path: str = ""  # a regular expression searched in the request's path and query
    times: int | None = 1  # how many matching requests fail (None: all)
    stall_seconds: float = 5.0

    def matches(self, method: str, path: str) -> bool:
        return (self.times is None or self.times > 0) and (self.method in (None, method)) \
            and re.search(self.path, path) is not None


CONTROL = "/__fault_proxy__/"
_SCRIPTS = Path(__file__).resolve().parents[1]  # where ``services`` is a package


class S3FaultProxy:
    """The proxy's process, seen from a test: ``add`` and ``clear`` rules, read ``injected``."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self._proc: subprocess.Popen | None = None
        self.endpoint_url = ""

    def start(self) -> "S3FaultProxy":
        self._proc = subprocess.Popen([sys.executable, "-m", "services.s3_fault_proxy", self.upstream],
                                      stdout=subprocess.PIPE, text=True, cwd=str(_SCRIPTS),
                                      preexec_fn=make_preexec(True))
        self.endpoint_url = self._proc.stdout.readline().strip()
        if not self.endpoint_url.startswith("http://"):
            raise RuntimeError(f"the S3 fault proxy did not start: {self.endpoint_url!r}")
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)

    def _control(self, method: str, body: object = None):
        request = urllib.request.Request(self.endpoint_url + CONTROL, method=method,
                                         data=json.dumps(body).encode() if body is not None else None)
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read() or b"null")

    def add(self, *rules: "FaultRule") -> None:
        self._control("POST", [asdict(r) for r in rules])

    def clear(self) -> None:
        """No more faults, and nothing injected so far."""
        self._control("DELETE")

    @property
    def injected(self) -> list[tuple[str, str, str]]:
        return [tuple(i) for i in self._control("GET")]


class _FaultState:
    """The proxy process's rules and what it injected."""

    def __init__(self, upstream: str):
        parsed = urlparse(upstream)
        self.upstream = (parsed.hostname, parsed.port or 80)
        self.rules: list[FaultRule] = []
        self.injected: list[tuple[str, str, str]] = []
        self.requests = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(_ProxyHandler):
            owner = proxy

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    def control(self, method: str, body: bytes) -> object:
        with self._lock:
            if method == "POST":
                self.rules.extend(FaultRule(**r) for r in json.loads(body))
            elif method == "DELETE":
                self.rules.clear()
                self.injected.clear()
            return self.injected

    def fault_for(self, method: str, path: str) -> FaultRule | None:
        with self._lock:
            self.requests += 1
            for rule in self.rules:
                if rule.matches(method, path):
                    if rule.times is not None:
                        rule.times -= 1
                    self.injected.append((method, path, rule.fault))
                    return rule
        return None


class _ProxyHandler(BaseHTTPRequestHandler):
    owner: _FaultState
    protocol_version = "HTTP/1.1"  # keep-alive, as S3 clients expect

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _reset(self) -> None:
        # SO_LINGER with a zero timeout: close() sends RST, not FIN (a reset, not a clean close)
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def _error(self, fault: str) -> None:
        code, message = _ERRORS[fault]
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message>'
                f"<RequestId>injected</RequestId></Error>").encode()
        self.send_response(int(fault))
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        upstream = http.client.HTTPConnection(*self.owner.upstream, timeout=120)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _NOT_FORWARDED}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
            return response.status, [(k, v) for k, v in response.getheaders() if k.lower() not in _NOT_FORWARDED], data
        finally:
            upstream.close()

    def _handle(self) -> None:
        body = self._body()
        if self.path.startswith(CONTROL):
            answer = json.dumps(self.owner.control(self.command, body)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
            return
        rule = self.owner.fault_for(self.command, self.path)
        fault = rule.fault if rule else None
        if fault in _ERRORS:
            return self._error(fault)
        if fault == "reset":
            return self._reset()
        if fault == "stall":
            time.sleep(rule.stall_seconds)
            self.close_connection = True
            return
        status, headers, data = self._forward(body)
        self.send_response(status)
        for key, value in headers:
            # (a HEAD's Content-Length is the object's: kept; any other is the body sent here)
            if key.lower() != "content-length" or self.command == "HEAD":
                self.send_header(key, value)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if fault == "cut":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            return self._reset()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle


def main() -> None:
    """``python -m services.s3_fault_proxy <upstream URL>``: serve until terminated; the first line
    on stdout is the proxy's endpoint URL."""
    state = _FaultState(sys.argv[1])
    host, port = state.server.server_address[:2]
    print(f"http://{host}:{port}", flush=True)
    state.server.serve_forever()


if __name__ == "__main__":
    main()
