"""The ServiceAccount controller and the root CA publisher in a real controller-manager process:
a new namespace gets its "default" ServiceAccount and its kube-root-ca.crt, and both come back
when deleted or changed."""
from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import pytest

from components.controller_manager.__main__ import build_parser, config_from, main
from components.controller_manager.app import build_controllers
from components.controller_manager.informers import SharedInformers
from kubemu.apiclient import NotFound
from tests.conftest import wait_for

from . import cluster  # noqa: F401  (a fixture)


def ca_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def get(api, resource, name, namespace):
    try:
        return api.get(resource, name, namespace)
    except NotFound:
        return None


def test_a_new_namespace_gets_its_service_account_and_root_ca(cluster, tmp_path):
    pem = ca_pem()
    (tmp_path / "ca.crt").write_text(pem)
    manager = cluster.controller_manager("--controllers", "serviceaccount,root-ca-cert-publisher",
                                         "--root-ca-file", str(tmp_path / "ca.crt"), name="cm-sa")
    api = cluster.api
    ns = cluster.namespace("fresh")

    def published():
        cm = get(api, "configmaps", "kube-root-ca.crt", ns)
        return cm if cm and cm.get("data") == {"ca.crt": pem} else None

    sa = wait_for(lambda: get(api, "serviceaccounts", "default", ns), message="the default SA")
    cm = wait_for(published, message="kube-root-ca.crt with the CA")
    assert cm["metadata"]["annotations"]["kubernetes.io/description"].startswith("Contains a CA")
    for system in ("default", "kube-system"):
        wait_for(lambda: get(api, "serviceaccounts", "default", system), message=system)

    api.delete("serviceaccounts", "default", ns)
    wait_for(lambda: (get(api, "serviceaccounts", "default", ns) or sa)["metadata"]["uid"]
             != sa["metadata"]["uid"], message="the default SA made again")

    api.update("configmaps", dict(cm, data={"ca.crt": "forged"}), namespace=ns)
    wait_for(published, message="kube-root-ca.crt set back")
    api.delete("configmaps", "kube-root-ca.crt", ns)
    wait_for(lambda: (published() or cm)["metadata"]["uid"] != cm["metadata"]["uid"],
             message="kube-root-ca.crt made again")
    assert "Traceback" not in manager.log_text()


def test_the_root_ca_file_must_hold_a_certificate(tmp_path, capsys):
    (tmp_path / "ca.crt").write_text("not a certificate")
    for path in (tmp_path / "ca.crt", tmp_path / "missing.crt"):
        with pytest.raises(SystemExit) as exit:
            main(["--api", "ipc:///nowhere", "--root-ca-file", str(path)])
        assert exit.value.code == 2
        assert f"error reading root-ca-file at {path}: " in capsys.readouterr().err


def test_without_a_root_ca_file_the_publisher_does_not_run():
    args = ["--api", "ipc:///nowhere", "--controllers", "serviceaccount,root-ca-cert-publisher"]
    config = config_from(build_parser().parse_args(args))
    assert config.root_ca is None
    controllers = build_controllers(config, None, SharedInformers(None))
    assert [type(c).__name__ for c in controllers] == ["ServiceAccountsController"]
