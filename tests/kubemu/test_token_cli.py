"""`kubemu token`'s pure parts: kubeadm's table and join line (the commands themselves run in
tests/test_e2e_bootstrap.py against real processes)."""
from __future__ import annotations

import datetime

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubemu import bootstraptoken as bt
from kubemu import pki
from kubemu.token_cli import join_command, token_rows

NOW = 1_780_000_000.0


def test_token_list_is_kubeadms_table():
    secrets = [bt.secret_for(bt.BootstrapToken.new("bbbbbb.0123456789abcdef", NOW - 3600,
                                                   description="the second")),
               bt.secret_for(bt.BootstrapToken.new("aaaaaa.0123456789abcdef", NOW, ttl=0, groups=())),
               {"type": "Opaque", "metadata": {"namespace": "kube-system", "name": "x"}}]
    assert token_rows(secrets, NOW).splitlines() == [
        "TOKEN                     TTL         EXPIRES                USAGES                   DESCRIPTION   "
        "EXTRA GROUPS",
        "aaaaaa.0123456789abcdef   <forever>   <never>                authentication,signing   <none>        "
        "<none>",
        f"bbbbbb.0123456789abcdef   23h         {bt.format_time(NOW + 23 * 3600)}   authentication,signing   "
        "the second    system:bootstrappers:kubeadm:default-node-token"]


def test_the_join_command_pins_the_ca():
    ca = pki.make_ca(ec.generate_private_key(ec.SECP256R1()), datetime.datetime.now(datetime.timezone.utc))
    pem = ca.public_bytes(serialization.Encoding.PEM)
    assert join_command("127.0.0.1:6443", "abcdef.0123456789abcdef", pem) == (
        f"kubemu join 127.0.0.1:6443 --token abcdef.0123456789abcdef "
        f"--discovery-token-ca-cert-hash {bt.ca_cert_hash(pem)}")
