"""Probe scheduling and result accounting for one container, pure (no I/O, no clock).

The shell runs the probe itself (exec / httpGet / tcpSocket) when the pod worker emits a
`RunProbe`, and reports success or failure back; this module decides when a probe is due and
what a run of results means, as the kubelet's prober does (Kubernetes docs, "Configure
Liveness, Readiness and Startup Probes"):

  * a probe is first due `initialDelaySeconds` after the container started, then every
    `periodSeconds`; at most one run of each probe is in flight at a time;
  * a result only counts once it repeats: `failureThreshold` consecutive failures settle the
    probe on failure, `successThreshold` consecutive successes settle it on success (1 for
    liveness and startup: the API rejects anything else);
  * before any run settles, liveness counts as passing, readiness as failing and startup as
    unknown;
  * the startup probe gates the other two: liveness and readiness are not run until the
    startup probe has succeeded once, and the startup probe is not run again after that.
"""
from __future__ import annotations

from dataclasses import dataclass

KINDS = ("startup", "liveness", "readiness")

# Where each probe lives in a container spec.
SPEC_FIELD = {"startup": "startupProbe", "liveness": "livenessProbe", "readiness": "readinessProbe"}

# The API server's defaults for a probe (core/v1 Probe).
DEFAULTS = {
    "initialDelaySeconds": 0,
    "periodSeconds": 10,
    "timeoutSeconds": 1,
    "successThreshold": 1,
    "failureThreshold": 3,
}

# Validation's lower bounds; clamping keeps a bad manifest from making a probe due every instant.
MINIMUMS = {
    "initialDelaySeconds": 0,
    "periodSeconds": 1,
    "timeoutSeconds": 1,
    "successThreshold": 1,
    "failureThreshold": 1,
}

# The settled result before any run counts (the kubelet's prober initial values):
# a live container is presumed healthy, not ready, and of unknown startup.
INITIAL_RESULT: dict[str, bool | None] = {"startup": None, "liveness": True, "readiness": False}

# What a settled failure does to the container: liveness and startup kill it; readiness
# only takes it out of service.
KILLS_ON_FAILURE = {"startup": True, "liveness": True, "readiness": False}

# Human name used in the kubelet's event messages ("Liveness probe failed: ...").
TITLE = {"startup": "Startup", "liveness": "Liveness", "readiness": "Readiness"}


def with_defaults(probe: dict, kind: str | None = None) -> dict:
    """A copy of `probe` with the API's defaults filled in and values clamped to what the
    API would accept (successThreshold must be 1 for liveness and startup)."""
    out = dict(probe)
    for key, default in DEFAULTS.items():
        value = out.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            value = default
        out[key] = max(value, MINIMUMS[key])
    if kind in ("liveness", "startup"):
        out["successThreshold"] = 1
    return out


def container_probes(container: dict) -> dict[str, dict]:
    """The probes a container spec declares, defaulted, by kind."""
    found = {}
    for kind in KINDS:
        probe = container.get(SPEC_FIELD[kind])
        if isinstance(probe, dict):
            found[kind] = with_defaults(probe, kind)
    return found


def runnable(kinds, started: bool) -> list[str]:
    """Which of a container's probe kinds may run: startup until it has succeeded, then the
    others (the startup probe gates liveness and readiness)."""
    if not started:
        return [k for k in kinds if k == "startup"]
    return [k for k in kinds if k != "startup"]


@dataclass
class ProbeState:
    """One probe of one running container instance: its schedule and its run of results."""

    kind: str
    probe: dict  # defaulted spec, handed to the shell with each run
    period: float  # seconds of the shell's clock (already time-scaled)
    timeout: float
    due: float
    result: bool | None  # the settled result (None: startup not decided yet)
    in_flight: bool = False
    last: bool | None = None  # the value of the current run of identical results
    run: int = 0  # its length

    @classmethod
    def begin(cls, kind: str, probe: dict, started_at: float, scale: float = 1.0) -> "ProbeState":
        """A fresh probe for a container instance that started at `started_at`."""
        probe = with_defaults(probe, kind)
        return cls(kind=kind, probe=probe,
                   period=probe["periodSeconds"] * scale,
                   # not scaled: a probe program does not run faster because the demo does
                   timeout=float(probe["timeoutSeconds"]),
                   due=started_at + probe["initialDelaySeconds"] * scale,
                   result=INITIAL_RESULT[kind])

    def is_due(self, now: float) -> bool:
        return not self.in_flight and now >= self.due

    def launch(self, now: float) -> None:
        """A run starts now; the next is due one period after this one was due, like a ticker
        (ticks missed while the caller was late are dropped, not run in a burst)."""
        self.in_flight = True
        nxt = self.due + self.period
        self.due = nxt if nxt > now else now + self.period

    def record(self, success: bool) -> bool:
        """Account one result; return True when the settled result changed."""
        self.in_flight = False
        if success == self.last:
            self.run += 1
        else:
            self.last, self.run = success, 1
        needed = self.probe["successThreshold"] if success else self.probe["failureThreshold"]
        if self.run < needed or self.result == success:
            return False
        self.result = success
        return True
