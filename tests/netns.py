""""Another machine" for end-to-end tests: a network namespace joined to this one by a veth pair,
addressed from a /30 of 198.18.0.0/15 (the benchmarking range) that nothing on this machine
uses. What `another_machine()` makes it always removes, even when making it failed halfway.

    pytestmark = netns.NEEDS
    with netns.another_machine() as machine:
        kubemu up --apiserver-advertise-address machine.host ...
        machine.kubemu(join_dir, "join", ...)     # run inside the namespace
"""
from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import NamedTuple

import pytest

NEEDS = pytest.mark.skipif(os.geteuid() != 0 or not (shutil.which("ip") and shutil.which("nsenter")),
                           reason="makes a network namespace and a veth pair: needs root, `ip` and `nsenter`")
BENCHMARK_RANGE = ipaddress.IPv4Network("198.18.0.0/15")
KUBEMU = os.path.join(os.path.dirname(sys.executable), "kubemu")


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def free_slash30() -> ipaddress.IPv4Network:
    """A /30 of the benchmarking range that no address or route of this machine touches (picked
    at random: another test may be making its own)."""
    used = [ipaddress.ip_interface(word).network
            for line in ip("-4", "-o", "addr", "show").stdout.splitlines()
            for word in line.split()[3:4]]
    used += [ipaddress.ip_network(line.split()[0]) for line in ip("-4", "route", "show").stdout.splitlines()
             if line.split()[0][0].isdigit()]
    for net in random.sample(list(BENCHMARK_RANGE.subnets(new_prefix=30)), 200):
        if not any(net.overlaps(u) for u in used):
            return net
    pytest.skip("no free /30 in 198.18.0.0/15")


class Machine(NamedTuple):
    ns: str       # the namespace's name (/run/netns/<ns>)
    host: str     # this side's address
    inside: str   # the namespace's address

    def run(self, argv: list[str], **kw) -> subprocess.CompletedProcess:
        """`argv` run in the namespace's network. nsenter rather than `ip netns exec`: that one
        also mounts a /sys of its own, without the cgroup file system, and a node started in
        it would run without its cgroup."""
        kw.setdefault("timeout", 600)
        return subprocess.run(["nsenter", f"--net=/run/netns/{self.ns}", *argv], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, **kw)

    def kubemu(self, state_dir, *args: str, timeout: float) -> subprocess.CompletedProcess:
        """`kubemu --state-dir STATE_DIR ARGS` in the namespace (its processes marked with
        KUBEMU_STATE_DIR=STATE_DIR for the conftest's leak checks)."""
        env = dict(os.environ, KUBEMU_STATE_DIR=str(state_dir), COLUMNS="200")
        return self.run([KUBEMU, "--state-dir", str(state_dir), *args], env=env, timeout=timeout)


@contextlib.contextmanager
def another_machine() -> Iterator[Machine]:
    """A namespace and its veth link, removed on the way out (only what was made)."""
    tag = secrets.token_hex(3)
    ns, host_if, ns_if = f"kubemu-{tag}", f"kmh{tag}", f"kmn{tag}"
    net = free_slash30()
    host, inside = (str(a) for a in net.hosts())
    undo: list[tuple[str, ...]] = []
    try:
        ip("netns", "add", ns)
        undo.append(("netns", "del", ns))
        ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", ns)
        undo.append(("link", "del", host_if))  # its peer goes with it
        ip("addr", "add", f"{host}/{net.prefixlen}", "dev", host_if)
        ip("link", "set", host_if, "up")
        ip("-n", ns, "addr", "add", f"{inside}/{net.prefixlen}", "dev", ns_if)
        ip("-n", ns, "link", "set", ns_if, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        yield Machine(ns, host, inside)
    finally:
        for args in reversed(undo):
            ip(*args, check=False)
