"""tests/netns.py's "another machine": it is reachable from this one, and whatever happens,
what it made is removed (a namespace or link left behind would outlive the test run)."""
from __future__ import annotations

import socket
import sys

import pytest

from tests import netns

pytestmark = netns.NEEDS


def exists(machine_ns: str, link: str) -> tuple[bool, bool]:
    namespaces = netns.ip("netns", "list").stdout.split()
    return machine_ns in namespaces, netns.ip("link", "show", link, check=False).returncode == 0


def test_another_machine_is_reachable_and_removed_afterwards():
    with netns.another_machine() as machine:
        link = netns.ip("-o", "addr", "show", "to", machine.host).stdout.split()[1]
        assert exists(machine.ns, link) == (True, True)
        with socket.create_server((machine.host, 0)) as server:
            port = server.getsockname()[1]
            dial = machine.run([sys.executable, "-S", "-c", "import socket, sys; socket.create_connection("
                                "(sys.argv[1], int(sys.argv[2])), timeout=10).close()", machine.host, str(port)],
                               timeout=30)
        assert dial.returncode == 0, dial.stderr
    assert exists(machine.ns, link) == (False, False)


def test_a_failure_halfway_through_making_it_leaves_nothing(monkeypatch):
    made = []
    real_ip = netns.ip

    def ip(*args, check=True):
        if args[:2] == ("addr", "add"):  # after the namespace and the link
            raise RuntimeError("ip addr add: no")
        done = real_ip(*args, check=check)
        if args[:2] in (("netns", "add"), ("link", "add")):
            made.append(args[2])
        return done
    monkeypatch.setattr(netns, "ip", ip)
    with pytest.raises(RuntimeError, match="no"):
        with netns.another_machine():
            pass
    ns, link = made
    assert exists(ns, link) == (False, False)
