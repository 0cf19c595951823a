"""`kubemu token`'s pure parts: kubeadm's table, the Secrets it skips, and the join line (the
commands themselves run in tests/test_e2e_bootstrap.py against real processes)."""
from __future__ import annotations

import base64
import contextlib
import datetime

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubemu import bootstraptoken as bt
from kubemu import clusterinfo, pki
from kubemu.token_cli import join_line, token_rows, unreadable

NOW = 1_780_000_000.0


def with_data(secret: dict, **changes) -> dict:
    """`secret` with data keys set (a str) or removed (None)."""
    data = dict(secret["data"])
    for key, value in changes.items():
        key = key.replace("_", "-")
        if value is None:
            data.pop(key, None)
        else:
            data[key] = base64.b64encode(value.encode()).decode()
    return {**secret, "data": data}


def test_token_list_is_kubeadms_table():
    secrets = [bt.secret_for(bt.BootstrapToken.new("bbbbbb.0123456789abcdef", NOW - 3600,
                                                   description="the second")),
               bt.secret_for(bt.BootstrapToken.new("aaaaaa.0123456789abcdef", NOW, ttl=0, groups=())),
               {"type": "Opaque", "metadata": {"namespace": "kube-system", "name": "x"}}]
    table, skipped = token_rows(secrets, NOW)
    assert table.splitlines() == [
        "TOKEN                     TTL         EXPIRES                USAGES                   DESCRIPTION   "
        "EXTRA GROUPS",
        "aaaaaa.0123456789abcdef   <forever>   <never>                authentication,signing   <none>        "
        "<none>",
        f"bbbbbb.0123456789abcdef   23h         {bt.format_time(NOW + 23 * 3600)}   authentication,signing   "
        "the second    system:bootstrappers:kubeadm:default-node-token"]
    assert skipped == []   # a Secret of another type is not a token kubeadm would look at


def test_a_token_with_a_malformed_expiration_is_skipped_with_kubeadms_warning():
    good = bt.secret_for(bt.BootstrapToken.new("aaaaaa.0123456789abcdef", NOW))
    bad = with_data(bt.secret_for(bt.BootstrapToken.new("cccccc.0123456789abcdef", NOW)),
                    expiration="next tuesday")
    table, skipped = token_rows([bad, good], NOW)
    assert [line.split()[0] for line in table.splitlines()] == ["TOKEN", "aaaaaa.0123456789abcdef"]
    assert skipped == ['can\'t parse expiration time of bootstrap token "bootstrap-token-cccccc": '
                       'unparseable expiration time "next tuesday": not an RFC 3339 date-time']


def test_every_unreadable_token_secret_is_said_in_kubeadms_words():
    good = bt.secret_for(bt.BootstrapToken.new("aaaaaa.0123456789abcdef", NOW))
    assert unreadable(good) is None
    assert unreadable(with_data(good, token_id=None)) == \
        "bootstrap Token Secret has no token-id data: bootstrap-token-aaaaaa"
    assert unreadable(with_data(good, token_id="bbbbbb")) == (
        "bootstrap token name is not of the form 'bootstrap-token-(token-id)'. "
        'Actual: "bootstrap-token-aaaaaa". Expected: "bootstrap-token-bbbbbb"')
    assert unreadable(with_data(good, token_secret=None)) == \
        "bootstrap Token Secret has no token-secret data: bootstrap-token-aaaaaa"
    assert unreadable(with_data(good, token_secret="SHORT")).startswith(
        "bootstrap Token Secret is invalid and couldn't be parsed: the bootstrap token \"aaaaaa.SHORT\"")
    assert unreadable({**good, "data": {**good["data"], "token-id": "%%%"}}) == \
        "bootstrap Token Secret has data that is not base64: bootstrap-token-aaaaaa"


class FakeApi:
    def __init__(self, secrets=(), cluster_info=None):
        self.secrets, self.cluster_info, self.created = list(secrets), cluster_info, []

    def list_all(self, resource, namespace, field_selector=None):
        assert (resource, namespace, field_selector) == ("secrets", bt.NAMESPACE, f"type={bt.SECRET_TYPE}")
        return {"items": self.secrets}

    def get(self, resource, name, namespace=None):
        from kubemu.apiclient import NotFound
        assert (resource, name, namespace) == ("configmaps", "cluster-info", "kube-public")
        if self.cluster_info is None:
            raise NotFound('configmaps "cluster-info" not found')
        return self.cluster_info

    def create(self, resource, obj, namespace=None):
        self.created.append(obj)
        return obj


@pytest.fixture
def fake_api(monkeypatch, tmp_path):
    """`kubemu token` run in-process against a FakeApi, instead of a cluster's apiserver."""
    from kubemu.kubectl import session

    holder = {}

    @contextlib.contextmanager
    def connect(_obj):
        yield holder["api"]
    monkeypatch.setattr(session, "connect", connect)

    def run(api, *args):
        from kubemu.cli import main
        holder["api"] = api
        return CliRunner().invoke(main, ["--state-dir", str(tmp_path), "token", *args])
    return run


def test_token_list_warns_on_stderr_and_exits_zero(fake_api):
    bad = with_data(bt.secret_for(bt.BootstrapToken.new("cccccc.0123456789abcdef", NOW)), expiration="soon")
    good = bt.secret_for(bt.BootstrapToken.new("aaaaaa.0123456789abcdef", NOW))
    result = fake_api(FakeApi([bad, good]), "list")
    assert result.exit_code == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == ["TOKEN", "aaaaaa.0123456789abcdef"]
    assert result.stderr == ('can\'t parse expiration time of bootstrap token "bootstrap-token-cccccc": '
                             'unparseable expiration time "soon": not an RFC 3339 date-time\n')


def ca_pem() -> bytes:
    ca = pki.make_ca(ec.generate_private_key(ec.SECP256R1()), datetime.datetime.now(datetime.timezone.utc))
    return ca.public_bytes(serialization.Encoding.PEM)


def test_the_join_line_is_up_s_join_command_on_one_line_for_cluster_info_s_address_and_ca():
    pem = ca_pem()
    info = clusterinfo.configmap("https://198.18.0.1:6443", pem)
    assert join_line(info, "abcdef.0123456789abcdef") == (
        f"kubemu join 198.18.0.1:6443 --token abcdef.0123456789abcdef "
        f"--discovery-token-ca-cert-hash {bt.ca_cert_hash(pem)}")
    flat = bt.join_command("198.18.0.1:6443", "abcdef.0123456789abcdef", bt.ca_cert_hash(pem))
    assert join_line(info, "abcdef.0123456789abcdef").split() == flat.replace("\\", "").split()


def test_a_cluster_info_without_address_or_ca_is_one_error():
    with pytest.raises(ValueError, match="there is no kubeconfig key in the cluster-info ConfigMap"):
        join_line({"data": {}}, "abcdef.0123456789abcdef")
    no_ca = clusterinfo.configmap("https://198.18.0.1:6443", b"")
    with pytest.raises(ValueError, match="the CA in the cluster-info ConfigMap is not a certificate"):
        join_line(no_ca, "abcdef.0123456789abcdef")


def test_print_join_command_reads_cluster_info_before_making_the_token(fake_api):
    pem = ca_pem()
    api = FakeApi(cluster_info=clusterinfo.configmap("https://198.18.0.1:6443", pem))
    result = fake_api(api, "create", "abcdef.0123456789abcdef", "--print-join-command")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (f"kubemu join 198.18.0.1:6443 --token abcdef.0123456789abcdef "
                             f"--discovery-token-ca-cert-hash {bt.ca_cert_hash(pem)}\n")
    assert [s["metadata"]["name"] for s in api.created] == ["bootstrap-token-abcdef"]

    missing = FakeApi()
    result = fake_api(missing, "create", "--print-join-command")
    assert result.exit_code == 1 and missing.created == []
    assert result.stderr == 'error: failed to get join command: configmaps "cluster-info" not found\n'
