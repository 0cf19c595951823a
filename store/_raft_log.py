"""The in-memory Raft log: entries after the last snapshot, commit/applied/stable marks.

The core keeps every entry since the last compaction in memory (the shell keeps the durable
copy). Indexes: `snap_index` is the last index covered by the snapshot (0 if none), the
entries hold `snap_index+1 .. last_index`. `stable` is the last index the shell has
persisted (handed out in a Ready that was advanced); entries after it go in the next Ready.
"""
from __future__ import annotations

from typing import Sequence

from ._raft_types import Entry, Snapshot


class RaftLog:
    __slots__ = ("snap_index", "snap_term", "_ents", "committed", "applied", "stable", "pending_snapshot")

    def __init__(self, snap_index: int = 0, snap_term: int = 0, entries: Sequence[Entry] = ()):
        self.snap_index = snap_index
        self.snap_term = snap_term
        self._ents: list[Entry] = list(entries)
        self.committed = snap_index
        self.applied = snap_index
        self.stable = self.last_index
        # An incoming snapshot waiting to be handed to the shell in a Ready.
        self.pending_snapshot: Snapshot | None = None

    # --- queries -------------------------------------------------------------------------

    @property
    def first_index(self) -> int:
        return self.snap_index + 1

    @property
    def last_index(self) -> int:
        return self.snap_index + len(self._ents)

    @property
    def last_term(self) -> int:
        return self._ents[-1].term if self._ents else self.snap_term

    def term(self, i: int) -> int | None:
        """The term of entry i, or None if it was compacted away or does not exist yet."""
        off = i - self.snap_index
        if off == 0:
            return self.snap_term
        if off < 0 or off > len(self._ents):
            return None
        return self._ents[off - 1].term

    def entry(self, i: int) -> Entry:
        return self._ents[i - self.snap_index - 1]

    def match_term(self, i: int, term: int) -> bool:
        t = self.term(i)
        return t is not None and t == term

    def slice(self, lo: int, hi: int, max_size: int | None = None) -> list[Entry]:
        """Entries [lo, hi), at most max_size bytes but always at least one entry."""
        ents = self._ents[lo - self.snap_index - 1:hi - self.snap_index - 1]
        if max_size is None or len(ents) <= 1:
            return ents
        size = 0
        for n, e in enumerate(ents):
            size += e.size()
            if size > max_size and n > 0:
                return ents[:n]
        return ents

    def entries_after(self, i: int) -> list[Entry]:
        """Entries with index > i (i must be >= snap_index)."""
        return self._ents[i - self.snap_index:]

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft paper §5.4.1: a log is more up to date if its last term is higher, or equal
        with an index at least as large."""
        my_term = self.last_term
        return last_term > my_term or (last_term == my_term and last_index >= self.last_index)

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """The largest index <= `index` whose term is <= `term`, and its term.

        Both sides of the fast-backtracking exchange use it (paper §5.3, last paragraphs):
        any index above the answer cannot match a log whose entry at `index` has `term`, so the
        leader can skip a whole term per round trip instead of one entry.
        Returns (index, 0) once the search reaches compacted entries whose term is unknown.
        """
        index = min(index, self.last_index)
        while index > 0:
            t = self.term(index)
            if t is None:
                return index, 0
            if t <= term:
                return index, t
            index -= 1
        return 0, 0

    # --- mutations ------------------------------------------------------------------------

    def append(self, entries: Sequence[Entry]) -> None:
        """Leader-side append right after the last entry."""
        self._ents.extend(entries)

    def maybe_append(self, prev_index: int, entries: Sequence[Entry]) -> tuple[int, int]:
        """Follower-side append after an entry already known to match (paper Figure 2, rule 3-4).

        Entries already present with the same term are kept (a reordered, older APP must not
        truncate newer entries); from the first conflicting one, our suffix is replaced.
        Returns (last index covered by the message, index of the first conflict or 0).
        """
        conflict = 0
        for k, e in enumerate(entries):
            if not self.match_term(e.index, e.term):
                conflict = e.index
                # Callers answer APPs below the commit index without appending, so a conflict
                # can only be found after it: committed entries are never overwritten.
                assert conflict > self.committed, (conflict, self.committed)
                self._truncate_after(conflict - 1)
                self._ents.extend(entries[k:])
                break
        return prev_index + len(entries), conflict

    def _truncate_after(self, i: int) -> None:
        del self._ents[i - self.snap_index:]
        if self.stable > i:
            self.stable = i  # the shell must rewrite from i+1: the next Ready says so

    def commit_to(self, i: int) -> bool:
        if i > self.committed:
            self.committed = min(i, self.last_index)
            return True
        return False

    def restore(self, snap: Snapshot) -> None:
        """Replace the whole log by a snapshot received from the leader."""
        self.snap_index = snap.meta.index
        self.snap_term = snap.meta.term
        self._ents = []
        self.committed = snap.meta.index
        self.stable = snap.meta.index
        self.pending_snapshot = snap

    def compact(self, i: int) -> None:
        """Drop entries <= i (they are covered by a snapshot the shell took)."""
        term = self.term(i)
        assert term is not None and i <= self.applied
        del self._ents[:i - self.snap_index]
        self.snap_index, self.snap_term = i, term

    # --- Ready support --------------------------------------------------------------------

    def unstable_entries(self) -> list[Entry]:
        return self._ents[self.stable - self.snap_index:]

    def stable_to(self, index: int, term: int) -> None:
        # If the entry changed term since it was handed out (a new leader overwrote it), the
        # persisted copy is stale and the rewrite is still pending: keep `stable` as it is.
        if index > self.stable and self.match_term(index, term):
            self.stable = index

    def next_committed(self, max_size: int) -> list[Entry]:
        start = self.applied
        if self.pending_snapshot is not None:
            start = max(start, self.pending_snapshot.meta.index)
        start = max(start, self.snap_index)
        if self.committed <= start:
            return []
        return self.slice(start + 1, self.committed + 1, max_size)
