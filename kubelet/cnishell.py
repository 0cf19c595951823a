"""The CNI runtime's shell: reads the node's network config, runs the plugins (kubelet/cni.py
decides everything else).

Plugins run inside the cluster's fabric network namespace (`nsenter --net=<fabric> --
<plugin>`), where the bridges live: a bridge plugin configures the namespace it runs in
(its bridge, the gateway address, ip_forward), so run in the host's it would make the user's
machine a router. Without a fabric only plugins that touch nothing but the container's
namespace run (cni.host_namespace_refusal).

Every call blocks until the plugins are done (each at most `timeout` seconds, then it is
killed with everything it started): the kubelet calls them off its event loop.
"""
from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
from pathlib import Path

from kubemu.nsutil import fd_path, nsenter_path
from kubemu.statedir import write_atomic

from . import cni

CONF_FILE = "10-kubemu.conflist"
CONF_EXTENSIONS = (".conflist", ".conf", ".json")  # what containerd's go-cni loads


class CNI:
    def __init__(self, conf_dir: str | os.PathLike, bin_dirs: list[str], fabric_netns: str | None,
                 timeout: float = 30.0):
        self.conf_dir = Path(conf_dir)
        self.bin_dirs = tuple(bin_dirs)
        self.fabric_netns = fabric_netns
        self.timeout = timeout
        self._nsenter = nsenter_path()

    # --- configuration -----------------------------------------------------------------------

    def load(self) -> cni.Conflist:
        """The node's network: the first config file in the directory by name (as containerd
        and libcni pick it). Raises cni.ConfigError."""
        try:
            names = sorted(p.name for p in self.conf_dir.iterdir()
                           if p.suffix in CONF_EXTENSIONS and p.is_file())
        except FileNotFoundError:
            names = []
        except OSError as exc:
            raise cni.ConfigError(f"cannot read the CNI config directory {self.conf_dir}: {exc.strerror}") from None
        if not names:
            raise cni.ConfigError(f"no network config found in {self.conf_dir}")
        path = self.conf_dir / names[0]
        try:
            text = path.read_bytes()
        except OSError as exc:
            raise cni.ConfigError(f"cannot read CNI config {path}: {exc.strerror}") from None
        try:
            return cni.load_conflist(text)
        except cni.ConfigError as exc:
            raise cni.ConfigError(f"{path}: {exc}") from None

    def write_conflist(self, conflist: dict) -> bool:
        """Write the node's own config file, atomically and only when it changes (a reader
        never sees half a file; an unchanged file keeps its mtime). True if it was written."""
        path = self.conf_dir / CONF_FILE
        data = (json.dumps(conflist, indent=2) + "\n").encode()
        try:
            if path.read_bytes() == data:
                return False
        except FileNotFoundError:
            pass
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data, 0o644)
        return True

    # --- the commands ------------------------------------------------------------------------

    # `netns_fd`: the sandbox's network namespace as a descriptor (kubemu.nsutil.open_ns), which
    # each plugin inherits and opens as CNI_NETNS=/proc/self/fd/<n>: a path to /proc/<pid>/ns/net
    # would be opened by the plugin later, when the PID may be another process's (the host's netns).

    def add(self, container_id: str, netns_fd: int, ifname: str = "eth0",
            args: dict[str, str] | None = None) -> cni.Result:
        """Attach the sandbox; on failure everything is DELeted again and CNIError raised."""
        return cni.add(self.load(), self._runtime(container_id, fd_path(netns_fd), ifname, args),
                       functools.partial(self._execute, pass_fds=(netns_fd,)))

    def check(self, container_id: str, netns_fd: int, ifname: str, prev: dict,
              args: dict[str, str] | None = None) -> None:
        """CHECK the sandbox against `prev`, its ADD's result (the namespace the caller checked
        to be the one ADD was given, under today's name)."""
        netns = fd_path(netns_fd)
        cni.check(self.load(), self._runtime(container_id, netns, ifname, args),
                  functools.partial(self._execute, pass_fds=(netns_fd,)), cni.renamed_sandbox(prev, netns))

    def delete(self, container_id: str, netns_fd: int | None, ifname: str, prev: dict | None,
               args: dict[str, str] | None = None) -> None:
        """Detach the sandbox. `netns_fd` None: its namespace is gone (the holder died); the
        plugins then free what lives outside it (the IP, the bridge's end of the veth)."""
        netns, fds = ("", ()) if netns_fd is None else (fd_path(netns_fd), (netns_fd,))
        cni.delete(self.load(), self._runtime(container_id, netns, ifname, args),
                   functools.partial(self._execute, pass_fds=fds), prev)

    def _runtime(self, container_id: str, netns: str, ifname: str, args: dict[str, str] | None) -> cni.Runtime:
        return cni.Runtime(container_id, netns, ifname, self.bin_dirs, tuple((args or {}).items()))

    # --- running one plugin ------------------------------------------------------------------

    def _execute(self, inv: cni.Invocation, pass_fds: tuple[int, ...] = ()) -> cni.Output:
        plugin = self._find(inv.type)
        if plugin is None:
            return cni.Output(failure=cni.not_found_message(inv.type, self.bin_dirs))
        if self.fabric_netns is None:
            refusal = cni.host_namespace_refusal(inv.type)
            if refusal:
                return cni.Output(failure=refusal)
            argv = [plugin]
        elif self._nsenter is None:
            return cni.Output(failure="cannot enter the fabric network namespace: nsenter (util-linux) not found")
        else:
            problem = self._fabric_problem(inv.type)
            if problem:
                return cni.Output(failure=problem)
            argv = [self._nsenter, f"--net={self.fabric_netns}", "--", plugin]
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=inv.env, cwd="/", start_new_session=True, pass_fds=pass_fds)
        except OSError as exc:
            return cni.Output(failure=f"cannot run {plugin}: {exc.strerror}")
        try:
            stdout, stderr = proc.communicate(inv.stdin, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                pipe.close()  # not read: a grandchild that left the group may still hold them
            return cni.Output(failure=f"netplugin did not finish in {self.timeout:g}s and was killed")
        return cni.Output(proc.returncode, stdout, stderr)

    def _fabric_problem(self, plugin_type: str) -> str | None:
        """A fabric path that is gone, or that names our own network namespace (a wrong
        flag): never run a plugin there."""
        try:
            fabric = os.stat(self.fabric_netns).st_ino
        except OSError as exc:
            return f"cannot use the fabric network namespace {self.fabric_netns}: {exc.strerror}"
        if fabric == os.stat("/proc/self/ns/net").st_ino:
            return cni.host_namespace_refusal(plugin_type)
        return None

    def _find(self, plugin_type: str) -> str | None:
        """libcni's invoke.FindInPath: the first regular file of that name in the bin dirs."""
        for directory in self.bin_dirs:
            path = os.path.join(directory, plugin_type)
            if os.path.isfile(path):
                return path
        return None


def _kill_group(pgid: int) -> None:
    """The plugin has its own session: its group is it and whatever it started."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
