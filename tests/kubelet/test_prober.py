"""kubelet/prober.py: where probes go (the pod's IP, its sandbox), with real sockets and processes."""
import asyncio
import http.server
import os
import socket
import sys
import threading

import pytest

from kubelet import holder
from kubelet.prober import run_probe
from kubelet.streaming import Target
from tests.conftest import alive, wait_for


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
    assert asyncio.run(run_probe(http_probe, {}, 5.0, host="127.0.0.2"))[0]
    assert not asyncio.run(run_probe(http_probe, {}, 5.0))[0]  # the default host: nothing there
    named = {"httpGet": {"port": port, "host": "127.0.0.2"}}
    assert asyncio.run(run_probe(named, {}, 5.0, host="127.0.0.9"))[0]
    assert asyncio.run(run_probe({"tcpSocket": {"port": port}}, {}, 5.0, host="127.0.0.2"))[0]


def test_an_exec_probe_runs_with_the_containers_environment_and_working_directory(tmp_path):
    target = Target(str(tmp_path), "main", 0, dict(os.environ, WANTED="yes"), str(tmp_path))
    check = {"exec": {"command": [sys.executable, "-c", "import os, sys\n"
                                  f"sys.exit(os.environ['WANTED'] != 'yes' or os.getcwd() != {str(tmp_path)!r})"]}}
    assert asyncio.run(run_probe(check, {}, 10.0, exec_target=lambda: target)) == (True, "")
    failing = {"exec": {"command": [sys.executable, "-c", "print('not yet'); raise SystemExit(3)"]}}
    assert asyncio.run(run_probe(failing, {}, 10.0, exec_target=lambda: target)) == (
        False, f"command {failing['exec']['command']!r} exited with 3: not yet")
    missing = {"exec": {"command": ["no-such-program"]}}
    ok, message = asyncio.run(run_probe(missing, {}, 10.0, exec_target=lambda: target))
    assert not ok and "no-such-program" in message


def test_an_exec_probe_that_times_out_leaves_no_process(tmp_path):
    target = Target(str(tmp_path), "main", 0, dict(os.environ), None)
    pid_file = tmp_path / "pid"
    slow = {"exec": {"command": [sys.executable, "-c", "import os, time\n"
                                 f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"]}}
    assert asyncio.run(run_probe(slow, {}, 2.0, exec_target=lambda: target)) == (False, "probe timed out after 2s")
    pid = int(pid_file.read_text())
    wait_for(lambda: not alive(pid), message="the probe's process to be gone")


@pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox needs root")
def test_exec_probe_runs_in_the_sandbox(tmp_path):
    info = holder.start(str(tmp_path), "probed-pod", [])
    try:
        check = {"exec": {"command": [sys.executable, "-c",
                                      "import socket, sys; sys.exit(socket.gethostname() != 'probed-pod')"]}}
        sandboxed = Target(str(tmp_path), "main", 0, dict(os.environ), None,
                           sandbox={"pid": info.pid, "start": info.start_ticks})
        assert asyncio.run(run_probe(check, {}, 10.0, exec_target=lambda: sandboxed)) == (True, "")
        assert socket.gethostname() != "probed-pod"
        host = Target(str(tmp_path), "main", 0, dict(os.environ), None)
        assert not asyncio.run(run_probe(check, {}, 10.0, exec_target=lambda: host))[0]
    finally:
        holder.kill(info.pid, info.start_ticks)
