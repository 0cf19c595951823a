from __future__ import annotations

from components.kube_proxy.sync import RETRY_MAX, Decision, SyncRunner, trigger_time


def ready_runner(**kw) -> SyncRunner:
    r = SyncRunner(min_period=1.0, full_period=3600.0, **kw)
    r.initialized = True
    return r


def run(r: SyncRunner, now: float, ok: bool = True) -> tuple[Decision, list[float]]:
    d = r.due(now)
    assert d is not None, f"no sync due at {now}"
    r.start(now)
    return d, r.finished(now, ok, d.full)


def test_nothing_before_initialized():
    r = SyncRunner(min_period=1.0, full_period=3600.0)
    r.request()
    assert r.due(0) is None and r.next_wakeup(0) is None
    r.initialized = True
    assert r.due(0) == Decision(full=True)


def test_first_full_then_partial_only_on_request():
    r = ready_runner()
    assert run(r, 0)[0].full
    assert r.due(5) is None
    r.request()
    assert r.due(5) == Decision(full=False)


def test_min_sync_period_bounds_frequency():
    r = ready_runner()
    run(r, 10)
    r.request()
    assert r.due(10.5) is None
    assert r.next_wakeup(10.5) == 11.0
    assert r.due(11.0) == Decision(full=False)


def test_full_resync_every_sync_period():
    r = ready_runner()
    run(r, 0)
    assert r.next_wakeup(100) == 3600.0
    assert r.due(3599) is None
    assert r.due(3600) == Decision(full=True)


def test_failure_retries_full_with_backoff():
    r = ready_runner()
    run(r, 0)
    r.request()
    d, _ = run(r, 5, ok=False)
    assert not d.full
    assert r.due(5.5) is None and r.next_wakeup(5.5) == 6.0
    d, _ = run(r, 6, ok=False)
    assert d.full
    assert r.due(7) is None and r.due(8) == Decision(full=True)
    for _ in range(10):
        run(r, r.next_wakeup(100) or 0, ok=False)
    assert r.retry_at - r.last_start == RETRY_MAX
    run(r, r.next_wakeup(0), ok=True)
    assert r.retry_at is None and r.failures == 0 and not r.need_full


def test_no_sync_while_one_runs():
    r = ready_runner()
    r.start(0)
    r.request()
    assert r.due(100) is None and r.next_wakeup(100) is None


def test_stale_deadline_wakes_the_loop():
    r = ready_runner()
    run(r, 0)
    assert r.next_wakeup(0.2, also=1.2) == 1.2


def test_network_programming_latency():
    r = ready_runner(started_at=100.0)
    run(r, 100)
    r.note_slice(None, 99.0)      # older than the proxy: not its latency
    r.note_slice(None, 101.0)
    r.note_slice(101.0, 101.0)    # same stamp again: an update that moved no endpoint
    r.note_slice(101.0, 101.5)
    assert r.requested
    _, lat = run(r, 102.0)
    assert lat == [1.0, 0.5]
    r.note_slice(None, 103.0)
    _, lat = run(r, 104.0, ok=False)   # a failed sync programmed nothing: the stamp waits
    assert lat == []
    r.note_slice(None, 104.5)
    _, lat = run(r, 106.0)
    assert lat == [3.0, 1.5]


def test_trigger_time_parsing():
    s = {"metadata": {"annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z"}}}
    assert trigger_time(s) == 1767225600.0
    assert trigger_time({"metadata": {}}) is None
    assert trigger_time({"metadata": {"annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "x"}}}) is None
    assert trigger_time({"metadata": None}) is None
