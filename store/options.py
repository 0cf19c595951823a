"""A replica's options (`Options`) and the parsers of the flags that need one: --peers
(`parse_peers`) and --auto-compaction-retention (`parse_retention`). See `store.server`."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .raft import Config

__all__ = ["Options", "parse_peers", "parse_retention"]


@dataclass
class Options:
    name: str
    data_dir: str
    listen: str
    peers: dict[str, str]
    tick_ms: int = 100
    election_ticks: int = 10
    heartbeat_ticks: int = 1
    snapshot_count: int = 100_000  # etcd's default since 3.2
    retention: tuple[str, float] = ("periodic", 300.0)  # ("periodic", secs) | ("revision", n) | ("off", 0)
    join: bool = False
    request_timeout: float = 5.0
    unsafe_no_fsync: bool = False  # etcd's --unsafe-no-fsync: for measuring, never for data
    # the wire secrets directory (kubemu._wire_auth): clients and peers must authenticate, Raft
    # only from members; None: the wire takes anyone, as a bare test store does
    wire_secrets: str | None = None

    def __post_init__(self) -> None:
        if self.name not in self.peers:
            raise ValueError(f"--peers must list this replica ({self.name})")
        if self.peers[self.name] != self.listen:
            raise ValueError(f"--peers gives {self.name} the endpoint {self.peers[self.name]}, "
                             f"but --listen is {self.listen}")
        if self.tick_ms < 1 or self.snapshot_count < 1:
            raise ValueError("--tick-ms and --snapshot-count must be >= 1")
        Config(election_ticks=self.election_ticks, heartbeat_ticks=self.heartbeat_ticks)  # validates

    @property
    def tick_s(self) -> float:
        return self.tick_ms / 1000.0

    @property
    def election_s(self) -> float:
        return self.tick_s * self.election_ticks


def parse_peers(text: str) -> dict[str, str]:
    """'store-0=ipc:///x,store-1=tcp://127.0.0.1:2380' -> {name: endpoint}."""
    peers: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, endpoint = item.partition("=")
        if not sep or not name or not endpoint:
            raise ValueError(f"bad peer {item!r}: expected NAME=ENDPOINT")
        if name in peers:
            raise ValueError(f"peer {name} listed twice")
        peers[name] = endpoint
    if not peers:
        raise ValueError("--peers lists no replica")
    return peers


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")


def parse_retention(text: str) -> tuple[str, float]:
    """etcd's --auto-compaction-retention: '300s', '5m', '1h' (periodic), '10000' (revisions), '0' (off)."""
    text = text.strip()
    if text.isdigit():
        n = int(text)
        return ("off", 0.0) if n == 0 else ("revision", float(n))
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"bad retention {text!r}: expected e.g. 300s, 5m, 1h or a revision count")
    secs = float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    return ("off", 0.0) if secs == 0 else ("periodic", secs)
