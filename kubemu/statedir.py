"""Where a cluster lives on disk, and how every command finds it.

    <state dir>/                      --state-dir, $KUBEMU_STATE_DIR, or ~/.kubemu (mode 0700)
      api-endpoint                    the apiservers' wire endpoints, comma-joined, node-0's first
                                      (written by `kubemu up`; one unless --control-plane-nodes 3|5)
      store-endpoints                 the store replicas' endpoints, one a line
      api-port                        the apiserver's HTTPS port on 127.0.0.1 (kept for the next `up`)
      apiserver-advertise-address     `up --apiserver-advertise-address`'s IP (kept for the next `up`)
      pki/                            kubeadm's: ca.crt/key, apiserver.crt/key, sa.key/pub, admin.crt/key,
                                      scheduler.crt/key, controller-manager.crt/key (mode 0700, keys 0600)
      admin.conf, scheduler.conf, controller-manager.conf   kubeconfigs, credentials embedded (0600)
      merged-kubeconfig.json          which context `up` merged into which user kubeconfig, for `down`
      membership.json                 the nodes and which runs each store replica, once `kubemu node
                                      add|remove` changed them (`up` follows it)
      images.yaml                     the image catalog (optional, the user's; kubemu never writes it)
      nodes/<node>/units/*.service    what init supervises (kubelet.service, written by `kubemu up`)
      nodes/<node>/manifests/         the kubelet's static pods (a control-plane node's: its store
                                      replica(s), apiserver, scheduler, controller-manager)
      nodes/<node>/logs/              init.log and one <unit>.log per unit; audit.log on a
                                      control-plane node (its apiserver's)
      nodes/<node>/data/store-<i>/    a control-plane node's store replica's data (all of them on
                                      node-0 with one control-plane node, else store-i on node-i)
      nodes/<node>/store-<i>.sock, apiserver.sock   a control-plane node's wire endpoints
      nodes/<node>/init.sock          init's control socket; notify.sock, init.pid beside it
      nodes/<node>/kubelet.conf       the kubelet's kubeconfig (system:node:<node>); its cert in pki/
      nodes/<node>/owner.json         what kubemu started: init's PID and start time, the node's cgroup
      nodes/<node>/pods/<ns>_<name>_<uid>/   a pod: pod.json, status.json (the kubelet's), and per
                                      container its shims' files and <restartCount>.log
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import psutil

from .ownership import Owned

ENV = "KUBEMU_STATE_DIR"


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace `path` at once, its mode set from the start (a key is never readable by others,
    not even for a moment): a reader sees the old file or the new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # a dotfile: never taken for a manifest
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
        os.fchmod(f.fileno(), mode)  # whatever the umask took away
        f.write(data)
    os.replace(tmp, path)


def resolve(state_dir: str | os.PathLike | None) -> Path:
    return Path(state_dir or os.environ.get(ENV) or "~/.kubemu").expanduser().absolute()


class NoCluster(Exception):
    """No running cluster in the state directory."""


class StateDir:
    def __init__(self, root: str | os.PathLike | None = None):
        self.root = resolve(root)

    @property
    def nodes_dir(self) -> Path:
        return self.root / "nodes"

    def node_dir(self, node: str) -> Path:
        return self.nodes_dir / node

    def nodes(self) -> list[str]:
        if not self.nodes_dir.is_dir():
            return []
        return sorted((p.name for p in self.nodes_dir.iterdir() if p.is_dir()), key=node_sort_key)

    def init_endpoint(self, node: str) -> str:
        return f"ipc://{self.node_dir(node) / 'init.sock'}"

    def kubelet_endpoint(self, node: str) -> str:
        """Where the node's kubelet serves exec and attach (kubelet/streaming.py)."""
        return f"ipc://{self.node_dir(node) / 'kubelet.sock'}"

    @property
    def pki_dir(self) -> Path:
        return self.root / "pki"

    @property
    def admin_conf(self) -> Path:
        return self.root / "admin.conf"

    def kubelet_conf(self, node: str) -> Path:
        return self.node_dir(node) / "kubelet.conf"

    @property
    def merged_kubeconfig_file(self) -> Path:
        return self.root / "merged-kubeconfig.json"

    @property
    def api_port_file(self) -> Path:
        return self.root / "api-port"

    def api_port(self) -> int | None:
        """The HTTPS port the last `kubemu up` gave the apiserver, or None."""
        try:
            return int(self.api_port_file.read_text().strip())
        except (OSError, ValueError):
            return None

    @property
    def api_endpoint_file(self) -> Path:
        return self.root / "api-endpoint"

    def api_endpoint(self) -> str | None:
        """The apiservers' wire endpoints that `kubemu up` wrote (comma-joined, in order of
        preference), or None (no control plane)."""
        try:
            return self.api_endpoint_file.read_text().strip() or None
        except OSError:
            return None

    def owned(self, node: str) -> Owned | None:
        """What kubemu recorded when it started the node's init (kubemu/ownership.py)."""
        return Owned.load(self.node_dir(node))

    def init_pid(self, node: str) -> int | None:
        """The PID of the node's init if it is running: the one kubemu started (its recorded
        PID and start time), else one started by hand (`python -m init`), named by its pidfile."""
        owned = self.owned(node)
        if owned is not None:
            init = owned.init()
            return init.pid if init else None
        pidfile = self.node_dir(node) / "init.pid"
        try:
            pid = int(pidfile.read_text().strip())
            proc = psutil.Process(pid)
            # A process born after the pidfile was written did not write it: a reused PID.
            # (1 s of slack: the boot time a start time is computed from has whole seconds.)
            if proc.status() == psutil.STATUS_ZOMBIE or proc.create_time() > pidfile.stat().st_mtime + 1:
                return None
            return pid
        except (OSError, ValueError, psutil.Error):
            return None

    def pods(self, node: str) -> list[tuple[Path, dict]]:
        """(pod dir, Pod with status) for every pod the node's kubelet reports, by name."""
        found = []
        for status in sorted((self.node_dir(node) / "pods").glob("*/status.json")):
            try:
                found.append((status.parent, json.loads(status.read_text())))
            except (OSError, ValueError):
                continue  # being replaced right now, or gone
        return found

    def running_nodes(self) -> list[str]:
        return [n for n in self.nodes() if self.init_pid(n) is not None]

    def require_running(self) -> list[str]:
        nodes = self.running_nodes()
        if not nodes:
            raise NoCluster(f"no kubemu cluster is running in {self.root} (start one with `kubemu up`)")
        return nodes


def node_sort_key(name: str):
    prefix, _, num = name.rpartition("-")
    return (prefix, int(num)) if num.isdigit() else (name, -1)
