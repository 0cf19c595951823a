"""kubectl drain's decisions (staging/src/k8s.io/kubectl/pkg/drain), pure.

* `filter_pods`: which pods of the node are evicted, in kubectl's filter order - skip mirror
  pods; DaemonSet pods are an error without --ignore-daemonsets and skipped (with a warning)
  with it (one whose DaemonSet is gone is evicted with --force); pods with an emptyDir volume
  need --delete-emptydir-data; pods no controller owns need --force. Finished pods always go.
  `warnings` and `errors` word the outcome as kubectl does.
* `Evictions`: the eviction of each pod, on a clock: evict; a 429 (a disruption budget says not
  now) is retried after RETRY_AFTER seconds; once admitted, the pod is checked every
  POLL_INTERVAL until it is gone (not found, or its name belongs to a new uid); past the global
  timeout every pod still pending fails with kubectl's message.
* `cordon_patch`: the Node patch for cordon/uncordon, None when nothing is to change.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

DAEMONSET_FATAL = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
DAEMONSET_WARNING = "ignoring DaemonSet-managed Pods"
LOCAL_STORAGE_FATAL = "Pods with local storage (use --delete-emptydir-data to override)"
LOCAL_STORAGE_WARNING = "deleting Pods with local storage"
UNMANAGED_FATAL = "cannot delete Pods that declare no controller (use --force to override)"
UNMANAGED_WARNING = "deleting Pods that declare no controller"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
RETRY_AFTER = 5.0    # after a 429
POLL_INTERVAL = 1.0  # waiting for an evicted pod to be gone

OKAY, SKIP, WARNING, ERROR = "Okay", "Skip", "Warning", "Error"


@dataclass(frozen=True)
class PodDelete:
    pod: dict
    delete: bool
    reason: str
    message: str = ""


@dataclass(frozen=True)
class Options:
    ignore_daemonsets: bool = False
    delete_emptydir_data: bool = False
    force: bool = False


# daemonset(namespace, name) -> None when it exists, else (not_found, error message)
DaemonSetLookup = Callable[[str, str], "tuple[bool, str] | None"]


def _meta(pod: dict) -> dict:
    return pod.get("metadata") or {}


def _finished(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _controller(pod: dict) -> dict | None:
    return next((r for r in _meta(pod).get("ownerReferences") or [] if r.get("controller")), None)


def _daemonset_filter(pod: dict, opts: Options, daemonset: DaemonSetLookup) -> PodDelete:
    ref = _controller(pod)
    if ref is None or ref.get("kind") != "DaemonSet" or _finished(pod):
        return PodDelete(pod, True, OKAY)
    missing = daemonset(_meta(pod).get("namespace") or "default", ref.get("name"))
    if missing is not None:
        not_found, message = missing
        if not_found and opts.force:  # an orphan: deleted with --force
            return PodDelete(pod, True, WARNING, message)
        return PodDelete(pod, False, ERROR, message)
    if not opts.ignore_daemonsets:
        return PodDelete(pod, False, ERROR, DAEMONSET_FATAL)
    return PodDelete(pod, False, WARNING, DAEMONSET_WARNING)


def _mirror_filter(pod: dict, opts: Options, daemonset: DaemonSetLookup) -> PodDelete:
    if MIRROR_ANNOTATION in (_meta(pod).get("annotations") or {}):
        return PodDelete(pod, False, SKIP)
    return PodDelete(pod, True, OKAY)


def _local_storage_filter(pod: dict, opts: Options, daemonset: DaemonSetLookup) -> PodDelete:
    volumes = (pod.get("spec") or {}).get("volumes") or []
    if not any(isinstance(v, dict) and v.get("emptyDir") is not None for v in volumes) or _finished(pod):
        return PodDelete(pod, True, OKAY)
    if not opts.delete_emptydir_data:
        return PodDelete(pod, False, ERROR, LOCAL_STORAGE_FATAL)
    return PodDelete(pod, True, WARNING, LOCAL_STORAGE_WARNING)


def _unreplicated_filter(pod: dict, opts: Options, daemonset: DaemonSetLookup) -> PodDelete:
    if _finished(pod) or _controller(pod) is not None:
        return PodDelete(pod, True, OKAY)
    if opts.force:
        return PodDelete(pod, True, WARNING, UNMANAGED_WARNING)
    return PodDelete(pod, False, ERROR, UNMANAGED_FATAL)


_FILTERS = (_daemonset_filter, _mirror_filter, _local_storage_filter, _unreplicated_filter)


def filter_pods(pods: list[dict], opts: Options, daemonset: DaemonSetLookup) -> list[PodDelete]:
    """Each pod's verdict: the first filter that keeps it, else the last one's (a warning of an
    earlier filter is overwritten by a later Okay, as kubectl's is)."""
    out = []
    for pod in pods:
        verdict = PodDelete(pod, True, OKAY)
        for f in _FILTERS:
            verdict = f(pod, opts, daemonset)
            if not verdict.delete:
                break
        out.append(verdict)
    return out


def _where(pod: dict) -> str:
    return f"{_meta(pod).get('namespace')}/{_meta(pod).get('name')}"


def _grouped(items: list[PodDelete], reason: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for item in items:
        if item.reason == reason:
            groups.setdefault(item.message or ("unexpected error" if reason == ERROR else ""), []).append(
                _where(item.pod))
    return groups


def warnings(items: list[PodDelete]) -> str:
    return "; ".join(f"{msg}: {', '.join(pods)}" for msg, pods in _grouped(items, WARNING).items())


def errors(items: list[PodDelete]) -> list[str]:
    out = []
    for msg, pods in _grouped(items, ERROR).items():
        head = msg if msg.lower().startswith("cannot delete") else f"cannot delete {msg}"
        out.append(f"{head}: {', '.join(pods)}")
    return out


def to_delete(items: list[PodDelete]) -> list[dict]:
    return [item.pod for item in items if item.delete]


def aggregate(messages: list[str]) -> str:
    """utilerrors.NewAggregate's text."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def go_duration(seconds: float) -> str:
    """time.Duration.String for whole milliseconds: 500ms, 5s, 1m30s, 1h0m0s."""
    ms = round(seconds * 1000)
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s = f"{rest // 1000}" + (f".{rest % 1000:03d}".rstrip("0") if rest % 1000 else "") + "s"
    if h:
        return f"{h}h{m}m{s}"
    return f"{m}m{s}" if m else s


def cordon_patch(node: dict, desired: bool) -> dict | None:
    """CordonHelper: spec.unschedulable set (cordon) or removed (uncordon); None if it already is."""
    if bool((node.get("spec") or {}).get("unschedulable")) == desired:
        return None
    return {"spec": {"unschedulable": True if desired else None}}


def gone(original: dict, current: dict | None) -> bool:
    """waitForDelete: the pod is gone, or its name is a new pod's."""
    return current is None or _meta(current).get("uid") != _meta(original).get("uid")


EVICT, CHECK = "evict", "check"


@dataclass
class _Pending:
    pod: dict
    step: str
    due: float


@dataclass
class Evictions:
    """The pods of one drain on their way out; `timeout` None is no limit."""
    pods: list[dict]
    now: float
    timeout: float | None = None
    pending: dict[str, _Pending] = field(init=False)
    failures: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.pending = {_where(p): _Pending(p, EVICT, self.now) for p in self.pods}
        self.deadline = None if self.timeout is None else self.now + self.timeout

    def due(self, now: float) -> list[tuple[str, dict]]:
        """What to do now: (EVICT | CHECK, pod), each pod at most once. Past the deadline every
        pending pod fails instead and nothing is due."""
        if self.deadline is not None and now >= self.deadline:
            for key, p in list(self.pending.items()):
                name, ns = _meta(p.pod).get("name"), _meta(p.pod).get("namespace")
                reached = f"global timeout reached: {go_duration(self.timeout or 0)}"
                self.failures.append(f'error when evicting pods/"{name}" -n "{ns}": {reached}' if p.step == EVICT
                                     else f'error when waiting for pod "{name}" in namespace "{ns}" to terminate: '
                                     f'{reached}')
                del self.pending[key]
            return []
        return [(p.step, p.pod) for p in self.pending.values() if p.due <= now]

    def next_due(self) -> float | None:
        times = [p.due for p in self.pending.values()]
        if self.deadline is not None and times:
            times.append(self.deadline)
        return min(times) if times else None

    def admitted(self, pod: dict, now: float) -> None:
        self.pending[_where(pod)] = _Pending(pod, CHECK, now + POLL_INTERVAL)

    def blocked(self, pod: dict, now: float) -> str:
        """A 429: try again later; the message kubectl prints (given the error's text after)."""
        self.pending[_where(pod)].due = now + RETRY_AFTER
        return (f'error when evicting pods/"{_meta(pod).get("name")}" -n "{_meta(pod).get("namespace")}" '
                f"(will retry after {go_duration(RETRY_AFTER)})")

    def still_there(self, pod: dict, now: float) -> None:
        self.pending[_where(pod)].due = now + POLL_INTERVAL

    def done(self, pod: dict) -> None:
        self.pending.pop(_where(pod), None)

    def failed(self, pod: dict, message: str) -> None:
        """An eviction refused for good (not a 429, not NotFound)."""
        self.pending.pop(_where(pod), None)
        self.failures.append(f'error when evicting pods/"{_meta(pod).get("name")}" -n '
                             f'"{_meta(pod).get("namespace")}": {message}')

    @property
    def finished(self) -> bool:
        return not self.pending
