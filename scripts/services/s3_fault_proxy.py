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
injected is kept in ``injected`` (method, path, fault), so a test can assert it really happened.
The proxy runs in a thread of the test process: a test adds and clears rules directly.
"""

from __future__ import annotations

import http.client
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

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


class S3FaultProxy:
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

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True)

    @property
    def endpoint_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "S3FaultProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, *rules: FaultRule) -> None:
        with self._lock:
            self.rules.extend(rules)

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

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
    owner: S3FaultProxy
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
