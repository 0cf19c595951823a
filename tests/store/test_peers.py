"""store._peers.PeerSender: one notification per peer and send, and appends without entries held
back for the next batch (with fake wire clients that record what they are given)."""
from __future__ import annotations

import asyncio

import pytest

from store import _peers
from store._peers import HOLD_S, PeerSender
from store.raft import Entry, Message, MessageType as MT
from store.server import _Metrics

MEMBERS = {"s0": "ipc:///nowhere/s0", "s1": "ipc:///nowhere/s1", "s2": "ipc:///nowhere/s2"}


class FakeClient:
    sent: list[tuple[str, list[dict]]] = []  # (endpoint, msgs) in send order, over all clients

    def __init__(self, endpoint, timeout, max_frame, credentials=None, user_agent=None):
        self.endpoint = endpoint
        self.credentials = credentials
        self.user_agent = user_agent

    def connect(self) -> None:
        pass

    def notify(self, method, params) -> bool:
        assert method == "raft"
        self.sent.append((self.endpoint, params["msgs"]))
        return True

    async def close(self) -> None:
        pass


@pytest.fixture
def sender(monkeypatch):
    FakeClient.sent = []
    monkeypatch.setattr(_peers.wire, "Client", FakeClient)
    return PeerSender("s0", dict(MEMBERS), _Metrics(), 1.0, spawn=lambda coro: coro.close())


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def app(to: str, index: int, commit: int, entries: int = 0) -> Message:
    return Message(MT.APP, to, "s0", 2, log_term=2, index=index, commit=commit,
                   entries=[Entry(2, index + 1 + i, data=b"x") for i in range(entries)])


def sent_summary() -> list[tuple[str, list[tuple[int, int, int]]]]:
    """(peer, [(type, index, number of entries)]) per notification."""
    return [(ep.rsplit("/", 1)[1], [(m["type"], m.get("index", 0), len(m.get("entries", ()))) for m in msgs])
            for ep, msgs in FakeClient.sent]


def test_messages_with_content_leave_at_once_one_notification_per_peer(sender):
    async def main():
        sender.send([app("s1", 5, 5, entries=2), app("s2", 5, 5, entries=2),
                     Message(MT.HEARTBEAT, "s1", "s0", 2, commit=5)])
        assert sent_summary() == [("s1", [(MT.APP, 5, 2), (MT.HEARTBEAT, 0, 0)]), ("s2", [(MT.APP, 5, 2)])]
    run(main())


def test_an_append_without_entries_goes_first_in_the_next_batch_for_its_peer(sender):
    async def main():
        sender.send([app("s1", 7, 7), app("s2", 7, 7)])  # only the new commit index
        assert FakeClient.sent == []
        sender.send([app("s1", 7, 7, entries=1)])
        assert sent_summary() == [("s1", [(MT.APP, 7, 0), (MT.APP, 7, 1)])]
        # s2's waits on, and leaves on its own once HOLD_S has passed
        await asyncio.sleep(HOLD_S)
        deadline = asyncio.get_running_loop().time() + 10
        while len(FakeClient.sent) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(HOLD_S)
        assert sent_summary()[1:] == [("s2", [(MT.APP, 7, 0)])]
    run(main())


def test_once_nothing_is_held_the_timer_is_gone_and_close_cancels_a_pending_one(sender):
    async def main():
        sender.send([app("s1", 7, 7)])
        sender.send([app("s1", 7, 7, entries=1)])
        assert sender._flush_held is None  # the next append held waits its whole HOLD_S
        sender.send([app("s2", 8, 8)])
        assert sender._flush_held is not None
        await sender.close()
        assert sender._flush_held is None
    run(main())


def test_peers_are_reached_with_this_replicas_credentials_and_name(monkeypatch):
    monkeypatch.setattr(_peers.wire, "Client", FakeClient)
    creds = _peers.wire.Credentials("system:store:s0", "secret")
    ps = PeerSender("s0", dict(MEMBERS), _Metrics(), 1.0, spawn=lambda coro: coro.close(), credentials=creds)
    ps.connect()
    assert {p.client.credentials for p in ps._peers.values()} == {creds}
    # named in the handshake: the server reads the user agent of every message, and a missing one costs more
    assert {p.client.user_agent for p in ps._peers.values()} == {"store/s0"}
