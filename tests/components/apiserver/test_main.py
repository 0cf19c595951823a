"""python -m components.apiserver: what it cannot start with is one line and exit 1, no traceback."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kubemu import eventloop, pki
from tests.components.apiserver import REPO
from tests.conftest import DEADLINE, wait_for


def _start(tmp_path, *https_args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "components.apiserver", "--listen", f"ipc://{tmp_path}/api.sock",
         "--store-endpoints", f"ipc://{tmp_path}/no-store.sock", *https_args],
        cwd=str(REPO), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=DEADLINE * 3)


@pytest.fixture
def certs(tmp_path):
    ca, _ = pki.ensure_ca(tmp_path)
    pki.ensure_cert(tmp_path, pki.APISERVER, ca)
    (tmp_path / "garbage.pem").write_text("not a key\n")
    return tmp_path


@pytest.mark.parametrize("flags, what", [
    (("--tls-cert-file", "missing.crt", "--tls-private-key-file", "apiserver.key"),
     "apiserver: --tls-cert-file {d}/missing.crt / --tls-private-key-file {d}/apiserver.key: "),
    (("--tls-cert-file", "apiserver.crt", "--tls-private-key-file", "garbage.pem"),
     "apiserver: --tls-cert-file {d}/apiserver.crt / --tls-private-key-file {d}/garbage.pem: "),
    (("--tls-cert-file", "apiserver.crt", "--tls-private-key-file", "apiserver.key", "--client-ca-file", "nope.crt"),
     "apiserver: --client-ca-file / --service-account-key-file: "),
    (("--tls-cert-file", "apiserver.crt", "--tls-private-key-file", "apiserver.key",
      "--service-account-key-file", "garbage.pem"), "apiserver: --client-ca-file / --service-account-key-file: "),
    (("--tls-cert-file", "apiserver.crt", "--tls-private-key-file", "apiserver.key",
      "--service-account-signing-key-file", "garbage.pem"),
     "apiserver: --service-account-signing-key-file {d}/garbage.pem: "),
])
def test_a_file_https_cannot_read_is_one_line(certs, flags, what):
    done = _start(certs, *[str(certs / f) if f.endswith((".crt", ".key", ".pem")) else f for f in flags])
    assert done.returncode == 1, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(what.format(d=certs)), done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_secure_port_in_use_is_one_line(certs):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _start(certs, "--secure-port", str(port), "--tls-cert-file", str(certs / "apiserver.crt"),
                      "--tls-private-key-file", str(certs / "apiserver.key"))
    assert done.returncode == 1, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"apiserver: --bind-address 127.0.0.1 --secure-port {port}: ")
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("choice, loaded", [("", True), ("asyncio", False)])
def test_the_apiserver_runs_on_uvloop_unless_told(tmp_path, choice, loaded):
    pytest.importorskip("uvloop")
    env = {**os.environ, eventloop.ENV: choice}
    proc = subprocess.Popen(
        [sys.executable, "-m", "components.apiserver", "--listen", f"ipc://{tmp_path}/api.sock",
         "--store-endpoints", f"ipc://{tmp_path}/no-store.sock"],
        cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: (tmp_path / "api.sock").exists(), message="the apiserver's wire socket")
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        assert ("/uvloop/loop." in maps) is loaded
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 0 and b"Traceback" not in out, out


@pytest.mark.parametrize("flags, line", [
    (("--service-cluster-ip-range", "10.96.0.1/12"),
     "--service-cluster-ip-range 10.96.0.1/12: not an IPv4 CIDR (10.96.0.1/12 has host bits set)"),
    (("--service-cluster-ip-range", "fd00::/108"), "--service-cluster-ip-range fd00::/108: not an IPv4 CIDR"),
    (("--service-cluster-ip-range", "10.0.0.0/31"), "--service-cluster-ip-range 10.0.0.0/31: too small"),
    (("--service-node-port-range", "32767-30000"),
     "--service-node-port-range '32767-30000': not a port range (e.g. 30000-32767)"),
    (("--advertise-address", "my-host"), "--advertise-address my-host: not an IP address"),
    (("--external-address", "other-host"), "--external-address other-host: not an IP address"),
])
def test_a_wrong_service_flag_is_one_line(tmp_path, flags, line):
    done = _start(tmp_path, *flags)
    assert done.returncode == 1, done
    assert done.stderr.splitlines()[0].startswith(line) and len(done.stderr.splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("flags, sharing", [([], False), (["--permit-port-sharing"], True)])
def test_permit_port_sharing_reaches_the_https_door(flags, sharing):
    from components.apiserver.__main__ import build_parser, https_config

    args = build_parser().parse_args(["--listen", "ipc:///x", "--store-endpoints", "ipc:///y", *flags])
    assert https_config(args).permit_port_sharing is sharing
