"""Auto-compaction's schedule (etcd's --auto-compaction-retention), kept by the leader only:
("periodic", S) keeps S seconds of history (the revision sampled S seconds ago is the target;
about ten samples per S), ("revision", N) keeps N revisions (checked every REVISION_CHECK_S),
("off", 0) never compacts. The replica proposes the compaction."""
from __future__ import annotations

import collections

REVISION_CHECK_S = 5.0


class AutoCompaction:
    def __init__(self, retention: tuple[str, float]):
        self._retention = retention
        self._samples: collections.deque = collections.deque()
        self._next_sample = 0.0
        self._next_check = 0.0

    def restart(self, now: float) -> None:
        """This replica just became the leader: start sampling afresh."""
        self._samples.clear()
        self._next_sample = now
        self._next_check = now + REVISION_CHECK_S

    def target(self, now: float, revision: int) -> int:
        """The revision to compact at now, given the store's `revision` (0: none)."""
        mode, value = self._retention
        target = 0
        if mode == "revision":
            if now < self._next_check:
                return 0
            self._next_check = now + REVISION_CHECK_S
            target = revision - int(value)
        elif mode == "periodic":
            if now >= self._next_sample:
                self._samples.append((now, revision))
                self._next_sample = now + max(value / 10, 0.05)
            while self._samples and self._samples[0][0] <= now - value:
                target = self._samples.popleft()[1]
        return target
