"""One pod's lifecycle as a pure state machine: events and the time in, actions out.

Nothing here forks, signals, sleeps, probes or reads a clock. The kubelet's shell feeds what
happened (`container_started`, `container_exited`, `probe_result`, ...) with `now` from its
clock, calls `sync(now)` whenever `next_deadline()` is reached, and carries out the returned
actions (`StartContainer`, `KillContainer`, `RunProbe`, `RecordEvent`). Every event handler
ends with a `sync(now)` of its own, so the shell only has to call `sync` at deadlines.

The behaviour is the kubelet's, as Kubernetes documents it ("Pod Lifecycle", "Init
Containers", "Configure Liveness, Readiness and Startup Probes"):

  * init containers run one at a time, in order, each to a successful exit, before any app
    container starts; app containers then all start together;
  * restartPolicy decides what happens after an exit (table RESTARTS below); restarts wait
    out a CrashLoopBackOff (kubelet/backoff.py) and raise the container's restartCount;
  * probes (kubelet/probes.py): startup gates liveness and readiness; a settled liveness or
    startup failure kills the container gracefully, and it is restarted per restartPolicy;
  * what a container runs is its command/args over its image's entrypoint and cmd (the
    `images` resolver, kubelet/images.py); an image that cannot be had waits in ErrImagePull,
    then ImagePullBackOff (the kubelet's image backoff), and creates no container;
  * a container's environment (the `env` resolver, kubelet/envvars.py) is made as it starts;
    one that cannot be made (a missing ConfigMap, Secret or key) waits in
    CreateContainerConfigError, creates no container, and is tried again ERROR_RESYNC later;
  * a pod whose volumes the shell sets up (`volumes=True`) starts no container until they
    are (`SetUpVolumes`, after its sandbox is ready); each failed volume is a FailedMount
    Event, and the set-up is retried with the volume manager's backoff;
  * a pod that needs a sandbox (kubelet/sandbox.py: its own namespaces and network) starts
    containers only once its sandbox is ready; a sandbox death kills its containers, and a new
    sandbox is made and the containers restarted in it (restartCount + 1), Kubernetes'
    computePodActions rules: init containers run again from the first, restartPolicy Never
    gets no new sandbox, and OnFailure does not restart containers that succeeded;
  * `stop` (pod deleted, manifest gone or changed) kills every container with the grace
    period and never restarts anything again; then its sandbox is removed;
  * `status(now)` is the pod's status in the API's JSON shape.

Time: every time the shell passes in is a float in seconds on one clock of its choice
(normally time.monotonic()). `status()` turns times into RFC 3339 UTC strings with
`format_time(t + wall_offset)`: pass `wall_offset = time.time() - time.monotonic()` (or 0 if
the clock already is the wall clock). Durations from the pod spec and the settings are
multiplied by `Settings.time_scale` before use; durations in actions are on the shell's clock.
"""
from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from kubemu.api.times import format_time

from . import probes as pr
from .backoff import Backoff, go_duration
from .configsource import NO_OBJECTS
from .envvars import CONFIG_ERROR, INVALID_NAMES, Env, EnvError, container_env, expand_argv
from .images import NO_CATALOG, PullError, Run, resolve
from .holder import pod_hostname
from .sandbox import CreateSandbox, RemoveSandbox, Sandbox
from .volumes import FAILED_MOUNT

NODE_IP = "127.0.0.1"  # the node's address, and every hostNetwork pod's

# Exit code a container runtime reports when the process could not be started
# (containerd's StartError: 128, reason StartError).
START_ERROR_EXIT = 128

# The kubelet's image pull backoff (imageBackOffPeriod, MaxImageBackOff), and how soon it
# syncs a pod again after a sync failed (backOffPeriod): seconds, time-scaled.
IMAGE_BACKOFF_INITIAL = 10.0
IMAGE_BACKOFF_MAX = 300.0
ERROR_RESYNC = 10.0
# The volume manager's retry of a failed mount (exponentialbackoff: initialDurationBeforeRetry,
# maxDurationBeforeRetry): seconds, time-scaled.
MOUNT_BACKOFF_INITIAL = 0.5
MOUNT_BACKOFF_MAX = 122.0
# The event the kubelet records when it does not even try to pull (events.FailedToInspectImage,
# events.ErrImageNeverPullPolicy).
NOT_PULLED_EVENTS = {"InvalidImageName": "InspectFailed", "ErrImageNeverPull": "ErrImageNeverPull"}
# The kubelet's words (kuberuntime_manager.go SyncPod) when a pod's sandbox is replaced.
SANDBOX_CHANGED = "Pod sandbox changed, it will be killed and re-created."


# --- settings -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    """Every duration the pod worker uses. `time_scale` multiplies them (backoff, probe
    delays and periods, grace periods) so demos and tests can run faster; probe timeouts stay
    as written, since a probe's program runs no faster."""

    backoff_initial: float = 10.0
    backoff_max: float = 300.0
    backoff_reset: float | None = None  # None: 2 x backoff_max, the kubelet's rule
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.time_scale <= 0:
            raise ValueError("time_scale must be > 0")

    def scaled(self, seconds: float) -> float:
        return seconds * self.time_scale

    @property
    def reset_after(self) -> float:
        return 2 * self.backoff_max if self.backoff_reset is None else self.backoff_reset

    def backoff(self) -> Backoff:
        return Backoff(self.scaled(self.backoff_initial), self.scaled(self.backoff_max),
                       self.scaled(self.reset_after))


# --- actions the shell carries out ----------------------------------------------------------

@dataclass(frozen=True)
class StartContainer:
    """Start the container; answer with container_started or container_start_failed."""
    container: str
    init: bool
    restart_count: int  # the restartCount of the instance being started
    argv: tuple[str, ...] = ()  # what to run: command/args over the image's (kubelet/images.py)
    env: tuple[tuple[str, str], ...] = ()  # the container's variables (kubelet/envvars.py), in order


@dataclass(frozen=True)
class KillContainer:
    """SIGTERM, wait `grace` seconds, SIGKILL; answer with container_exited. May be repeated
    for a container already being killed, with a shorter grace: shorten the wait."""
    container: str
    grace: float  # seconds on the shell's clock (already time-scaled)
    reason: str  # human message, e.g. "Container web failed liveness probe, will be restarted"
    # What the instance's terminated state will say (a probe kill): kept with the stop
    # request, so that a restarted kubelet shows it too.
    termination_message: str | None = None


@dataclass(frozen=True)
class RunProbe:
    """Run the probe against the running container; answer with probe_result (a timeout is
    a failure)."""
    container: str
    kind: str  # "startup" | "liveness" | "readiness"
    probe: dict  # the probe spec with the API defaults filled in
    timeout: float  # seconds on the shell's clock (already time-scaled)


@dataclass(frozen=True)
class RecordEvent:
    """An Event about the pod (involvedObject.fieldPath spec.containers{container} if set)."""
    reason: str  # Created, Started, Killing, BackOff, Unhealthy, Failed
    message: str
    type: str = "Normal"  # "Normal" | "Warning"
    container: str | None = None


@dataclass(frozen=True)
class SetUpVolumes:
    """Set up the pod's volumes (kubelet/volumedirs.py); answer with volumes_set_up."""
    attempt: int


Action = StartContainer | KillContainer | RunProbe | RecordEvent | CreateSandbox | RemoveSandbox | SetUpVolumes


# --- decision tables ------------------------------------------------------------------------

# How a container instance ended, as far as restartPolicy is concerned.
SUCCESS, FAILURE, PROBE, SANDBOX, STOPPED = "success", "failure", "probe", "sandbox", "stopped"

# restartPolicy -> the endings after which an app container is restarted. A container killed
# for a failed liveness/startup probe, or because its sandbox died, is restarted unless the
# policy is Never, whatever its exit code; one killed because the pod is stopping never is.
RESTARTS = {
    "Always": frozenset({SUCCESS, FAILURE, PROBE, SANDBOX}),
    "OnFailure": frozenset({FAILURE, PROBE, SANDBOX}),
    "Never": frozenset(),
}
# Init containers must run to completion, so for them Always means OnFailure.
INIT_RESTARTS = {**RESTARTS, "Always": RESTARTS["OnFailure"]}


def ending(exit_code: int, killed_for: str | None) -> str:
    if killed_for == "stop":
        return STOPPED
    if killed_for in ("liveness", "startup"):
        return PROBE
    if killed_for == SANDBOX:
        return SANDBOX
    return SUCCESS if exit_code == 0 else FAILURE


def should_restart(policy: str, init: bool, how: str) -> bool:
    table = INIT_RESTARTS if init else RESTARTS
    return how in table.get(policy, table["Always"])


@dataclass(frozen=True)
class Termination:
    """The end of one container instance: a `terminated` container state."""
    exit_code: int
    reason: str  # Completed | Error | OOMKilled | StartError | ContainerStatusUnknown
    signal: int | None = None
    message: str | None = None
    started_at: float | None = None
    finished_at: float | None = None


def exit_termination(exit_code: int | None, signal: int | None, oom_killed: bool,
                     started_at: float | None, finished_at: float | None,
                     message: str | None = None) -> Termination:
    """Classify a process end the way container runtimes report it: a signal shows as exit
    code 128+N, the OOM killer as OOMKilled (137), an unknown end as ContainerStatusUnknown."""
    if exit_code is None and signal is not None:
        exit_code = 128 + signal
    if oom_killed:
        code, reason = (exit_code if exit_code else 137), "OOMKilled"
    elif exit_code is None:
        code, reason = 137, "ContainerStatusUnknown"
    else:
        code, reason = exit_code, ("Completed" if exit_code == 0 else "Error")
    return Termination(code, reason, signal, message, started_at, finished_at)


def recorded_termination(record: dict, now: float) -> Termination:
    """The end of an instance as the runtime recorded it (a record PodWorker.adopt takes):
    a start failure as container_start_failed reports it, anything else as exit_termination."""
    finished_at = now if record.get("finished_at") is None else record["finished_at"]
    if record.get("reason") == "StartError":
        return Termination(START_ERROR_EXIT, "StartError", None, record.get("message"), finished_at, finished_at)
    return exit_termination(record.get("exit_code"), record.get("signal"), bool(record.get("oom_killed")),
                            record.get("started_at"), finished_at, record.get("message"))


# --- one container ---------------------------------------------------------------------------

class CState(enum.Enum):
    WAITING = "waiting"  # never asked to start (not its turn yet)
    STARTING = "starting"  # StartContainer issued, no answer yet
    RUNNING = "running"
    KILLING = "killing"  # KillContainer issued, not gone yet
    EXITED = "exited"  # gone; restart_at says whether and when it comes back


LIVE = (CState.STARTING, CState.RUNNING, CState.KILLING)


@dataclass
class _Container:
    name: str
    spec: dict
    init: bool
    probe_specs: dict[str, dict]
    state: CState = CState.WAITING
    restart_count: int = 0
    attempted: bool = False  # any StartContainer issued yet (the next one is a restart)
    pid: int | None = None
    started_at: float | None = None
    last: Termination | None = None  # the latest instance's end
    prev: Termination | None = None  # the one before: lastState while `last` is the state
    restart_at: float | None = None  # EXITED: when it may start again; None: never
    waiting: tuple[str, str] | None = None  # reason, message shown while not running
    retry_at: float | None = None  # no container could be made (image, config): not to be started before
    killing_for: str | None = None  # "stop" | "liveness" | "startup" | "sandbox"
    kill_deadline: float | None = None
    kill_message: str | None = None
    probes: dict[str, pr.ProbeState] = field(default_factory=dict)

    @property
    def started(self) -> bool:
        """Kubernetes' `started`: running, and past its startup probe if it has one."""
        if self.state not in (CState.RUNNING, CState.KILLING):
            return False
        startup = self.probes.get("startup")
        return startup is None or startup.result is True

    @property
    def ready(self) -> bool:
        """Running, started, and (if it has a readiness probe) settled on success."""
        if self.state is not CState.RUNNING or not self.started:
            return False
        readiness = self.probes.get("readiness")
        return readiness is None or readiness.result is True

    @property
    def finished(self) -> bool:
        """Gone and not coming back."""
        return self.state is CState.EXITED and self.restart_at is None

    @property
    def completed(self) -> bool:
        """An init container that ran to a successful exit."""
        return self.finished and self.last is not None and self.last.exit_code == 0


# --- the pod worker --------------------------------------------------------------------------

Resolver = Callable[[dict], Run | PullError]  # a container spec -> what to run (kubelet/images.py)
# (pod, container spec, pod IPs) -> the container's environment (kubelet/envvars.py)
EnvResolver = Callable[[dict, dict, tuple[str, ...]], Env | EnvError]


def env_without_objects(pod: dict, spec: dict, pod_ips: tuple[str, ...]) -> Env | EnvError:
    """A container's environment on a node without API objects (every ConfigMap and Secret
    missing)."""
    return container_env(pod, spec, NO_OBJECTS, list(pod_ips), [NODE_IP])


class PodWorker:
    def __init__(self, pod: dict, settings: Settings, now: float, *, wall_offset: float = 0.0,
                 images: Resolver | None = None, sandboxed: bool = False,
                 env: EnvResolver = env_without_objects, volumes: bool = False):
        """`images` resolves a container's argv from its image (the shell's current catalog);
        by default only command/args run. `env` makes a container's environment. `sandboxed`:
        the pod gets a sandbox of its own (kubelet/sandbox.py needs_sandbox); otherwise it
        shares the node's network. `volumes`: the shell sets up the pod's volumes before its
        first container starts."""
        self.pod = pod
        self._env = env
        self.settings = settings
        self.wall_offset = wall_offset
        self._images = images or functools.partial(resolve, catalog=NO_CATALOG)
        self._pulls: dict[str, tuple[float, float]] = {}  # image -> (its pull backoff, last failed pull)
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        self.name: str = meta.get("name", "")
        self.namespace: str = meta.get("namespace") or "default"
        self.uid: str = meta.get("uid", "")
        self.restart_policy: str = spec.get("restartPolicy") or "Always"
        grace = spec.get("terminationGracePeriodSeconds")
        self.grace_seconds: float = 30.0 if grace is None else float(grace)
        self._inits = [self._container(c, True) for c in spec.get("initContainers") or []]
        self._apps = [self._container(c, False) for c in spec.get("containers") or []]
        self._by_name = {c.name: c for c in self._inits + self._apps}
        self._backoff = settings.backoff()
        self._created = now
        self._start_time = now
        self._stop_deadline: float | None = None  # set by stop(): no restarts from then on
        self._initialized = not self._inits
        self._transitions: dict[str, tuple[bool, float]] = {}
        self.sandbox = Sandbox(self.uid, pod_hostname(pod), settings.scaled(ERROR_RESYNC)) if sandboxed else None
        self._network: tuple[bool, str] = (True, "")  # the node's pod network: ready, or why not
        self._network_warned = False
        self._no_new_sandbox = False  # restartPolicy Never: a dead sandbox is not replaced
        self._last_ips: tuple[str, ...] = ()  # the latest sandbox's, shown once the pod is done
        self._volumes_ready = not volumes
        self._volumes_attempt = 0
        self._volumes_pending = False  # a SetUpVolumes not answered yet
        self._volumes_retry_at: float | None = None
        self._volumes_delay = 0.0
        self._refresh_conditions(now)

    @staticmethod
    def _container(spec: dict, init: bool) -> _Container:
        # Init containers take no probes (the API rejects them); ignore any that slipped in.
        probe_specs = {} if init else pr.container_probes(spec)
        return _Container(name=spec.get("name", ""), spec=spec, init=init, probe_specs=probe_specs)

    @property
    def stopping(self) -> bool:
        return self._stop_deadline is not None

    # -- the level-based heart ---------------------------------------------------------------

    def sync(self, now: float) -> list[Action]:
        """Everything due now: the sandbox's creation or removal, first starts, restarts whose
        backoff is over, probes."""
        actions: list[Action] = self._sandbox_step(now)
        if not self.stopping:
            if self._sandbox_ready():
                actions += self._volumes_step(now)
            if self._sandbox_ready() and self._volumes_ready:
                for c in self._startable():
                    due = self._start_due_at(c)
                    if due is not None and due <= now:
                        actions += self._start(c, now)
            actions += self._probes_due(now)
        self._refresh_conditions(now)
        return actions

    def next_deadline(self) -> float | None:
        """When sync() next has something to do (None: only an event can change anything)."""
        times = []
        if self.sandbox is not None:
            times.append(self.sandbox.next_deadline(wanted=self._wants_sandbox(), network_ready=self._network[0]))
        if not self.stopping:
            if self._sandbox_ready() and self._volumes_ready:
                times += [self._start_due_at(c) for c in self._startable()]
            elif self._sandbox_ready() and not self._volumes_pending and self._wants_start():
                times.append(self._volumes_retry_at)
            times += [c.probes[k].due for c in self._apps if c.state is CState.RUNNING
                      for k in pr.runnable(c.probes, c.started) if not c.probes[k].in_flight]
        return min((t for t in times if t is not None), default=None)

    # -- volumes ----------------------------------------------------------------------------

    @property
    def volumes_ready(self) -> bool:
        return self._volumes_ready

    def _wants_start(self) -> bool:
        return any(not c.finished for c in self._startable())

    def _volumes_step(self, now: float) -> list[Action]:
        if self._volumes_ready or self._volumes_pending or not self._wants_start():
            return []
        if self._volumes_retry_at is not None and now < self._volumes_retry_at:
            return []
        self._volumes_pending = True
        self._volumes_attempt += 1
        return [SetUpVolumes(self._volumes_attempt)]

    def volumes_set_up(self, attempt: int, errors: list[str], now: float) -> list[Action]:
        """The shell's answer to SetUpVolumes: `errors`, the FailedMount messages (none: every
        volume is ready, and containers may start)."""
        if attempt != self._volumes_attempt or not self._volumes_pending:
            return []
        self._volumes_pending = False
        if not errors:
            self._volumes_ready, self._volumes_retry_at, self._volumes_delay = True, None, 0.0
            return self.sync(now)
        initial, cap = self.settings.scaled(MOUNT_BACKOFF_INITIAL), self.settings.scaled(MOUNT_BACKOFF_MAX)
        self._volumes_delay = initial if not self._volumes_delay else min(2 * self._volumes_delay, cap)
        self._volumes_retry_at = now + self._volumes_delay
        return [RecordEvent(FAILED_MOUNT, message, "Warning") for message in errors] + self.sync(now)

    # -- the sandbox --------------------------------------------------------------------------

    def _sandbox_ready(self) -> bool:
        return self.sandbox is None or self.sandbox.ready

    def _wants_sandbox(self) -> bool:
        """A container is to run, now or after a backoff (the kubelet makes no sandbox for a
        pod with nothing left to start)."""
        return not self.stopping and not self._no_new_sandbox and self._wants_start()

    def _sandbox_step(self, now: float) -> list[Action]:
        if self.sandbox is None:
            return []
        wanted, (ready, why) = self._wants_sandbox(), self._network
        actions: list[Action] = []
        if wanted and not ready and self.sandbox.gone and not self._network_warned:
            self._network_warned = True  # the kubelet's NetworkNotReady, once per pod
            actions.append(RecordEvent("NetworkNotReady", f"network is not ready: {why}", "Warning"))
        live = any(c.state in LIVE for c in self._by_name.values())
        return actions + self.sandbox.step(now, wanted=wanted, containers_live=live, network_ready=ready)

    def set_network(self, ready: bool, message: str, now: float) -> list[Action]:
        """The node's pod network became ready, or not (`message`: the runtime's why)."""
        self._network = (ready, message)
        if ready:
            self._network_warned = False
        return self.sync(now)

    def sandbox_found(self, alive: bool, network_ready: bool, network_message: str, now: float) -> list[Action]:
        """After `adopt`, what the shell found: whether the adopted sandbox's holder lives (its
        sandbox.json finished, the same process), and the node's network. A sandbox that does
        not live is dead before anything else is decided: any sync before that would start
        containers in a sandbox that does not exist."""
        actions: list[Action] = []
        if self.sandbox is not None and self.sandbox.ready and not alive:
            actions += self.sandbox_died(self.sandbox.attempt, now)
        if not network_ready:
            actions += self.set_network(False, network_message, now)
        return actions

    def sandbox_created(self, attempt: int, ips: list[str] | tuple[str, ...], now: float) -> list[Action]:
        if self.sandbox is None or not self.sandbox.created(attempt, ips):
            return []
        self._last_ips = self.sandbox.ips
        return self.sync(now)

    def sandbox_create_failed(self, attempt: int, message: str, now: float) -> list[Action]:
        """`message`: the runtime's description (containerd's `failed to setup network for
        sandbox "<id>": <CNI error>`); the pod is synced again after the backoff."""
        if self.sandbox is None or not self.sandbox.create_failed(attempt, now):
            return []
        return [RecordEvent("FailedCreatePodSandBox",
                            f"Failed to create pod sandbox: rpc error: code = Unknown desc = {message}",
                            "Warning")] + self.sync(now)

    def sandbox_died(self, attempt: int, now: float) -> list[Action]:
        """The sandbox's holder is gone: its containers are killed, it is torn down, and (the
        restart policy permitting) a new one is made and the containers restart in it."""
        if self.sandbox is None or not self.sandbox.died(attempt):
            return []
        if self.stopping:
            return self.sync(now)
        actions: list[Action] = [RecordEvent("SandboxChanged", SANDBOX_CHANGED)]
        if self.restart_policy == "Never" and any(c.attempted for c in self._by_name.values()):
            self._no_new_sandbox = True
        elif any(c.state in LIVE or not c.finished for c in self._apps):
            for c in self._inits:  # they prepared the old sandbox: they run again, from the first
                if c.completed:
                    c.restart_at = now
        grace = self.settings.scaled(self.grace_seconds)
        for c in self._inits + self._apps:
            if c.state is CState.RUNNING:
                actions += self._kill(c, SANDBOX, grace, f"Stopping container {c.name}", now)
        return actions + self.sync(now)

    def sandbox_removed(self, attempt: int, now: float) -> list[Action]:
        if self.sandbox is None or not self.sandbox.removed(attempt):
            return []
        return self.sync(now)

    def sandbox_remove_failed(self, attempt: int, message: str, now: float) -> list[Action]:
        if self.sandbox is None or not self.sandbox.remove_failed(attempt, now):
            return []
        return [RecordEvent("FailedKillPod", f"error killing pod: {message}", "Warning")] + self.sync(now)

    def pod_ips(self) -> tuple[str, ...]:
        """The pod's addresses: its sandbox's (the latest one's once the pod is done), none
        while a sandbox is being made; the node's for a pod without a sandbox."""
        if self.sandbox is None:
            return (NODE_IP,)
        if self.sandbox.ready:
            return self.sandbox.ips
        return self._last_ips if self.phase() in ("Succeeded", "Failed") else ()

    def _startable(self) -> list[_Container]:
        """The containers allowed to (re)start now: the first unfinished init container, or
        once all have completed, the app containers; none after an init container failed."""
        for c in self._inits:
            if c.completed:
                continue
            return [] if c.finished else [c]
        return self._apps

    def _start_due_at(self, c: _Container) -> float | None:
        if c.state is CState.WAITING:
            due = self._created
        elif c.state is CState.EXITED:
            due = c.restart_at
        else:
            return None
        return due if due is None or c.retry_at is None else max(due, c.retry_at)

    def _start(self, c: _Container, now: float) -> list[Action]:
        run = self._images(c.spec)
        if isinstance(run, PullError):
            return self._pull_failed(c, run, now)
        env = self._env(self.pod, c.spec, self.pod_ips())
        if isinstance(env, EnvError):
            return self._config_failed(c, env.message, now)
        if c.retry_at is not None:
            c.retry_at, c.waiting = None, None
        if c.attempted:
            c.restart_count += 1
        c.attempted = True
        c.state, c.restart_at = CState.STARTING, None
        # The backoff's up-time clock runs from the moment the kubelet lets it (re)start.
        self._backoff.record_start(c.name, now)
        pulled = ([RecordEvent("Pulled", f'Container image "{run.image}" already present on machine', "Normal", c.name)]
                  if run.image else [])
        warned = [RecordEvent(INVALID_NAMES, w, "Warning") for w in env.warnings]
        return pulled + warned + [StartContainer(c.name, c.init, c.restart_count,
                                                 tuple(expand_argv(list(run.argv), env.vars)),
                                                 tuple(env.vars.items()))]

    def _config_failed(self, c: _Container, message: str, now: float) -> list[Action]:
        """The kubelet's generateContainerConfig failed: no container was made, so neither
        restartCount nor lastState moves; the pod is synced again ERROR_RESYNC later."""
        c.waiting, c.retry_at = (CONFIG_ERROR, message), now + self.settings.scaled(ERROR_RESYNC)
        return [RecordEvent("Failed", f"Error: {message}", "Warning", c.name)]

    def _pull_failed(self, c: _Container, err: PullError, now: float) -> list[Action]:
        """The kubelet's EnsureImageExists: a failed pull (ErrImagePull) starts or grows the
        image's backoff (10 s doubling to 300 s, forgotten after 600 s without a failure); a
        sync while it runs pulls nothing and waits with ImagePullBackOff. The pod is synced
        again ERROR_RESYNC after a failed pull (at most), and when the backoff ends. No
        container was created: restartCount does not move."""
        if err.reason != "ErrImagePull":  # nothing was pulled: nothing to back off
            c.waiting, c.retry_at = (err.reason, err.message), now + self.settings.scaled(ERROR_RESYNC)
            return [RecordEvent(NOT_PULLED_EVENTS.get(err.reason, "Failed"), err.message, "Warning", c.name),
                    RecordEvent("Failed", f"Error: {err.reason}", "Warning", c.name)]
        delay, failed_at = self._pulls.get(err.image, (0.0, None))
        if failed_at is not None and now < failed_at + delay:
            message = f'Back-off pulling image "{err.image}"'
            c.waiting, c.retry_at = ("ImagePullBackOff", message), failed_at + delay
            return [RecordEvent("BackOff", message, "Normal", c.name),
                    RecordEvent("Failed", "Error: ImagePullBackOff", "Warning", c.name)]
        initial, cap = self.settings.scaled(IMAGE_BACKOFF_INITIAL), self.settings.scaled(IMAGE_BACKOFF_MAX)
        delay = initial if failed_at is None or now - failed_at >= 2 * cap else min(2 * delay, cap)
        self._pulls[err.image] = (delay, now)
        c.waiting = ("ErrImagePull", err.message)
        c.retry_at = now + min(delay, self.settings.scaled(ERROR_RESYNC))
        return [RecordEvent("Pulling", f'Pulling image "{err.image}"', "Normal", c.name),
                RecordEvent("Failed", f'Failed to pull image "{err.image}": {err.message}', "Warning", c.name),
                RecordEvent("Failed", "Error: ErrImagePull", "Warning", c.name)]

    def _probes_due(self, now: float) -> list[Action]:
        actions: list[Action] = []
        for c in self._apps:
            if c.state is not CState.RUNNING:
                continue
            for kind in pr.runnable(c.probes, c.started):
                probe = c.probes[kind]
                if probe.is_due(now):
                    probe.launch(now)
                    actions.append(RunProbe(c.name, kind, probe.probe, probe.timeout))
        return actions

    # -- what the shell reports ------------------------------------------------------------

    def container_started(self, name: str, pid: int, now: float, started_at: float | None = None) -> list[Action]:
        """`started_at`: when the runtime says the process started (shown as startedAt), if
        it recorded it; `now` otherwise."""
        c = self._by_name.get(name)
        if c is None or c.state is not CState.STARTING:
            return []  # not asked for, or already answered
        self._mark_running(c, pid, now if started_at is None else started_at)
        actions: list[Action] = [RecordEvent("Created", f"Created container {name}", "Normal", name),
                                 RecordEvent("Started", f"Started container {name}", "Normal", name)]
        if self.stopping:  # stopped while it was starting: it goes at once, in the time left
            actions += self._kill(c, "stop", self._grace_left(now), f"Stopping container {name}", now)
        elif not self._sandbox_ready():  # its sandbox died while it was starting
            actions += self._kill(c, SANDBOX, self.settings.scaled(self.grace_seconds),
                                  f"Stopping container {name}", now)
        return actions + self.sync(now)

    def container_start_failed(self, name: str, reason: str, message: str, now: float,
                               failed_at: float | None = None) -> list[Action]:
        """The process could not be started: counts as a crash (exit 128, StartError) for
        restartPolicy and backoff; `reason`/`message` show as the waiting state. `failed_at`:
        when the runtime recorded the failure, if it did."""
        c = self._by_name.get(name)
        if c is None or c.state is not CState.STARTING:
            return []
        c.waiting = (reason, message)
        at = now if failed_at is None else failed_at
        end = Termination(START_ERROR_EXIT, "StartError", None, message, at, at)
        actions: list[Action] = [RecordEvent("Failed", f"Error: {message}", "Warning", name)]
        actions += self._terminated(c, end, now)
        return actions + self.sync(now)

    def container_exited(self, name: str, exit_code: int | None, signal: int | None,
                         oom_killed: bool, now: float, *, started_at: float | None = None,
                         finished_at: float | None = None, message: str | None = None) -> list[Action]:
        """`started_at`, `finished_at`, `message`: what the runtime recorded of the instance
        (shown in its terminated state), where it did; decisions use `now`."""
        c = self._by_name.get(name)
        if c is None or c.state not in LIVE:
            return []  # already accounted for
        if c.state is CState.STARTING:  # died before the start was reported: it did start
            c.started_at = now if started_at is None else started_at
        if message is None and c.killing_for in ("liveness", "startup"):
            message = c.kill_message
        end = exit_termination(exit_code, signal, oom_killed, c.started_at, now if finished_at is None else finished_at,
                               message)
        return self._terminated(c, end, now) + self.sync(now)

    def probe_result(self, name: str, kind: str, success: bool, message: str, now: float) -> list[Action]:
        c = self._by_name.get(name)
        probe = c.probes.get(kind) if c is not None and c.state is CState.RUNNING else None
        if probe is None or not probe.in_flight:
            return []  # a stale answer: the instance is gone or being killed, or never asked
        changed = probe.record(success)
        actions: list[Action] = []
        if not success:
            actions.append(RecordEvent("Unhealthy", f"{pr.TITLE[kind]} probe failed: {message}", "Warning", name))
        if changed and probe.result is False and pr.KILLS_ON_FAILURE[kind]:
            actions += self._probe_kill(c, kind, now)
        return actions + self.sync(now)

    # -- stopping --------------------------------------------------------------------------

    def stop(self, now: float, grace: float | None = None) -> list[Action]:
        """Kill every container with `grace` seconds (API seconds, time-scaled here; default
        the pod's terminationGracePeriodSeconds) and never start anything again. Calling it
        again with a shorter grace shortens the kills in progress."""
        seconds = self.settings.scaled(max(0.0, self.grace_seconds if grace is None else grace))
        deadline = now + seconds
        if self._stop_deadline is None or deadline < self._stop_deadline:
            self._stop_deadline = deadline
        actions: list[Action] = []
        for c in self._inits + self._apps:
            actions += self._stop_one(c, now)
        # with no container left to exit (all in backoff), no exit would remove the sandbox
        actions += self._sandbox_step(now)
        self._refresh_conditions(now)
        return actions

    def _stop_one(self, c: _Container, now: float) -> list[Action]:
        grace = self._grace_left(now)
        message = f"Stopping container {c.name}"
        if c.state is CState.RUNNING:
            return self._kill(c, "stop", grace, message, now)
        if c.state is CState.KILLING and now + grace < c.kill_deadline:
            c.kill_deadline = now + grace
            return [KillContainer(c.name, grace, message)]
        if c.state is CState.EXITED and c.restart_at is not None:
            c.restart_at, c.waiting = None, None  # a pending restart is called off
        return []  # STARTING: killed as soon as it reports started

    def _grace_left(self, now: float) -> float:
        return max(0.0, self._stop_deadline - now)

    def is_terminated(self) -> bool:
        """No container process exists or will be started again: after stop() once every
        container is gone, or when the pod reached Succeeded/Failed on its own (the kubelet
        treats a pod in a terminal phase as terminated too); and its sandbox is gone."""
        if any(c.state in LIVE for c in self._by_name.values()):
            return False
        if self.sandbox is not None and not self.sandbox.gone:
            return False
        return self.stopping or self._natural_phase() in ("Succeeded", "Failed")

    # -- transitions -------------------------------------------------------------------------

    def _mark_running(self, c: _Container, pid: int | None, started_at: float) -> None:
        c.state, c.pid, c.started_at, c.waiting = CState.RUNNING, pid, started_at, None
        # Each instance gets fresh probes, scheduled from its own start.
        c.probes = {kind: pr.ProbeState.begin(kind, spec, started_at, self.settings.time_scale)
                    for kind, spec in c.probe_specs.items()}

    def _kill(self, c: _Container, why: str, grace: float, message: str, now: float,
              termination_message: str | None = None) -> list[Action]:
        c.state, c.killing_for, c.kill_message, c.kill_deadline = CState.KILLING, why, message, now + grace
        return [RecordEvent("Killing", message, "Normal", c.name),
                KillContainer(c.name, grace, message, termination_message)]

    def _probe_kill(self, c: _Container, kind: str, now: float) -> list[Action]:
        # A probe may carry its own terminationGracePeriodSeconds (liveness/startup only).
        own = c.probes[kind].probe.get("terminationGracePeriodSeconds")
        grace = self.settings.scaled(max(0.0, self.grace_seconds if own is None else float(own)))
        message = f"Container {c.name} failed {kind} probe"
        if should_restart(self.restart_policy, c.init, PROBE):
            message += ", will be restarted"
        return self._kill(c, kind, grace, message, now, termination_message=message)

    def _terminated(self, c: _Container, end: Termination, now: float) -> list[Action]:
        """An instance ended: record it, then decide whether and when it comes back."""
        how = ending(end.exit_code, c.killing_for)
        c.prev, c.last = c.last, end
        c.state, c.pid, c.probes = CState.EXITED, None, {}
        c.killing_for = c.kill_message = c.kill_deadline = None
        if self.stopping or not should_restart(self.restart_policy, c.init, how):
            c.restart_at = None
            return []
        delay = self._backoff.record_failure(c.name, now)
        c.restart_at = now + delay
        if delay <= 0:
            return []
        pod = f"{self.namespace}/{self.name}"
        c.waiting = ("CrashLoopBackOff",
                     f"back-off {go_duration(delay)} restarting failed container={c.name} pod={pod}")
        return [RecordEvent("BackOff", f"Back-off restarting failed container {c.name} in pod {pod}",
                            "Warning", c.name)]

    # -- adoption after a kubelet restart --------------------------------------------------

    @classmethod
    def adopt(cls, pod: dict, settings: Settings, now: float, containers: dict[str, dict],
              *, wall_offset: float = 0.0, images: Resolver | None = None,
              start_time: float | None = None, sandboxed: bool = False,
              sandbox: tuple[int, list[str]] | None = None, env: EnvResolver = env_without_objects,
              volumes: bool = False) -> "PodWorker":
        """A worker for a pod whose containers the shell found already there (via their shims):
        running ones are taken over as they are, exited ones are restarted per restartPolicy
        (the backoff history died with the old kubelet, as in Kubernetes), restart counts
        carry on. Running containers are probed afresh, as after a kubelet restart.

        `containers`: name -> the latest start's record (Runtime's ContainerState.as_found:
        state "running"|"exited", restart_count, pid, started_at, and for an exited one
        exit_code, signal, oom_killed, finished_at, reason, message), with the start before
        it, if the runtime kept it, under "previous" (an exited record): the status reads as
        it did before the restart, lastState and its times included. `start_time`: when the
        pod was first seen (its startTime), if the shell kept it; else its earliest start.
        `sandbox`: (attempt, ips) of the sandbox the shell found (its sandbox.json), taken over
        as ready; the shell reports what it found of it next (`sandbox_found`). A sandboxed pod
        with live containers but no sandbox gets a stand-in the shell reports dead that way."""
        worker = cls(pod, settings, now, wall_offset=wall_offset, images=images, sandboxed=sandboxed,
                     env=env, volumes=volumes)
        for name, found in containers.items():
            c = worker._by_name.get(name)
            if c is not None:
                worker._adopt_one(c, found, now)
        if any(c.attempted for c in worker._apps):
            # App containers only ever start once every init container completed: init
            # containers that left no trace did complete.
            for c in worker._inits:
                if c.state is CState.WAITING:
                    c.state, c.attempted, c.last = CState.EXITED, True, Termination(0, "Completed")
        if any(c.attempted for c in worker._by_name.values()):
            worker._volumes_ready = True  # they were set up for the containers it found
        if worker.sandbox is not None:
            if sandbox is not None:
                worker.sandbox.adopt(*sandbox)
                worker._last_ips = worker.sandbox.ips
            elif any(c.state in LIVE for c in worker._by_name.values()):
                worker.sandbox.adopt(0, ())
        starts = [c.started_at for c in worker._by_name.values() if c.started_at is not None]
        worker._start_time = min([now, *starts]) if start_time is None else start_time
        worker._refresh_conditions(now)
        return worker

    def _adopt_one(self, c: _Container, found: dict, now: float) -> None:
        c.attempted = True
        c.restart_count = max(0, int(found.get("restart_count") or 0))
        previous = found.get("previous")
        c.last = None if previous is None else recorded_termination(previous, now)
        started_at = found.get("started_at")
        started_at = now if started_at is None else started_at
        if found.get("state") == "running":
            self._mark_running(c, found.get("pid"), started_at)
            self._backoff.record_start(c.name, started_at)
            return
        c.started_at = started_at
        self._terminated(c, recorded_termination(dict(found, started_at=started_at), now), now)

    # -- status ------------------------------------------------------------------------------

    def status(self, now: float) -> dict:
        """The pod's status in the API's JSON shape (times as RFC 3339 strings)."""
        self._refresh_conditions(now)
        out = {
            "phase": self.phase(),
            "conditions": [self._condition(kind) for kind in CONDITIONS],
            "hostIP": NODE_IP,
            "hostIPs": [{"ip": NODE_IP}],
        }
        if ips := self.pod_ips():
            out["podIP"], out["podIPs"] = ips[0], [{"ip": ip} for ip in ips]
        out["startTime"] = self._time(self._start_time)
        if self._inits:  # the kubelet keeps init containers in spec order...
            out["initContainerStatuses"] = [self._container_status(c) for c in self._inits]
        # ...and app containers sorted by name.
        out["containerStatuses"] = [self._container_status(c) for c in sorted(self._apps, key=lambda c: c.name)]
        return out

    def phase(self) -> str:
        if self.stopping and not any(c.state in LIVE for c in self._by_name.values()):
            return self._final_phase()
        return self._natural_phase()

    def _natural_phase(self) -> str:
        """Kubernetes' phase rules: Pending until initialized and every app container has
        started once; Running while one runs or will be restarted; then Succeeded if all
        exited 0, else Failed. An init container that failed for good fails the pod."""
        for c in self._inits:
            if c.completed:
                continue
            return "Failed" if c.finished else "Pending"
        apps = self._apps
        if any(c.last is None and c.state not in (CState.RUNNING, CState.KILLING) for c in apps):
            return "Pending"
        if any(not c.finished for c in apps):
            return "Running"
        return "Succeeded" if all(c.last.exit_code == 0 for c in apps) else "Failed"

    def _final_phase(self) -> str:
        # A stopped pod ends in a terminal phase (the kubelet's podIsTerminal rule): Succeeded
        # only if every app container ran and exited 0.
        natural = self._natural_phase()
        if natural in ("Succeeded", "Failed"):
            return natural
        ok = all(c.last is not None and c.last.exit_code == 0 for c in self._apps)
        return "Succeeded" if ok and self._initialized else "Failed"

    def _container_status(self, c: _Container) -> dict:
        if c.state in (CState.RUNNING, CState.KILLING):
            state, last = {"running": {"startedAt": self._time(c.started_at)}}, c.last
        elif c.finished:
            state, last = {"terminated": self._terminated_dict(c.last)}, c.prev
        else:
            state, last = {"waiting": self._waiting(c)}, c.last
        out = {
            "name": c.name,
            "state": state,
            "lastState": {"terminated": self._terminated_dict(last)} if last is not None else {},
            "ready": c.ready,
            "started": c.started,
            "restartCount": c.restart_count,
            # strings without omitempty in Kubernetes' ContainerStatus: clients require them
            "image": c.spec.get("image") or "",
            "imageID": "",  # kubemu pulls nothing, so there is no digest to name
        }
        if c.pid is not None:
            out["containerID"] = f"process://{c.pid}"
        return out

    def _waiting(self, c: _Container) -> dict:
        """The kubelet shows the last reason it could not run the container (start error,
        CrashLoopBackOff); otherwise PodInitializing while init containers are in the way,
        ContainerCreating once it is being started."""
        if c.waiting is not None:
            return {"reason": c.waiting[0], "message": c.waiting[1]}
        if c.state is CState.WAITING and self._inits:
            return {"reason": "PodInitializing"}
        return {"reason": "ContainerCreating"}

    def _terminated_dict(self, end: Termination) -> dict:
        out: dict = {"exitCode": end.exit_code, "reason": end.reason}
        if end.signal is not None:
            out["signal"] = end.signal
        if end.message:
            out["message"] = end.message
        if end.started_at is not None:
            out["startedAt"] = self._time(end.started_at)
        if end.finished_at is not None:
            out["finishedAt"] = self._time(end.finished_at)
        return out

    def _time(self, ts: float) -> str:
        return format_time(ts + self.wall_offset)

    # -- conditions ----------------------------------------------------------------------------

    def _condition_values(self) -> dict[str, tuple[bool, str | None, str | None]]:
        """Condition type -> (status, reason, message), by the kubelet's rules."""
        if not self._initialized and all(c.completed for c in self._inits):
            self._initialized = True  # once initialized, a pod stays initialized
        if self._initialized:
            initialized = (True, None, None)
        else:
            pending = " ".join(c.name for c in self._inits if not c.completed)
            initialized = (False, "ContainersNotInitialized", f"containers with incomplete status: [{pending}]")
        unready = [c.name for c in self._apps if not c.ready]
        if self.phase() in ("Succeeded", "Failed"):
            ready = (False, "PodCompleted", None)
        elif unready:
            ready = (False, "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
        else:
            ready = (True, None, None)
        return {"Initialized": initialized, "Ready": ready, "ContainersReady": ready,
                "PodScheduled": (True, None, None)}

    def _refresh_conditions(self, now: float) -> None:
        """Remember when each condition last changed status (lastTransitionTime)."""
        self._values = self._condition_values()
        for kind, (value, _reason, _message) in self._values.items():
            seen = self._transitions.get(kind)
            if seen is None or seen[0] != value:
                self._transitions[kind] = (value, now)

    def _condition(self, kind: str) -> dict:
        value, reason, message = self._values[kind]
        out = {"type": kind, "status": "True" if value else "False", "lastProbeTime": None,
               "lastTransitionTime": self._time(self._transitions[kind][1])}
        if reason:
            out["reason"] = reason
        if message:
            out["message"] = message
        return out


# The kubelet's order of pod conditions.
CONDITIONS = ("Initialized", "Ready", "ContainersReady", "PodScheduled")
