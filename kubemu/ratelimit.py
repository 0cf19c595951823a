"""Per-item rate limiters for controller work queues, after client-go's util/workqueue.

A controller that fails to sync a key calls `queue.add_rate_limited(key)`; the queue asks its
limiter `when(key, now)` how long to wait before the retry, and calls `forget(key)` once a sync
succeeds so the next failure starts from scratch again. Every limiter here is pure: time is
always passed in (`now`, in seconds on any monotonic scale the caller likes), never read from
a clock, so tests drive them with plain numbers.

    ItemExponentialFailureRateLimiter  per item, base * 2**failures, capped (client-go's
                                       ItemExponentialFailureRateLimiter)
    BucketRateLimiter                  one token bucket shared by all items (client-go's
                                       BucketRateLimiter over golang.org/x/time/rate)
    MaxOfRateLimiter                   the longest delay of several (client-go's
                                       MaxOfRateLimiter)
    default_controller_rate_limiter()  client-go's DefaultControllerRateLimiter: max of the
                                       exponential (5 ms .. 1000 s) and the bucket (10 qps,
                                       burst 100)
    LogThrottle                        whether to log one more occurrence per key (a wire
                                       server's rejected messages, per peer)
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol


class RateLimiter(Protocol):
    def when(self, item: Hashable, now: float) -> float:
        """Seconds to wait before `item` may be retried; records the attempt."""

    def forget(self, item: Hashable) -> None:
        """`item` succeeded: stop tracking it (its next failure starts from scratch)."""

    def num_requeues(self, item: Hashable) -> int:
        """How many times `item` has been rate-limited since it was last forgotten."""


class ItemExponentialFailureRateLimiter:
    """Delay for an item's n-th consecutive failure (n from 0) = base * 2**n, at most `max`.

    `now` is accepted for interface uniformity and ignored: the delay depends only on the
    failure count, as in client-go."""

    # 2.0 ** 1024 overflows a float; any exponent this large is far past every sane cap.
    _MAX_EXPONENT = 1000

    def __init__(self, base: float = 0.005, max: float = 1000.0) -> None:  # noqa: A002
        if base < 0 or max < 0:
            raise ValueError("delays must be non-negative")
        self.base = base
        self.max = max
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable, now: float = 0.0) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        delay = self.base * 2.0 ** min(exp, self._MAX_EXPONENT)
        return min(delay, self.max)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """A token bucket of `burst` tokens refilled at `qps` per second, shared by all items.

    `when` reserves a token even when none is available yet (the bucket goes into debt), and
    returns how long until that token will exist, like golang.org/x/time/rate's
    Limiter.Reserve().Delay() that client-go's BucketRateLimiter uses. So a burst of
    burst + k items gets delays 0 (burst times), then 1/qps, 2/qps, ... k/qps. It is
    item-blind: `forget` does nothing and `num_requeues` is always 0, as in client-go."""

    def __init__(self, qps: float = 10.0, burst: int = 100) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be positive and burst at least 1")
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last: float | None = None   # time of the last refill; None = never used

    def when(self, item: Hashable, now: float) -> float:
        self._refill(now)
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def tokens(self, now: float) -> float:
        """Tokens available at `now` (negative = reserved in advance)."""
        self._refill(now)
        return self._tokens

    def _refill(self, now: float) -> None:
        # Time never runs backwards for the bucket: a stale `now` (say, from a caller that
        # read the clock before another caller did) refills nothing rather than un-refilling.
        if self._last is None or now > self._last:
            if self._last is not None:
                self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now

    def forget(self, item: Hashable) -> None:
        pass

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest delay any of `limiters` asks for. Every limiter is consulted on every
    `when` (so each records the attempt / spends its token), as in client-go."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable, now: float) -> float:
        return max([limiter.when(item, now) for limiter in self.limiters])

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter() -> MaxOfRateLimiter:
    """client-go's DefaultControllerRateLimiter: per-item exponential backoff from 5 ms to
    1000 s, and an overall 10 qps / burst 100 bucket so a storm of failing keys cannot
    hammer the API server."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base=0.005, max=1000.0),
        BucketRateLimiter(qps=10.0, burst=100),
    )


class LogThrottle:
    """Whether to log one more occurrence of something a key (a peer) keeps doing: the first
    occurrence, then at most one every `interval` seconds per key, and no more than `qps`
    (burst `burst`) over all keys, so a flood from many keys is bounded too. Pure: `now` is
    passed in.

    `allow` answers None to stay quiet (the occurrence is counted), or how many occurrences of
    that key were kept quiet since its last logged one, for the line to say."""

    def __init__(self, interval: float = 10.0, qps: float = 1.0, burst: int = 20, max_keys: int = 4096) -> None:
        self.interval = interval
        self.max_keys = max_keys
        self._bucket = BucketRateLimiter(qps=qps, burst=burst)
        self._keys: dict[Hashable, list] = {}  # key -> [time of its last logged line, quiet since]

    def allow(self, key: Hashable, now: float) -> int | None:
        state = self._keys.get(key)
        if state is not None and now - state[0] < self.interval:
            state[1] += 1
            return None
        if self._bucket.tokens(now) < 1:
            if state is None:
                self._remember(key, [now - self.interval, 1], now)  # its next one may be logged
            else:
                state[1] += 1
            return None
        self._bucket.when(key, now)
        quiet = 0 if state is None else state[1]
        self._remember(key, [now, 0], now)
        return quiet

    def _remember(self, key: Hashable, state: list, now: float) -> None:
        self._keys[key] = state
        if len(self._keys) > self.max_keys:
            # forget keys whose window is over (their quiet counts are lost), oldest first
            # when that is not enough
            self._keys = {k: s for k, s in self._keys.items() if now - s[0] < self.interval}
            while len(self._keys) > self.max_keys // 2:
                del self._keys[next(iter(self._keys))]
            self._keys[key] = state
