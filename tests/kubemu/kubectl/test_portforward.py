"""kubemu/kubectl/portforward.py: kubectl's port arguments (the tunnel itself: tests/test_e2e_portforward.py)."""
from __future__ import annotations

import pytest

from kubemu.kubectl.portforward import PortError, parse_ports


def test_ports_read_as_kubectl_reads_them():
    assert parse_ports(["8000", "18080:8000", ":9000"]) == [(8000, 8000), (18080, 8000), (0, 9000)]


@pytest.mark.parametrize("spec,message", [
    ("x:80", "error parsing local port 'x': strconv.ParseUint: parsing \"x\": invalid syntax"),
    ("80:y", "error parsing remote port 'y': strconv.ParseUint: parsing \"y\": invalid syntax"),
    ("99999", "error parsing remote port '99999': strconv.ParseUint: parsing \"99999\": value out of range"),
    ("80:0", "remote port must be > 0"),
])
def test_bad_ports_are_kubectls_errors(spec, message):
    with pytest.raises(PortError) as err:
        parse_ports([spec])
    assert str(err.value) == message
