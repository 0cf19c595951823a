"""The catalog's nginx stand-in chooses where to listen: every address of a pod's own network
namespace, loopback in the machine's."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from kubelet.images import PROGRAMS_DIR

ASK = ("import runpy, sys; sys.argv = ['httpd']; "
       f"print(runpy.run_path({os.path.join(PROGRAMS_DIR, 'httpd.py')!r})['listen_address']())")


def listen_address(*wrapper: str) -> str:
    done = subprocess.run([*wrapper, sys.executable, "-c", ASK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_in_the_machines_network_it_listens_on_loopback_only():
    assert listen_address() == "127.0.0.1"
    assert listen_address("sh", "-c", '"$0" "$@"') == "127.0.0.1"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a network namespace needs root and unshare")
def test_in_a_namespace_of_its_own_every_address_even_under_a_wrapper():
    assert listen_address("unshare", "--net") == "0.0.0.0"
    assert listen_address("unshare", "--net", "sh", "-c", '"$0" "$@"') == "0.0.0.0"  # its parent shares it
