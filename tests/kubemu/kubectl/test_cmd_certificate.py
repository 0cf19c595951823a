"""kubemu certificate approve|deny: the decision each adds, as kubectl certificate adds it."""
from __future__ import annotations

import pytest

from kubemu.kubectl.cmd_certificate import decided
from kubemu.kubectl.session import CommandError

NOW = 1_780_000_000.0


def csr(*types: str) -> dict:
    return {"metadata": {"name": "c"}, "status": {"conditions": [{"type": t, "status": "True"} for t in types]}}


def test_approve_adds_kubectls_condition():
    assert decided(csr(), "approve", NOW)["status"]["conditions"] == [{
        "type": "Approved", "status": "True", "reason": "KubectlApprove",
        "message": "This CSR was approved by kubectl certificate approve.",
        "lastUpdateTime": "2026-05-28T20:26:40Z"}]
    assert decided(csr(), "deny", NOW)["status"]["conditions"][0]["reason"] == "KubectlDeny"


def test_an_already_decided_request_is_left_alone_unless_forced():
    assert decided(csr("Approved"), "approve", NOW) is None
    assert len(decided(csr("Approved"), "approve", NOW, force=True)["status"]["conditions"]) == 2


def test_the_opposite_decision_is_an_error():
    with pytest.raises(CommandError, match='certificate signing request "c" is already Denied'):
        decided(csr("Denied"), "approve", NOW)
    with pytest.raises(CommandError, match='certificate signing request "c" is already Approved'):
        decided(csr("Approved"), "deny", NOW)
