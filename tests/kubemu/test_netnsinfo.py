"""Where a server kubemu runs as a container listens: every address of a pod's own network
namespace, loopback in the machine's (asked of a child process, as a container would ask)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.components.apiserver import REPO

ASK = "from kubemu import netnsinfo; print(netnsinfo.in_own_network_namespace(), netnsinfo.listen_address())"


def ask(*wrapper: str) -> str:
    done = subprocess.run([*wrapper, sys.executable, "-c", ASK], capture_output=True, text=True, timeout=60,
                          cwd=str(REPO), env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_in_the_machines_network_loopback_even_under_a_wrapper():
    assert ask() == "False 127.0.0.1"
    assert ask("sh", "-c", '"$0" "$@"') == "False 127.0.0.1"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a network namespace needs root and unshare")
def test_in_a_namespace_of_its_own_every_address_even_under_a_wrapper():
    assert ask("unshare", "--net") == "True 0.0.0.0"
    assert ask("unshare", "--net", "sh", "-c", '"$0" "$@"') == "True 0.0.0.0"   # its parent shares it
