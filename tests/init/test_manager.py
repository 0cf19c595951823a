"""Jobs across units: After= ordering at start and in reverse at stop, Requires=, reload."""
import signal

import pytest

from init.core import Kill, Log, Spawn
from init.manager import BrokenUnit, Manager, UnitLoadError
from init.unitconfig import RestartPolicy, ServiceType, UnitConfig


def unit(name, **kw) -> UnitConfig:
    return UnitConfig(name=name, path=f"/units/{name}", exec_start=("/bin/true",), **kw)


def spawned(actions):
    return [a.unit for a in actions if isinstance(a, Spawn)]


def test_after_waits_for_notify_ready():
    m = Manager({"a.service": unit("a.service", type=ServiceType.NOTIFY),
                 "b.service": unit("b.service", after=("a.service",))})
    assert spawned(m.boot(0)) == ["a.service"]
    assert spawned(m.on_spawned("a.service", 10, 0)) == []  # activating: b still waits
    assert spawned(m.on_notify(10, {"READY": "1"}, 1)) == ["b.service"]


def test_after_on_simple_unit_starts_once_forked():
    m = Manager({"a.service": unit("a.service"), "b.service": unit("b.service", after=("a.service",))})
    assert spawned(m.boot(0)) == ["a.service"]
    assert spawned(m.on_spawned("a.service", 10, 0)) == ["b.service"]


def test_requires_failure_fails_dependent_start():
    m = Manager({"a.service": unit("a.service", type=ServiceType.NOTIFY),
                 "b.service": unit("b.service", after=("a.service",), requires=("a.service",))})
    m.boot(0)
    m.on_spawned("a.service", 10, 0)
    acts = m.on_exit(10, 1, None, 1)  # a dies before READY=1
    assert spawned(acts) == []
    assert any(isinstance(a, Log) and "Dependency failed for b.service" in a.message for a in acts)


def test_wants_only_pulls_in():
    m = Manager({"a.service": unit("a.service", type=ServiceType.NOTIFY),
                 "b.service": unit("b.service", after=("a.service",), wants=("a.service",))})
    m.boot(0)
    m.on_spawned("a.service", 10, 0)
    assert spawned(m.on_exit(10, 1, None, 1)) == ["b.service"]


def test_start_pulls_in_required_units():
    m = Manager({"a.service": unit("a.service"), "b.service": unit("b.service", requires=("a.service",))})
    assert sorted(spawned(m.start("b.service", 0))) == ["a.service", "b.service"]


def test_shutdown_stops_in_reverse_order():
    m = Manager({"a.service": unit("a.service"), "b.service": unit("b.service", after=("a.service",))})
    m.boot(0)
    m.on_spawned("a.service", 10, 0)
    m.on_spawned("b.service", 11, 0)
    acts = m.shutdown(1)
    assert [(a.unit, a.signal) for a in acts if isinstance(a, Kill)] == [("b.service", signal.SIGTERM)]
    acts = m.on_exit(11, None, signal.SIGTERM, 2)
    assert [(a.unit, a.signal) for a in acts if isinstance(a, Kill) and a.pid == 10] == [("a.service", signal.SIGTERM)]
    assert not m.all_stopped()
    m.on_exit(10, None, signal.SIGTERM, 3)
    assert m.all_stopped()
    assert spawned(m.start("a.service", 4)) == []  # no starts during shutdown


def test_stop_propagates_to_units_that_require_it():
    m = Manager({"a.service": unit("a.service"), "b.service": unit("b.service", requires=("a.service",))})
    m.boot(0)
    m.on_spawned("a.service", 10, 0)
    m.on_spawned("b.service", 11, 0)
    acts = m.stop("a.service", 1)
    assert sorted(a.unit for a in acts if isinstance(a, Kill)) == ["a.service", "b.service"]


def test_unknown_and_broken_units():
    m = Manager({}, {"bad.service": BrokenUnit("bad.service", "/u/bad.service", "/u/bad.service:3: oops")})
    with pytest.raises(KeyError):
        m.start("nope.service", 0)
    with pytest.raises(UnitLoadError, match="bad.service:3"):
        m.start("bad.service", 0)
    [row] = m.status()
    assert row["active_state"] == "failed" and row["load_state"] == "bad-setting"


def test_reload_adds_removes_and_defers_changes():
    a = unit("a.service")
    m = Manager({"a.service": a, "old.service": unit("old.service")})
    m.boot(0)
    m.on_spawned("a.service", 10, 0)
    m.on_spawned("old.service", 11, 0)
    changed = unit("a.service", description="changed")
    acts = m.reload({"a.service": changed, "new.service": unit("new.service")}, {}, 1)
    assert [(k.unit, k.signal) for k in acts if isinstance(k, Kill)] == [("old.service", signal.SIGTERM)]
    assert "new.service" in m.services and m.services["new.service"].active_state == "inactive"
    assert m.services["a.service"].config.description == ""  # takes effect at next start
    m.on_exit(11, None, signal.SIGTERM, 2)
    assert "old.service" not in m.services
    m.restart("a.service", 3)
    m.on_exit(10, None, signal.SIGTERM, 3)
    assert m.services["a.service"].config.description == "changed"


def test_tick_and_deadlines():
    m = Manager({"a.service": unit("a.service", restart_sec=5, restart=RestartPolicy.ALWAYS)})
    m.boot(0)
    m.on_spawned("a.service", 10, 0)
    m.on_exit(10, 1, None, 1)
    assert m.next_deadline() == 6
    assert spawned(m.tick(5.9)) == []
    assert spawned(m.tick(6)) == ["a.service"]


def test_orphan_exit_and_notify_return_none():
    m = Manager({"a.service": unit("a.service")})
    assert m.on_exit(999, 0, None, 0) is None
    assert m.on_notify(999, {"READY": "1"}, 0) is None


def test_reset_failed_acts_on_all_units_only_when_no_unit_is_named():
    m = Manager({"a.service": unit("a.service"), "b.service": unit("b.service")})
    m.boot(0.0)
    for falsy in ("", 0):
        with pytest.raises(KeyError):  # a unit of that name, which there is not
            m.reset_failed(falsy, 1.0)
    assert m.reset_failed(None, 1.0) == []
