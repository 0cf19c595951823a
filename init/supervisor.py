"""The shell around init's pure core: it owns processes, signals, sockets and the clock.

Everything is one asyncio loop that sleeps until something happens: SIGCHLD (delivered
through the loop's signal wakeup fd, so a child's death is noticed at once and every
zombie, unit or orphan, is reaped), a datagram on the notify socket, a request on the
control socket, or the core's next deadline (one loop timer). The core decides; this file
only carries out `Spawn`, `Kill` and `Log`.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import time

from kubemu import wire
from kubemu.child import reap_exited
from kubemu.prctl import set_child_subreaper

from .core import Action, Kill, Log, Spawn
from .manager import BrokenUnit, Manager, UnitLoadError
from .notify import NotifySocket
from .spawn import spawn, unit_environment
from .unitfile import load_unit_dir

log = logging.getLogger("init")


def unit_name(name: str) -> str:
    return name if "." in name else f"{name}.service"


def unit_log_name(name: str) -> str:
    return name.removesuffix(".service")


def load_units(units_dir: str) -> tuple[dict, dict[str, BrokenUnit]]:
    configs, broken = {}, {}
    for name, res in load_unit_dir(units_dir).items():
        for warning in res.warnings:
            log.warning("%s", warning)
        if res.config is None:
            log.error("%s: failed to load: %s", name, res.error)
            broken[name] = BrokenUnit(name, res.path, str(res.error))
        else:
            configs[name] = res.config
    return configs, broken


class Supervisor:
    def __init__(self, node_dir: str, units_dir: str, node: str):
        self.node = node
        self.node_dir = os.path.abspath(node_dir)
        self.units_dir = os.path.abspath(units_dir)
        self.logs_dir = os.path.join(self.node_dir, "logs")
        os.makedirs(self.logs_dir, exist_ok=True)
        self.manager = Manager(*load_units(self.units_dir))
        self.loop: asyncio.AbstractEventLoop | None = None
        self.notify: NotifySocket | None = None
        self.server: wire.Server | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._changed = asyncio.Condition()
        self._done = asyncio.Event()
        self._base_env = dict(os.environ)
        self.started_at = time.time()

    # -- the clock: monotonic for the core, wall time only for display ------------------

    def now(self) -> float:
        return self.loop.time()

    def wall(self, mono: float | None) -> float | None:
        return None if mono is None else time.time() - (self.now() - mono)

    # -- life cycle ---------------------------------------------------------------------

    async def run(self) -> None:
        self.loop = asyncio.get_running_loop()
        set_child_subreaper()
        self.notify = NotifySocket(os.path.join(self.node_dir, "notify.sock"))
        self.loop.add_reader(self.notify.fileno(), self._on_notify_readable)
        self.loop.add_signal_handler(signal.SIGCHLD, self._reap)
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._begin_shutdown, sig)
        self.server = wire.Server(wire.ipc_endpoint(self.node_dir, "init.sock"), self._handlers(), name="init")
        await self.server.start()
        log.info("init for %s up (pid %d), %d unit(s), %d broken", self.node, os.getpid(),
                 len(self.manager.services), len(self.manager.broken))
        self._execute(self.manager.boot(self.now()))
        self._reap()  # also arms the first timer  # children that died before the handler was installed
        await self._done.wait()
        await self.server.close()
        self.loop.remove_reader(self.notify.fileno())
        self.notify.close()
        log.info("all units stopped, init exits")

    def _begin_shutdown(self, sig: int | None = None) -> None:
        if sig is not None:
            log.info("received %s: stopping all units", signal.Signals(sig).name)
        self._execute(self.manager.shutdown(self.now()))
        self._after_event()

    # -- events -------------------------------------------------------------------------

    def _reap(self) -> None:
        for pid, status in reap_exited():
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            svc = self.manager.unit_of_pid(pid)
            if svc is None:
                log.info("reaped orphan process %d (%s)", pid, describe_exit(code, sig))
                continue
            self._journal(svc.name, f"Main process exited, {describe_exit(code, sig)}")
            self._execute(self.manager.on_exit(pid, code, sig, self.now()))
        self._after_event()

    def _on_notify_readable(self) -> None:
        for pid, fields in self.notify.receive():
            actions = self.manager.on_notify(pid, fields, self.now())
            if actions is None:
                log.warning("notification from PID %d which is no unit's main process, ignored: %s", pid, fields)
                continue
            self._execute(actions)
        self._after_event()

    def _on_timer(self) -> None:
        self._timer = None
        self._execute(self.manager.tick(self.now()))
        self._after_event()

    def _after_event(self) -> None:
        """Re-arm the single timer for the core's next deadline, wake waiters, check shutdown."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.manager.next_deadline()
        if deadline is not None:
            self._timer = self.loop.call_at(deadline, self._on_timer)
        asyncio.ensure_future(self._notify_changed())
        if self.manager.shutting_down and self.manager.all_stopped():
            self._done.set()

    async def _notify_changed(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- carrying out the core's decisions ------------------------------------------------

    def _execute(self, actions: list[Action]) -> None:
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            if isinstance(action, Spawn):
                queue += self._spawn(action.unit)
            elif isinstance(action, Kill):
                self._kill(action)
            elif isinstance(action, Log):
                self._journal(action.unit, action.message)

    def _spawn(self, name: str) -> list[Action]:
        svc = self.manager.services[name]
        env = unit_environment(svc.config, self._base_env, self.notify.path)
        log_path = os.path.join(self.logs_dir, f"{unit_log_name(name)}.log")
        try:
            pid = spawn(svc.config, env, log_path)
        except OSError as exc:
            return self.manager.on_spawn_failed(name, exc.strerror or str(exc), self.now())
        self._journal(name, f"Started {svc.config.description or name} (pid {pid}).")
        return self.manager.on_spawned(name, pid, self.now())

    def _kill(self, action: Kill) -> None:
        try:
            if action.group:
                os.killpg(action.pid, action.signal)
            else:
                os.kill(action.pid, action.signal)
        except (ProcessLookupError, PermissionError):
            return
        if action.signal != signal.SIGKILL or not action.group:
            self._journal(action.unit, f"Sent {signal.Signals(action.signal).name} to "
                                       f"{'process group' if action.group else 'process'} {action.pid}.")

    def _journal(self, unit: str, message: str) -> None:
        """systemd writes its own messages about a unit into the unit's journal: so do we."""
        log.info("%s: %s", unit, message)
        if unit in self.manager.services:
            path = os.path.join(self.logs_dir, f"{unit_log_name(unit)}.log")
            try:
                with open(path, "a") as f:
                    f.write(f"{time.strftime('%b %d %H:%M:%S')} init[{os.getpid()}]: {unit}: {message}\n")
            except OSError:
                pass

    # -- the control socket ---------------------------------------------------------------

    def _handlers(self) -> dict:
        return {
            "status": self.rpc_status,
            "start": self.rpc_start,
            "stop": self.rpc_stop,
            "restart": self.rpc_restart,
            "reset-failed": self.rpc_reset_failed,
            "daemon-reload": self.rpc_daemon_reload,
            "shutdown": self.rpc_shutdown,
        }

    async def rpc_status(self, unit: str | None = None) -> dict:
        rows = self.manager.status()
        if unit is not None:
            rows = [r for r in rows if r["name"] == unit_name(unit)]
            if not rows:
                raise wire.NotFound(f"Unit {unit_name(unit)} could not be found.")
        for row in rows:
            row["since"] = self.wall(row["since"])
        return {"node": self.node, "pid": os.getpid(), "started_at": self.started_at,
                "shutting_down": self.manager.shutting_down, "units": rows}

    def _apply(self, request, *args) -> None:
        try:
            actions = request(*args, self.now())
        except UnitLoadError as exc:
            raise wire.Invalid(f"Unit {args[0]} has a bad unit file setting: {exc}") from None
        except KeyError:
            raise wire.NotFound(f"Unit {args[0]} not found.") from None
        self._execute(actions)
        self._after_event()

    async def _wait_job(self, name: str, settled_states: tuple[str, ...], timeout: float) -> dict:
        """What `systemctl start|stop|restart` does: wait for the job to settle, then report."""
        def settled() -> bool:
            svc = self.manager.services.get(name)
            return svc is None or svc.active_state in settled_states

        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(settled)
        try:
            await asyncio.wait_for(wait(), timeout)
        except asyncio.TimeoutError:
            pass
        rows = [r for r in self.manager.status() if r["name"] == name]
        return rows[0] if rows else {"name": name, "active_state": "inactive"}

    async def rpc_start(self, unit: str, wait: float = 30.0) -> dict:
        self._apply(self.manager.start, unit_name(unit))
        return await self._wait_job(unit_name(unit), ("active", "failed", "inactive"), wait)

    async def rpc_stop(self, unit: str, wait: float = 120.0) -> dict:
        self._apply(self.manager.stop, unit_name(unit))
        return await self._wait_job(unit_name(unit), ("inactive", "failed"), wait)

    async def rpc_restart(self, unit: str, wait: float = 120.0) -> dict:
        self._apply(self.manager.restart, unit_name(unit))
        return await self._wait_job(unit_name(unit), ("active", "failed"), wait)

    async def rpc_reset_failed(self, unit: str | None = None) -> dict:
        # only an absent unit means all of them: "" names no unit (NotFound), it is not a wildcard
        name = None if unit is None else unit_name(unit)
        self._apply(self.manager.reset_failed, name)
        return {"unit": name}

    async def rpc_daemon_reload(self) -> dict:
        configs, broken = load_units(self.units_dir)
        self._execute(self.manager.reload(configs, broken, self.now()))
        self._after_event()
        return {"units": sorted(self.manager.services), "broken": sorted(broken)}

    async def rpc_shutdown(self) -> dict:
        self.loop.call_soon(self._begin_shutdown)
        return {"stopping": sorted(self.manager.services)}


def describe_exit(code: int | None, sig: int | None) -> str:
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"code=killed, status={sig}/{name}"
    return f"code=exited, status={code}/{'SUCCESS' if code == 0 else 'FAILURE'}"
