"""What a chaos run records: clients' operations (Jepsen's history) and the store's changes.

A client's operation is two events of one `process` (a logical client doing one thing at a time):
an ``invoke`` when it is sent, and a completion when its outcome is known:

    ok    it happened, with this output (a read's value, a cas's True/False)
    fail  it certainly did not happen (the store said it did not execute it: NotLeader,
          Unavailable before sending, a definite error)
    info  nobody knows (a timeout, a lost connection, OutcomeUnknown): it may have happened at
          any instant after its invoke, or never. A process that got info may invoke again at
          once: its earlier operation simply stays open forever.

`operations(events)` pairs them into `Operation`s, the unit every checker works on.

Operations on a key are those of one register (absent = None):

    read   input None;            output the value read (None: absent)
    write  input the new value (None: delete);  output None
    swap   input the new value (None: delete);  output the value it replaced (a put or delete
           with etcd's prev_kv)
    cas    input (expected, new); output True if it swapped, False if the compare failed (a
           store txn comparing mod_revision, or an apiserver update with a resourceVersion
           precondition answered 409 Conflict); expected None means "absent" (a create)

Values should be unique per write (Jepsen's habit): a value then names the write that made it,
which is what `acked` and the translation of revisions into values rely on. A store compare on
mod_revision R becomes a cas on the value written at R (`Versions` keeps that map); a read also
records the kv's mod_revision and a write its header revision (`revision`), so the checkers can
hold them against the store's own history of `Change`s.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable, Mapping

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
COMPLETIONS = (OK, FAIL, INFO)
READ, WRITE, SWAP, CAS = "read", "write", "swap", "cas"
FUNCTIONS = (READ, WRITE, SWAP, CAS)
PUT, DELETE = "PUT", "DELETE"  # a store change's type (store.mvcc's names)


class HistoryError(ValueError):
    """A history that cannot be judged: malformed, or events out of the pairing rules."""


@dataclass(frozen=True, slots=True)
class Event:
    """One line of a history. `value` is the input on invoke, the output on ok, unused on
    fail/info (their `error` says why). `revision`: on ok, the store revision the answer carried
    (a write's header revision, a read's kv mod_revision; 0 for an absent key)."""
    type: str
    process: Hashable
    f: str
    key: Hashable
    value: Any = None
    time: float = 0
    revision: int | None = None
    error: str | None = None

    def to_dict(self) -> dict:
        d = {"type": self.type, "process": self.process, "f": self.f, "key": self.key,
             "value": self.value, "time": self.time}
        if self.revision is not None:
            d["revision"] = self.revision
        if self.error is not None:
            d["error"] = self.error
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> Event:
        try:
            return cls(d["type"], _frozen(d["process"]), d["f"], _frozen(d["key"]), _frozen(d.get("value")),
                       d["time"], d.get("revision"), d.get("error"))
        except (KeyError, TypeError) as exc:
            raise HistoryError(f"malformed history event {dict(d)!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Operation:
    """An invoke paired with its completion. `ret` is None when the outcome is unknown (info)."""
    process: Hashable
    f: str
    key: Hashable
    input: Any
    output: Any
    call: float
    ret: float | None
    status: str
    revision: int | None = None
    error: str | None = None

    @property
    def writes(self) -> bool:
        """Whether it changes the register if it takes effect (cas: only if it swaps)."""
        return self.f in (WRITE, SWAP, CAS)

    @property
    def new_value(self) -> Any:
        """The value the register holds after it, if it writes."""
        return self.input[1] if self.f == CAS else self.input

    def precedes(self, other: Operation) -> bool:
        """Real-time order: self returned before other was invoked. An instant shared by a
        return and an invoke counts as concurrent (the permissive reading: one clock tick can
        hold both)."""
        return self.ret is not None and self.ret < other.call

    def __str__(self) -> str:
        end = "?" if self.ret is None else f"{self.ret:.6g}"
        arg = "" if self.f == READ else repr(self.input)
        out = {OK: f" -> {self.output!r}" if self.f in (READ, SWAP, CAS) else " -> ok", INFO: " -> ?",
               FAIL: " -> failed"}[self.status]
        return f"[{self.call:.6g}, {end}] process {self.process!r}: {self.key!r} {self.f}({arg}){out}"


@dataclass(frozen=True, slots=True)
class Change:
    """What the store did to one key at one revision (a watch event, an entry of its history):
    type PUT (value: the new value) or DELETE (value None)."""
    revision: int
    key: Hashable
    type: str
    value: Any = None

    @classmethod
    def from_store_event(cls, event, decode: Callable[[bytes], Any] = lambda b: b) -> Change:
        """A Change from a store.mvcc.Event (or anything with .type and .kv), the value through
        `decode` (e.g. bytes.decode, or an apiserver object's codec)."""
        kv = event.kv
        value = decode(kv["value"]) if event.type == PUT else None
        return cls(kv["mod_revision"], kv["key"], event.type, value)

    def __str__(self) -> str:
        what = f"PUT {self.value!r}" if self.type == PUT else "DELETE"
        return f"revision {self.revision}: {self.key!r} {what}"


def _frozen(value):
    """JSON turns tuples into lists: make them tuples again (values must stay hashable)."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


class History:
    """Records events as clients run. Times come from `clock` (the runner's, e.g.
    time.monotonic; tests pass a fake one), taken when the call is made.

        h.invoke(p, "write", key, "v1")
        try: resp = await store.put(key, "v1")
        except OutcomeUnknown as e: h.info(p, error=str(e))
        except Unavailable as e: h.fail(p, error=str(e))     # not executed
        else: h.ok(p, revision=resp["header"]["revision"])
    """

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.events: list[Event] = []
        self._open: dict[Hashable, Event] = {}

    def invoke(self, process: Hashable, f: str, key: Hashable, value: Any = None) -> Event:
        if f not in FUNCTIONS:
            raise HistoryError(f"unknown operation {f!r} (expected one of {', '.join(FUNCTIONS)})")
        if process in self._open:
            raise HistoryError(f"process {process!r} invoked {f} while its {self._open[process].f} is open")
        event = Event(INVOKE, process, f, key, value, self.clock())
        self._open[process] = event
        self.events.append(event)
        return event

    def ok(self, process: Hashable, value: Any = None, *, revision: int | None = None) -> Event:
        return self._complete(OK, process, value, revision, None)

    def fail(self, process: Hashable, *, error: str | None = None) -> Event:
        return self._complete(FAIL, process, None, None, error)

    def info(self, process: Hashable, *, error: str | None = None) -> Event:
        return self._complete(INFO, process, None, None, error)

    def _complete(self, type_: str, process, value, revision, error) -> Event:
        call = self._open.pop(process, None)
        if call is None:
            raise HistoryError(f"process {process!r} completed an operation it never invoked")
        event = Event(type_, process, call.f, call.key, value, self.clock(), revision, error)
        self.events.append(event)
        return event

    def operations(self) -> list[Operation]:
        """The operations so far; those still open count as info (outcome unknown)."""
        return operations(self.events)

    def to_dicts(self) -> list[dict]:
        return [e.to_dict() for e in self.events]


def operations(events: Iterable[Event | Mapping]) -> list[Operation]:
    """Pair each invoke with its process's next completion, in invoke order. An invoke left
    without a completion is an info (its client never learnt the outcome)."""
    open_: dict[Hashable, tuple[Event, int]] = {}  # process -> its open invoke, its index in done
    done: list[tuple[Event, Event | None]] = []
    for n, event in enumerate(events):
        if not isinstance(event, Event):
            event = Event.from_dict(event)
        if event.f not in FUNCTIONS:
            raise HistoryError(f"event {n}: unknown operation {event.f!r}")
        if event.type == INVOKE:
            if event.process in open_:
                raise HistoryError(f"event {n}: process {event.process!r} invoked again while an operation is open")
            open_[event.process] = (event, len(done))
            done.append((event, None))
            continue
        if event.type not in COMPLETIONS:
            raise HistoryError(f"event {n}: unknown event type {event.type!r}")
        if event.process not in open_:
            raise HistoryError(f"event {n}: process {event.process!r} completed an operation it never invoked")
        call, index = open_.pop(event.process)
        if (call.f, call.key) != (event.f, event.key):
            raise HistoryError(f"event {n}: completion {event.f} {event.key!r} does not match the invoke "
                               f"{call.f} {call.key!r} of process {event.process!r}")
        if event.time < call.time:
            raise HistoryError(f"event {n}: process {event.process!r} completed before it invoked")
        done[index] = (call, event)
    ops = []
    for call, end in done:
        status = INFO if end is None else end.type
        ops.append(Operation(call.process, call.f, call.key, call.value,
                             end.value if status == OK else None,
                             call.time, end.time if status != INFO else None, status,
                             end.revision if status == OK else None, end.error if end is not None else None))
    return ops


class Versions:
    """Which value each (key, revision) named, learnt from answers: a write's revision and a
    read's (value, mod_revision). The recorder of a store compare on mod_revision R (or an
    apiserver update with resourceVersion R) asks `value_at(key, R)` for the cas's expected
    value: the client had R from some answer, so the map knows it. Revision 0 is "absent".
    Answers that disagree are not judged here (the first is kept): `acked.check_revisions`
    holds every answer against the store's own history."""

    def __init__(self) -> None:
        self._values: dict[tuple[Hashable, int], Any] = {}

    def learn(self, key: Hashable, revision: int, value: Any) -> None:
        if revision == 0:
            return
        self._values.setdefault((key, revision), value)

    def value_at(self, key: Hashable, revision: int) -> Any:
        if revision == 0:
            return None
        try:
            return self._values[(key, revision)]
        except KeyError:
            raise HistoryError(f"no answer named the value of {key!r} at revision {revision}") from None
