"""The kubelet's pidfds on its containers' shims: a shim's death is heard at once.

The kubelet is not its shims' parent (they are re-parented to init: kubelet/runtime.py), so no
SIGCHLD tells it that one died. It holds a pidfd (pidfd_open(2), Linux >= 5.3) in its asyncio
loop on the shim of every container start: from the launch (the launcher reports the shim's
PID: Runtime.start's on_shim), or from its state file (a start adopted after a kubelet
restart). The pidfd becomes readable the moment the shim exits. A shim that exits normally wrote its exit record
first, and the runtime's watch reports that as usual. One that was killed (kill -9, the OOM
killer) wrote nothing:

  * its container normally died with it (PR_SET_PDEATHSIG); one that got away is killed here
    (SIGKILL to its process group), deliberately not adopted: with no shim, nobody could
    report its end, enforce its memory limit or stop it gracefully, and containerd likewise
    kills a dead shim's task when it cleans up after it;
  * once the container is gone, Runtime.record_lost kills what is left of its process group
    and writes the exit record containerd reports for a task whose shim died (137: killed; a
    StartError if the shim died before starting it), and the runtime's watch turns that into
    an ordinary container exit: the pod's status shows it, restartPolicy and CrashLoopBackOff
    apply. A launcher that dies without starting a shim ends the same way.

A pidfd names one process for good, so a PID reused after the shim's death is never mistaken
for it; the only question is whether the pidfd was opened on the right process, answered by
checking, once it is open, that the shim still holds its start's lock (or, for a container,
that its start time still matches).
"""
from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
from collections.abc import Callable

from .runtime import ContainerState, Runtime

log = logging.getLogger("kubelet")

Key = tuple[str, str, int]  # (pod dir, container, restart count)


class ShimWatch:
    def __init__(self, runtime: Runtime, loop: asyncio.AbstractEventLoop,
                 after: Callable[[], None] | None = None):
        self.runtime = runtime
        self.loop = loop
        # Called after each death is handled: a pod waiting for its last shim to let go of the
        # pod directory (Runtime.remove_pod) is removed then, not at some later event.
        self.after = after
        self._fds: dict[tuple[Key, str], int] = {}  # (start, "shim"|"container") -> pidfd
        # One descriptor per container: the soft limit on open files (often 1024) must not
        # cap the pods of a node, so the kubelet takes its hard limit (the shims and their
        # containers inherit it).
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            except (ValueError, OSError):  # an unlimited hard limit is above fs.nr_open: keep ours
                pass

    def launched(self, pod_dir: str, name: str, restart_count: int, shim_pid: int | None) -> None:
        """Hold a pidfd on the shim the runtime just launched (Runtime.start's on_shim): its
        death is heard even before it has started the container. None: the launcher died
        without starting a shim."""
        key = (pod_dir, name, restart_count)
        if shim_pid is None:
            self.loop.call_soon(self._shim_gone, key)
        else:
            self._hold(key, "shim", shim_pid, lambda: self._shim_holds_lock(key), self._shim_gone)

    def watch(self, pod_dir: str, name: str, state: ContainerState) -> None:
        """Hold a pidfd on the shim of this container start, as its state says it runs."""
        key = (pod_dir, name, state.restart_count)
        if state.exited or not state.shim_pid:
            return
        self._hold(key, "shim", state.shim_pid, lambda: self._shim_holds_lock(key), self._shim_gone)

    def close(self) -> None:
        for fd in self._fds.values():
            self.loop.remove_reader(fd)
            os.close(fd)
        self._fds.clear()

    def _hold(self, key: Key, what: str, pid: int, still_it: Callable[[], bool],
              on_exit: Callable[[Key], None]) -> None:
        if (key, what) in self._fds:  # held already (a start is both launched and watched)
            return
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            fd = None
        except OSError as exc:  # out of descriptors: the callback checks for itself whether it is gone
            log.warning("cannot watch %s %s of %s/%s#%d: %s", what, pid, os.path.basename(key[0]), key[1],
                        key[2], exc.strerror)
            fd = None
        if fd is not None and not still_it():  # the PID named another process by now
            os.close(fd)
            fd = None
        if fd is None:  # gone already
            self.loop.call_soon(on_exit, key)
            return
        self._fds[(key, what)] = fd
        self.loop.add_reader(fd, self._exited, key, what, on_exit)

    def _exited(self, key: Key, what: str, on_exit: Callable[[Key], None]) -> None:
        fd = self._fds.pop((key, what))
        self.loop.remove_reader(fd)
        os.close(fd)
        on_exit(key)
        if self.after is not None:
            self.after()

    def _shim_holds_lock(self, key: Key) -> bool:
        state = self.runtime.state(*key)
        return state is not None and state.shim_alive

    def _shim_gone(self, key: Key) -> None:
        pod_dir, name, n = key
        state = self.runtime.state(pod_dir, name, n)
        if state is None or state.shim_alive:
            return  # a shim lives whose launcher died before reporting it: its state file brings it here
        if state.exited:  # by its own exit record, or the container died with its shim
            self._container_gone(key)
            return
        log.warning("%s: the shim of container %s#%d died before its container (pid %s): killing it",
                    os.path.basename(pod_dir), name, n, state.pid)
        self._hold(key, "container", state.pid, lambda: self.runtime.is_running(state), self._container_gone)
        self.runtime.kill(pod_dir, name, signal.SIGKILL, n)

    def _container_gone(self, key: Key) -> None:
        pod_dir, name, n = key
        message = self.runtime.record_lost(pod_dir, name, n)  # None if the shim reported the end itself
        if message is not None:
            log.warning("%s: container %s#%d: %s", os.path.basename(pod_dir), name, n, message)
