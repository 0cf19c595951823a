"""The set of units and the jobs between them: a pure core, like init/core.py.

Ordering follows systemd.unit(5): After=B on unit A means A's start job waits until B's
start job has finished (B active, or B's start over and failed), and at stop time the
order is reversed (B stops only after A is down). Requires= pulls the required unit into
a start and fails the dependent start if the required one fails; Wants= only pulls it in.
A stop of a unit propagates to the units that Require it. Every loaded unit is started
at boot (the unit directory is the "default target"; [Install] is accepted and ignored).
"""
from __future__ import annotations

from dataclasses import dataclass

from .core import ACTIVE_STATE, STOPPING, Action, Log, Service, Sub
from .unitconfig import UnitConfig


@dataclass
class BrokenUnit:
    """A unit file that failed to load: shown as failed with the parser's message, never started."""

    name: str
    path: str
    error: str


class Manager:
    def __init__(self, configs: dict[str, UnitConfig], broken: dict[str, BrokenUnit] | None = None):
        self.services: dict[str, Service] = {name: Service(cfg) for name, cfg in configs.items()}
        self.broken: dict[str, BrokenUnit] = dict(broken or {})
        self._start_jobs: set[str] = set()
        self._stop_jobs: set[str] = set()
        self._removed: set[str] = set()  # dropped by daemon-reload; forgotten once stopped
        self._shutting_down = False

    # -- requests ----------------------------------------------------------------------

    def boot(self, now: float) -> list[Action]:
        return self._enqueue_start(sorted(self.services), now)

    def start(self, name: str, now: float) -> list[Action]:
        self._require(name)
        if self._shutting_down:
            return [Log(name, "Refusing to start: the system is shutting down.")]
        return self._enqueue_start([name], now)

    def stop(self, name: str, now: float) -> list[Action]:
        self._require(name)
        return self._enqueue_stop(self._with_dependents(name), now)

    def restart(self, name: str, now: float) -> list[Action]:
        self._require(name)
        self._start_jobs.discard(name)
        return self.services[name].restart(now) + self._run_jobs(now)

    def reset_failed(self, name: str | None, now: float) -> list[Action]:
        names = list(self.services) if name is None else [name]  # only no name means all
        for n in names:
            self._require(n)
            self.services[n].reset_failed(now)
        return []

    def shutdown(self, now: float) -> list[Action]:
        """Stop everything in reverse dependency order; `all_stopped()` says when done."""
        self._shutting_down = True
        self._start_jobs.clear()
        return self._enqueue_stop(list(self.services), now)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def all_stopped(self) -> bool:
        return all(s.sub in (Sub.DEAD, Sub.FAILED) for s in self.services.values())

    def reload(self, configs: dict[str, UnitConfig], broken: dict[str, BrokenUnit], now: float) -> list[Action]:
        """daemon-reload: new units are loaded (not started), removed ones are stopped and
        forgotten, changed ones take effect at their next start."""
        actions: list[Action] = []
        for name, cfg in configs.items():
            svc = self.services.get(name)
            if svc is None:
                self.services[name] = Service(cfg)
                actions.append(Log(name, "Loaded."))
            elif cfg != svc.config:
                svc.pending_config = cfg
                if svc.sub in (Sub.DEAD, Sub.FAILED):
                    svc.config, svc.pending_config = cfg, None
            self._removed.discard(name)
        gone = [n for n in self.services if n not in configs]
        self._removed.update(gone)
        # A unit whose file no longer loads counts as removed: it is stopped and shown as broken.
        self.broken = dict(broken)
        actions += self._enqueue_stop(gone, now)
        self._forget_removed()
        return actions

    # -- events ------------------------------------------------------------------------

    def unit_of_pid(self, pid: int) -> Service | None:
        for svc in self.services.values():
            if svc.main_pid == pid:
                return svc
        return None

    def on_spawned(self, name: str, pid: int, now: float) -> list[Action]:
        return self.services[name].on_spawned(now, pid) + self._run_jobs(now)

    def on_spawn_failed(self, name: str, message: str, now: float) -> list[Action]:
        return self.services[name].on_spawn_failed(now, message) + self._run_jobs(now)

    def on_exit(self, pid: int, code: int | None, sig: int | None, now: float) -> list[Action] | None:
        """None when `pid` is no unit's main process (an orphan the shell just reaped)."""
        svc = self.unit_of_pid(pid)
        if svc is None:
            return None
        return svc.on_exit(now, pid, code, sig) + self._run_jobs(now)

    def on_notify(self, pid: int, fields: dict[str, str], now: float) -> list[Action] | None:
        svc = self.unit_of_pid(pid)
        if svc is None:
            return None
        return svc.on_notify(now, pid, fields) + self._run_jobs(now)

    def tick(self, now: float) -> list[Action]:
        actions: list[Action] = []
        for svc in self.services.values():
            deadline = svc.next_deadline()
            if deadline is not None and deadline <= now:
                actions += svc.tick(now)
        return actions + self._run_jobs(now)

    def next_deadline(self) -> float | None:
        times = [t for t in (s.next_deadline() for s in self.services.values()) if t is not None]
        return min(times) if times else None

    # -- jobs --------------------------------------------------------------------------

    def _enqueue_start(self, names: list[str], now: float) -> list[Action]:
        for name in self._pulled_in(names):
            self._stop_jobs.discard(name)
            self._start_jobs.add(name)
        return self._run_jobs(now)

    def _enqueue_stop(self, names: list[str], now: float) -> list[Action]:
        for name in names:
            self._start_jobs.discard(name)
            self._stop_jobs.add(name)
        return self._run_jobs(now)

    def _run_jobs(self, now: float) -> list[Action]:
        """Dispatch every job whose ordering constraints are met, until none is."""
        actions: list[Action] = []
        progress = True
        while progress:
            progress = False
            for name in sorted(self._start_jobs):
                verdict = self._start_verdict(name)
                if verdict == "wait":
                    continue
                self._start_jobs.discard(name)
                progress = True
                if verdict == "go":
                    actions += self.services[name].start(now)
                else:
                    actions.append(Log(name, f"Dependency failed for {name}: {verdict}."))
            for name in sorted(self._stop_jobs):
                if self._stop_blocked(name):
                    continue
                self._stop_jobs.discard(name)
                progress = True
                actions += self.services[name].stop(now)
        self._forget_removed()
        return actions

    def _start_verdict(self, name: str) -> str:
        cfg = self.services[name].config
        for dep in cfg.after:
            other = self.services.get(dep)
            if other is not None and (dep in self._start_jobs or other.sub is Sub.START):
                return "wait"
        for dep in cfg.requires:
            other = self.services.get(dep)
            if other is None:
                return f"required unit {dep} is not loaded"
            if dep in cfg.after and other.sub is not Sub.RUNNING:
                return f"required unit {dep} is {other.active_state}"
        return "go"

    def _stop_blocked(self, name: str) -> bool:
        # Reverse order: units ordered After= this one must be down first.
        for other in self.services.values():
            if other.name != name and name in other.config.after:
                if other.name in self._stop_jobs or other.sub in STOPPING:
                    return True
        return False

    def _pulled_in(self, names: list[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name in seen or name not in self.services:
                continue
            seen.add(name)
            cfg = self.services[name].config
            todo += [*cfg.requires, *cfg.wants]
        return seen

    def _with_dependents(self, name: str) -> list[str]:
        """`name` and, transitively, every unit that Requires= it."""
        out, todo = [], [name]
        while todo:
            n = todo.pop()
            if n in out:
                continue
            out.append(n)
            todo += [s.name for s in self.services.values() if n in s.config.requires]
        return out

    def _forget_removed(self) -> None:
        for name in list(self._removed):
            svc = self.services.get(name)
            if svc is None or (svc.sub in (Sub.DEAD, Sub.FAILED) and name not in self._stop_jobs):
                self.services.pop(name, None)
                self._removed.discard(name)

    def _require(self, name: str) -> None:
        if name not in self.services:
            if name in self.broken:
                raise UnitLoadError(self.broken[name].error)
            raise KeyError(name)

    # -- what `status` shows -----------------------------------------------------------

    def status(self) -> list[dict]:
        rows = [service_status(s) for s in self.services.values()]
        rows += [{"name": b.name, "description": "", "load_state": "bad-setting", "load_error": b.error,
                  "active_state": "failed", "sub_state": "failed", "result": "resources", "main_pid": None,
                  "n_restarts": 0, "since": None, "exit_code": None, "exit_signal": None,
                  "status_text": b.error, "path": b.path}
                 for b in self.broken.values() if b.name not in self.services]
        return sorted(rows, key=lambda r: r["name"])


class UnitLoadError(Exception):
    """A request named a unit whose file failed to load."""


def service_status(s: Service) -> dict:
    return {
        "name": s.name,
        "description": s.config.description,
        "load_state": "loaded",
        "load_error": None,
        "active_state": ACTIVE_STATE[s.sub],
        "sub_state": s.sub.value,
        "result": s.result.value,
        "main_pid": s.main_pid,
        "n_restarts": s.n_restarts,
        "since": s.since,
        "exit_code": s.exit_code,
        "exit_signal": s.exit_signal,
        "status_text": s.status_text,
        "path": s.config.path,
    }
