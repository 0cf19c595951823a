"""The HTTPS door's test bed: a real 3-replica store and an apiserver serving HTTPS with a
throwaway cluster PKI (kubemu.pki), clients with the admin's or another user's certificate,
and a kubeconfig for real kubectl."""
from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import pytest

from kubemu import kubeconfig, pki
from tests.conftest import DEADLINE, wait_for
from tests.components.apiserver import APIServerEnv, running

JANE = pki.CertSpec("jane", "jane", ("developers",))  # a user no binding names


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HTTPSEnv(APIServerEnv):
    def __init__(self, directory: Path):
        self.pki_dir = directory / "pki"
        ca, _ = pki.ensure_ca(self.pki_dir)
        for spec in (pki.APISERVER, pki.ADMIN, JANE):
            pki.ensure_cert(self.pki_dir, spec, ca)
        pki.ensure_service_account_keys(self.pki_dir)
        self.ca = ca
        self.port = free_port()
        p = self.pki_dir
        super().__init__(directory, extra_args=(
            "--secure-port", str(self.port), "--tls-cert-file", str(p / "apiserver.crt"),
            "--tls-private-key-file", str(p / "apiserver.key"), "--client-ca-file", str(p / "ca.crt"),
            "--service-account-key-file", str(p / "sa.pub"),
            "--service-account-signing-key-file", str(p / "sa.key")))
        self.server = f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        super().start()
        wait_for(lambda: self.request("GET", "/readyz")[0] == 200, message="the HTTPS door to be ready")

    def context(self, user: str | None = "admin") -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        if user:
            ctx.load_cert_chain(str(self.pki_dir / f"{user}.crt"), str(self.pki_dir / f"{user}.key"))
        return ctx

    def connection(self, user: str | None = "admin", timeout: float = 15.0) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context(user), timeout=timeout)

    def request(self, method: str, path: str, body=None, headers: dict | None = None, user: str | None = "admin"):
        """(status, headers, body bytes); a dict body is sent as JSON."""
        hdrs = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn = self.connection(user)
        try:
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        except (OSError, http.client.HTTPException):
            return 0, {}, b""
        finally:
            conn.close()

    def json(self, method: str, path: str, body=None, headers: dict | None = None, user: str | None = "admin"):
        code, _, data = self.request(method, path, body, headers, user)
        return code, json.loads(data) if data else None

    def kubeconfig(self, user: str = "admin") -> Path:
        path = self.dir / f"{user}.conf"
        cfg = kubeconfig.build(self.server, self.ca.cert_pem, user,
                               (self.pki_dir / f"{user}.crt").read_bytes(), (self.pki_dir / f"{user}.key").read_bytes())
        path.write_text(kubeconfig.dump(cfg))
        return path


class Kubectl:
    """Real kubectl with a fresh HOME (it caches discovery there) and this env's kubeconfig."""

    def __init__(self, env: HTTPSEnv, home: Path, user: str = "admin"):
        self.env = env
        self.home = home
        self.config = env.kubeconfig(user)

    def argv(self, *args) -> list[str]:
        return ["kubectl", "--kubeconfig", str(self.config), *args]

    def run(self, *args, input: str | None = None, check: bool = True, timeout: float = DEADLINE * 3):
        done = subprocess.run(self.argv(*args), env={"HOME": str(self.home), "PATH": os.environ["PATH"]},
                              capture_output=True, text=True, input=input, timeout=timeout,
                              stdin=None if input is not None else subprocess.DEVNULL)
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)} failed ({done.returncode}):\n" \
                                         f"{done.stdout}\n{done.stderr}"
        return done

    def popen(self, *args) -> subprocess.Popen:
        return subprocess.Popen(self.argv(*args), env={"HOME": str(self.home), "PATH": os.environ["PATH"]},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture(scope="module")
def https(tmp_path_factory):
    path = tmp_path_factory.mktemp("h")
    yield from running(HTTPSEnv(path), path)
