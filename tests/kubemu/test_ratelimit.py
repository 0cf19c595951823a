"""kubemu/ratelimit.py: pure limiters driven with explicit times (no clock is ever read)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kubemu.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    LogThrottle,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)


def test_exponential_doubles_per_failure_and_caps():
    rl = ItemExponentialFailureRateLimiter(base=0.005, max=1.0)
    delays = [rl.when("a") for _ in range(10)]
    assert delays[:5] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert delays[-1] == 1.0 and max(delays) == 1.0
    assert rl.num_requeues("a") == 10


def test_exponential_is_per_item_and_forget_resets():
    rl = ItemExponentialFailureRateLimiter(base=0.005, max=1000.0)
    rl.when("a"), rl.when("a"), rl.when("a")
    assert rl.when("b") == pytest.approx(0.005)
    assert rl.num_requeues("a") == 3 and rl.num_requeues("b") == 1
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    assert rl.when("a") == pytest.approx(0.005)
    rl.forget("never-seen")   # harmless


def test_exponential_survives_huge_failure_counts():
    rl = ItemExponentialFailureRateLimiter(base=0.005, max=1000.0)
    for _ in range(5000):   # 2.0**5000 would overflow a float
        d = rl.when("a")
    assert d == 1000.0


def test_bucket_allows_a_burst_then_spaces_at_qps():
    rl = BucketRateLimiter(qps=10, burst=3)
    assert [rl.when(i, 0.0) for i in range(3)] == [0.0, 0.0, 0.0]
    # Tokens are reserved in debt: the 4th..6th wait 0.1, 0.2, 0.3 s.
    assert [rl.when(i, 0.0) for i in range(3, 6)] == pytest.approx([0.1, 0.2, 0.3])
    # After 0.3 s the debt is paid; the next token arrives 0.1 s later.
    assert rl.when("x", 0.3) == pytest.approx(0.1)


def test_bucket_refills_up_to_burst_only():
    rl = BucketRateLimiter(qps=10, burst=2)
    rl.when("a", 0.0), rl.when("a", 0.0)
    assert rl.tokens(0.05) == pytest.approx(0.5)
    assert rl.tokens(100.0) == 2.0
    assert [rl.when(i, 100.0) for i in range(3)] == pytest.approx([0.0, 0.0, 0.1])


def test_bucket_ignores_time_going_backwards():
    rl = BucketRateLimiter(qps=1, burst=1)
    assert rl.when("a", 10.0) == 0.0
    assert rl.when("a", 5.0) == pytest.approx(1.0)   # no refill, no negative refill
    assert rl.num_requeues("a") == 0
    rl.forget("a")


@settings(max_examples=200, deadline=None)
@given(qps=st.floats(0.5, 100), burst=st.integers(1, 20),
       gaps=st.lists(st.floats(0, 2), min_size=1, max_size=60))
def test_bucket_never_grants_more_than_burst_plus_rate(qps, burst, gaps):
    """Over any prefix, the tokens granted by time T (now + delay <= T) are at most
    burst + qps * T: the defining property of a token bucket."""
    rl = BucketRateLimiter(qps=qps, burst=burst)
    now, grants = 0.0, []
    for gap in gaps:
        now += gap
        d = rl.when("k", now)
        assert d >= 0
        grants.append(now + d)
    grants.sort()
    for i, t in enumerate(grants):
        assert i + 1 <= burst + qps * t + 1e-6


def test_max_of_takes_the_longest_and_consults_all():
    slow = ItemExponentialFailureRateLimiter(base=1.0, max=100.0)
    fast = ItemExponentialFailureRateLimiter(base=0.001, max=100.0)
    rl = MaxOfRateLimiter(fast, slow)
    assert rl.when("a", 0.0) == 1.0
    assert rl.when("a", 0.0) == 2.0
    assert fast.num_requeues("a") == slow.num_requeues("a") == rl.num_requeues("a") == 2
    rl.forget("a")
    assert fast.num_requeues("a") == slow.num_requeues("a") == 0
    with pytest.raises(ValueError):
        MaxOfRateLimiter()


def test_default_controller_rate_limiter_matches_client_go():
    rl = default_controller_rate_limiter()
    # One key failing: the exponential dominates, 5 ms doubling up to 1000 s.
    delays = [rl.when("k", 0.0) for _ in range(20)]
    assert delays[:4] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert max(delays) <= 1000.0
    assert rl.num_requeues("k") == 20
    rl.forget("k")
    assert rl.when("k", 10_000.0) == pytest.approx(0.005)

    # A storm of distinct keys: the first 100 (burst) pass at 5 ms, then 10 qps spacing.
    rl = default_controller_rate_limiter()
    storm = [rl.when(f"k{i}", 0.0) for i in range(110)]
    assert storm[:100] == pytest.approx([0.005] * 100)
    assert storm[100:] == pytest.approx([0.1 * n for n in range(1, 11)])


def test_log_throttle_first_then_one_per_interval_per_key_with_the_quiet_count():
    t = LogThrottle(interval=10.0, qps=100.0, burst=100)
    assert t.allow("a", 0.0) == 0
    assert [t.allow("a", s) for s in (1.0, 2.0, 9.9)] == [None, None, None]
    assert t.allow("b", 5.0) == 0  # per key: b is not held back by a
    assert t.allow("a", 10.0) == 3  # the three kept quiet are reported with the next line
    assert t.allow("a", 11.0) is None
    assert t.allow("a", 25.0) == 1
    assert t.allow("a", 40.0) == 0


def test_log_throttle_bounds_lines_over_all_keys():
    t = LogThrottle(interval=10.0, qps=1.0, burst=3)
    assert [t.allow(k, 0.0) for k in "abcde"] == [0, 0, 0, None, None]
    assert t.allow("d", 1.0) == 1  # a token came back; d's quiet one is reported
    assert t.allow("e", 1.0) is None
    assert t.allow("e", 2.0) == 2


def test_log_throttle_forgets_keys_beyond_its_bound():
    t = LogThrottle(interval=10.0, qps=1e9, burst=10**9, max_keys=100)
    for i in range(1000):
        assert t.allow(i, float(i)) == 0
    assert len(t._keys) <= 100
    assert t.allow(999, 999.5) is None  # the newest are kept
