"""Real services for the tests, from Debian's packages: redis-server, HAProxy, Prometheus.

Each runs as a child process on 127.0.0.1 with an ephemeral port (redis-server and HAProxy
from the command docs/deployment.md gives, `support.guide`) and is ready when it says so
(redis-server's and Prometheus's log lines, `READY=1` on the notify socket for HAProxy and
the replicas): no sleeping. nox's `tests` session installs them when they are missing;
without them these tests skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .guide import ROOT, block, command, put_in


def free_port() -> int:
    """A port no one listens on now (the service binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def binary(name: str) -> str:
    path = shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin") / name, Path("/usr/bin") / name) if p.exists()), None
    )
    if path is None:
        pytest.skip(f"{name} is not installed (nox's tests session installs it: python3 dev.py nox -s tests)")
    return path


def stop_process(process: subprocess.Popen[Any], timeout: float = 10) -> None:
    """Terminate `process`, and kill it if it has not exited within `timeout` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Redis:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@contextmanager
def redis_server() -> Iterator[Redis]:
    """redis-server on 127.0.0.1, run as docs/deployment.md runs it (its port put in), ready
    to answer once this yields."""
    path = binary("redis-server")
    for _ in range(5):  # the port may be taken between choosing and binding it
        port = free_port()
        argv = [path, *command("redis", {"6379": str(port)})[1:]]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert process.stdout is not None
        for line in process.stdout:
            if b"Ready to accept connections" in line:
                try:
                    yield Redis(port, process)
                finally:
                    stop_process(process)
                    process.stdout.close()
                return
        process.wait()
        process.stdout.close()
    raise RuntimeError("redis-server did not start")


@contextmanager
def silent_listener() -> Iterator[int]:
    """A port that accepts connections and never answers: a store that hangs."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield int(sock.getsockname()[1])


@contextmanager
def notified(argv: list[str], log: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`argv` started with a notify socket of its own (systemd's readiness protocol, as
    docs/deployment.md sets it up), yielded with the state it sent once it said `READY=1`;
    its output goes to `log`. Stopped (SIGTERM, then SIGKILL) when the block ends."""
    # A directory of its own: a socket's path must be short (108 bytes), a test's may not be.
    with tempfile.TemporaryDirectory() as short, socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(f"{short}/notify")
        notify.settimeout(1)
        with log.open("ab") as out:
            process = subprocess.Popen(
                argv,
                cwd=ROOT,
                env={**os.environ, "NOTIFY_SOCKET": f"{short}/notify"},
                stdout=out,
                stderr=out,
            )
        try:
            state, deadline = "", time.monotonic() + 60
            while "READY=1" not in state.splitlines():
                try:
                    state = notify.recv(4096).decode()
                except TimeoutError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        tail = log.read_text(errors="replace")[-2000:]
                        raise RuntimeError(f"{argv[0]} never said it was ready: {tail}") from None
            yield process, state
        finally:
            stop_process(process)


@dataclass
class HAProxy:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


def haproxy_config(frontend: int, backends: list[int]) -> str:
    """docs/deployment.md's HAProxy configuration with the test's ports put in."""
    ports = {"127.0.0.1:8000": f"127.0.0.1:{frontend}"}
    ports |= {f"127.0.0.1:{8001 + i}": f"127.0.0.1:{port}" for i, port in enumerate(backends)}
    return put_in(block("haproxy.cfg"), ports)


@contextmanager
def haproxy(backends: list[int], directory: Path) -> Iterator[HAProxy]:
    """HAProxy in front of `backends` (three: the guide's), as docs/deployment.md runs it,
    accepting connections once this yields (it said `READY=1`)."""
    path = binary("haproxy")
    frontend = free_port()
    config = directory / "haproxy.cfg"
    config.write_text(haproxy_config(frontend, backends))
    subprocess.run([path, "-c", "-q", "-f", str(config)], check=True)
    argv = [path, *command("haproxy", {"haproxy.cfg": str(config)})[1:]]
    with notified(argv, directory / "haproxy.log") as (process, _):
        yield HAProxy(frontend, process)


@dataclass
class Prometheus:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


PROMETHEUS_CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: mcp
    static_configs:
      - targets: ["{target}"]
"""
"""How the test scrapes a server: every second (the default is a minute)."""


@contextmanager
def prometheus(target: str) -> Iterator[Prometheus]:
    """Debian's Prometheus scraping `target` (host:port), on 127.0.0.1, ready to answer its
    HTTP API once this yields. Its configuration and its storage are a temporary directory's,
    removed when it stops: nothing of a run is kept."""
    path = binary("prometheus")
    with tempfile.TemporaryDirectory(prefix="mcp-prometheus-") as directory:
        config = Path(directory) / "prometheus.yml"
        config.write_text(PROMETHEUS_CONFIG.format(target=target), encoding="utf-8")
        for _ in range(5):  # the port may be taken between choosing and binding it
            port = free_port()
            argv = [
                path,
                f"--config.file={config}",
                f"--storage.tsdb.path={Path(directory) / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ]
            process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            assert process.stderr is not None
            for line in process.stderr:
                if b"Server is ready to receive web requests." in line:
                    # It logs on (compactions, a scrape gone wrong): drained, so that it never blocks.
                    drain = threading.Thread(target=process.stderr.read, daemon=True)
                    drain.start()
                    try:
                        yield Prometheus(port, process)
                    finally:
                        stop_process(process)
                        drain.join(timeout=10)
                        process.stderr.close()
                    return
            process.wait()
            process.stderr.close()
    raise RuntimeError("prometheus did not start")
