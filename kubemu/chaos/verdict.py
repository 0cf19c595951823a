"""A chaos run's verdict: what the runner recorded, judged, as one report (pure).

`assemble` takes the recordings (client history, the store's changes, watch sessions, the
final values, stale-precondition answers, convergence times, component writes from the audit
logs, leftover processes) and returns a `Report`: one `Check` per property the issue asks for,
each ok or not with a summary and details, plus the timeline. `Report.ok` is the exit status.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping, Sequence

from . import acked, linearizability, watchcheck
from .history import Change, Operation

ACCEPTED, CONFLICT, UNKNOWN = "accepted", "conflict", "unknown"  # a stale-precondition write's answer


@dataclass
class Check:
    name: str
    ok: bool
    summary: str
    details: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "summary": self.summary, "details": self.details}


@dataclass(frozen=True)
class Convergence:
    """How long a workload took to be back at its desired state after a fault was healed
    (seconds; None: not within the bound); fault -1 is the start of the run."""
    fault: int
    seconds: float | None
    bound: float
    workload: str = "deployment"

    def to_dict(self) -> dict:
        return {"fault": self.fault, "workload": self.workload, "bound": self.bound,
                "seconds": None if self.seconds is None else round(self.seconds, 3)}


@dataclass(frozen=True)
class ComponentWrite:
    """A write a leader-elected component sent, from an audit log: its Lease's write (`lease`,
    a successful one: a term begins or goes on) or any other."""
    time: float
    component: str  # kube-scheduler, kube-controller-manager
    identity: str   # <node>_<pid>
    lease: bool


@dataclass
class Report:
    checks: list[Check]
    timeline: list[dict]
    skipped: dict[str, str]
    convergence: list[Convergence] = field(default_factory=list)
    faults: list[dict] = field(default_factory=list)  # each fault's window: index, kind, start, end

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "checks": [c.to_dict() for c in self.checks], "timeline": self.timeline,
                "skipped": self.skipped, "faults": self.faults,
                "convergence": [c.to_dict() for c in self.convergence]}

    def text(self, timeline: bool = True) -> str:
        """The verdict as lines; `timeline=False` leaves out the timeline (printed as it ran)."""
        lines = ["timeline:"] + [f"  {e['t']:8.2f}s  {e['what']}" for e in self.timeline] if timeline else []
        lines += [f"skipped {k if k.startswith('workload ') else 'fault ' + k}: {why}"
                  for k, why in self.skipped.items()]
        for c in self.checks:
            lines.append(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.summary}")
            lines += [f"       {d}" for d in c.details[:10]]
        lines.append("PASS" if self.ok else "FAIL: chaos found violations")
        return "\n".join(lines)


def check_linearizable(ops: Sequence[Operation], max_steps: int = linearizability.DEFAULT_MAX_STEPS) -> Check:
    result = linearizability.check(ops, max_steps=max_steps)
    details = []
    for k in result.problems:
        details.append(f"{k.key!r}: {k.verdict.value} after {k.steps} steps"
                       + (f", stuck on {k.stuck_on}" if k.stuck_on else ""))
    # an exhausted budget is not a pass: CI must hear of it
    return Check("linearizable", result.verdict is linearizability.Verdict.VALID,
                 f"{result.verdict.value}, {len(result.keys)} keys, {len(ops)} operations", details)


def check_acked(ops: Sequence[Operation], final: Mapping[Hashable, Any], store: Sequence[Change], since: int) -> Check:
    present = acked.check_acked(ops, final)
    revisions = acked.check_revisions(ops, store, since=since)
    violations = present.violations + revisions.violations
    return Check("acknowledged writes", not violations,
                 f"{present.checked} acknowledged writes present or superseded, {revisions.checked} answers "
                 f"held against the store's history", [f"{v.kind}: {v.message}" for v in violations])


def check_watches(store: Sequence[Change], watches: Mapping[str, Sequence[watchcheck.WatchSession]],
                  watched, until: int | None) -> Check:
    results = [watchcheck.check_watch(store, sessions, watched=watched, until=until, name=name)
               for name, sessions in watches.items()]
    details = [line for r in results if not r.ok for line in str(r).splitlines()]
    delivered = sum(r.delivered for r in results)
    return Check("watches exact", all(r.ok for r in results) and bool(results),
                 f"{len(results)} watch(es), {delivered} events" if results else "no watch recorded", details)


def check_preconditions(answers: Sequence[tuple[int, str, str]]) -> Check:
    """(fault index or -1, name, answer) of every write sent with a stale resourceVersion: each
    must have been refused (409); an unknown outcome proves nothing either way."""
    bad = [f"a write with a stale resourceVersion to {name} was accepted (fault {i})"
           for i, name, answer in answers if answer == ACCEPTED]
    refused = sum(1 for _i, _n, a in answers if a == CONFLICT)
    return Check("409 on stale resourceVersion", not bad and refused > 0,
                 f"{refused} refused, {len(bad)} accepted, "
                 f"{sum(1 for _i, _n, a in answers if a == UNKNOWN)} unknown", bad)


def check_convergence(times: Sequence[Convergence]) -> Check:
    """Every workload was back at its desired state within its bound after every fault."""
    late = [f"fault {c.fault}: {c.workload} not converged within {c.bound:g}s" for c in times if c.seconds is None]
    per: dict[str, list[str]] = {}
    for c in times:
        if c.seconds is not None:
            per.setdefault(c.workload, []).append(f"#{c.fault} {c.seconds:.1f}s")
    shown = "; ".join(f"{w}: {', '.join(t)}" for w, t in per.items())
    return Check("workload converges", not late and bool(times), f"after each fault: {shown or 'none measured'}",
                 late)


def check_lease_terms(writes: Sequence[ComponentWrite]) -> Check:
    """No component wrote while another instance held its Lease: a term starts with a Lease
    write by its holder; any write by another identity of that component before the next Lease
    write is one of two leaders acting at once."""
    term: dict[str, str] = {}
    bad = []
    terms: dict[str, list[str]] = {}
    for w in sorted(writes, key=lambda w: w.time):
        if w.lease:
            if term.get(w.component) != w.identity:
                terms.setdefault(w.component, []).append(w.identity)
            term[w.component] = w.identity
        elif w.component in term and term[w.component] != w.identity:
            bad.append(f"{w.component} {w.identity} wrote at {w.time:.3f} in {term[w.component]}'s term")
    summary = "; ".join(f"{c}: {len(t)} term(s)" for c, t in sorted(terms.items())) or "no lease writes seen"
    return Check("one leader per term", not bad and bool(terms), summary, bad)


def check_processes(leaked: Sequence[str], stopped: Sequence[str]) -> Check:
    details = [f"leaked: {p}" for p in leaked] + [f"left stopped: {p}" for p in stopped]
    summary = "every process is a unit's or a pod's the kubelet reports"
    return Check("no leaked process", not details, summary if not details else f"{len(details)} problem(s)", details)


def assemble(*, ops: Sequence[Operation], final: Mapping[Hashable, Any], store: Sequence[Change], since: int,
             watches: Mapping[str, Sequence[watchcheck.WatchSession]], watched, until: int | None,
             preconditions: Sequence[tuple[int, str, str]], convergence: Sequence[Convergence],
             component_writes: Sequence[ComponentWrite], leaked: Sequence[str], stopped: Sequence[str],
             timeline: list[dict], skipped: Mapping[str, str], errors: Sequence[str] = (),
             faults: Sequence[dict] = (), max_steps: int = linearizability.DEFAULT_MAX_STEPS) -> Report:
    checks = [check_linearizable(ops, max_steps), check_acked(ops, final, store, since),
              check_watches(store, watches, watched, until), check_preconditions(preconditions),
              check_convergence(convergence), check_lease_terms(component_writes),
              check_processes(leaked, stopped)]
    if errors:  # the run itself could not do what it had to (a fault not injected, not healed)
        checks.append(Check("run", False, f"{len(errors)} error(s)", list(errors)))
    return Report(checks, timeline, dict(skipped), list(convergence), list(faults))
