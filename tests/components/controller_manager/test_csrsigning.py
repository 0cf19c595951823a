"""The CSR signer's flags: --cluster-signing-cert-file and --cluster-signing-key-file, read once,
bad ones one line; without them csrsigning does not run. (The controllers' work is checked
against real processes in tests/test_e2e_bootstrap.py.)"""
from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from components.controller_manager.__main__ import build_parser, config_from, main
from components.controller_manager.app import build_controllers
from components.controller_manager.informers import SharedInformers
from kubemu import pki

API = ["--api", "ipc:///nowhere"]


@pytest.fixture
def ca_files(tmp_path):
    pki.ensure_ca(tmp_path)
    return str(tmp_path / "ca.crt"), str(tmp_path / "ca.key")


def test_the_signing_ca_is_read_and_the_signer_runs(ca_files):
    cert, key = ca_files
    config = config_from(build_parser().parse_args([
        *API, "--controllers", "csrsigning", "--cluster-signing-cert-file", cert,
        "--cluster-signing-key-file", key, "--cluster-signing-duration", "3600"]))
    assert config.cluster_signing is not None and config.cluster_signing_duration == 3600
    [signer] = build_controllers(config, None, SharedInformers(None))
    assert type(signer).__name__ == "CSRSigner" and signer.duration == 3600


def test_without_the_signing_ca_the_signer_does_not_run():
    config = config_from(build_parser().parse_args([*API, "--controllers", "csrsigning,csrapproving"]))
    assert [type(c).__name__ for c in build_controllers(config, None, SharedInformers(None))] == ["CSRApprover"]


def test_bad_signing_flags_are_one_line(ca_files, tmp_path, capsys):
    cert, key = ca_files
    other = tmp_path / "other.key"
    other.write_bytes(pki.key_pem(ec.generate_private_key(ec.SECP256R1())))
    for flags, words in ((["--cluster-signing-cert-file", cert], "go together"),
                         (["--cluster-signing-cert-file", cert, "--cluster-signing-key-file", str(other)],
                          f"{other} is not the key of {cert}"),
                         (["--cluster-signing-cert-file", key, "--cluster-signing-key-file", key],
                          "error reading the cluster signing CA: ")):
        with pytest.raises(SystemExit) as exit:
            main([*API, *flags])
        assert exit.value.code == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err
