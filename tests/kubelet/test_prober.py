"""kubelet/prober.py: where probes go (the pod's IP, its sandbox), with real sockets and processes."""
import asyncio
import http.server
import os
import shutil
import socket
import sys
import threading

import pytest

from kubelet import holder
from kubelet.prober import run_probe, sandbox_argv


@pytest.fixture
def server():
    """An HTTP server on 127.0.0.2 only (a 'pod IP' on loopback): a probe sent to 127.0.0.1 fails."""
    httpd = http.server.HTTPServer(("127.0.0.2", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_http_and_tcp_probes_go_to_the_pods_ip_unless_they_name_a_host(server):
    port = server
    http_probe = {"httpGet": {"port": port, "path": "/"}}
    assert asyncio.run(run_probe(http_probe, {}, {}, 5.0, host="127.0.0.2"))[0]
    assert not asyncio.run(run_probe(http_probe, {}, {}, 5.0))[0]  # the default host: nothing there
    named = {"httpGet": {"port": port, "host": "127.0.0.2"}}
    assert asyncio.run(run_probe(named, {}, {}, 5.0, host="127.0.0.9"))[0]
    assert asyncio.run(run_probe({"tcpSocket": {"port": port}}, {}, {}, 5.0, host="127.0.0.2"))[0]


def test_exec_probe_argv_enters_the_sandbox():
    argv = sandbox_argv(["check"], 42, "/srv")
    assert argv[1:] == ["--target=42", "--net", "--uts", "--ipc", "--mount", "--wd=/srv", "--", "check"]
    assert sandbox_argv(["check"], None, "/srv") == ["check"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("nsenter"), reason="a sandbox needs root and nsenter")
def test_exec_probe_runs_in_the_sandbox(tmp_path):
    info = holder.start(str(tmp_path), "probed-pod", [])
    try:
        check = {"exec": {"command": [sys.executable, "-c",
                                      "import socket, sys; sys.exit(socket.gethostname() != 'probed-pod')"]}}
        assert asyncio.run(run_probe(check, {}, dict(os.environ), 10.0, sandbox_pid=info.pid)) == (True, "")
        assert socket.gethostname() != "probed-pod"
        assert not asyncio.run(run_probe(check, {}, dict(os.environ), 10.0))[0]
    finally:
        holder.kill(info.pid, info.start_ticks)
