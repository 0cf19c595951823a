"""Smoke test of the api benchmark at tiny scale: both doors measured, sane figures. Speed is
never asserted."""
import asyncio
import math
import time

import pytest

from bench import api
from kubemu.apiclient import ApiClient
from kubemu.wire import Forbidden, Unauthorized

from .conftest import processes_under
from .outputs import check_outputs, sane_latency


def test_api_bench_measures_both_doors(bench_dir, tmp_path):
    report = api.run(workdir=bench_dir, count=20)

    assert set(report["results"]) == {"wire", "https", "floor"}
    assert report["results"]["floor"]["get_concurrent"]["requests"] == 40
    for door in (report["results"]["wire"], report["results"]["https"]):
        assert set(door) == set(api.PHASES)
        for phase in ("create", "get", "list", "watch_event"):
            sane_latency(door[phase]["latency_ms"])
        assert door["create"]["requests"] == 20 and door["list"]["items"] == 20
        assert door["get_concurrent"]["requests_per_s"] > 0
        assert all(door[phase]["cpu_ms_per_request"] >= 0 for phase in api.PHASES)
    assert set(report["cpu_ratio_https_to_wire"]) == set(api.PHASES)
    assert all(math.isfinite(r) or math.isnan(r) for r in report["cpu_ratio_https_to_wire"].values())
    text = check_outputs(report, api, tmp_path, plots=0)
    assert "https/wire CPU" in text and "TLS floor" in text
    assert not processes_under(bench_dir)


def test_the_wire_door_authenticates_as_kubemu_up_runs_it(bench_dir):
    async def main(servers):
        async with servers.api_client() as admin:  # the admin's credentials
            await api._until(admin.healthz, time.monotonic() + api.STARTUP)
        async with ApiClient(servers.wire, timeout=30) as anonymous:
            with pytest.raises(Unauthorized, match="requires credentials"):
                await anonymous.healthz()

    with api.Servers(bench_dir) as servers:
        asyncio.run(main(servers))
    assert not processes_under(bench_dir)


def test_the_store_is_stopped_when_the_apiserver_cannot_start(bench_dir, monkeypatch):
    spawn = api.Servers.spawn

    def failing(self, name, argv):
        if name == "apiserver":
            raise OSError("no apiserver today")
        return spawn(self, name, argv)

    monkeypatch.setattr(api.Servers, "spawn", failing)
    servers = api.Servers(bench_dir)
    with pytest.raises(OSError, match="no apiserver today"):
        servers.__enter__()
    assert [p.poll() is not None for p in servers.procs] == [True]  # the store, stopped
    assert not processes_under(bench_dir)


def test_a_namespace_that_cannot_be_made_is_an_error_not_a_wait_forever(monkeypatch):
    class Admin:
        async def __aenter__(self):
            return self

        async def __aexit__(self, *exc):
            pass

        async def healthz(self):
            pass

        async def create(self, resource, obj):
            raise Forbidden("not today")

    class Servers:
        def api_client(self):
            return Admin()

    monkeypatch.setattr(api, "STARTUP", 0.5)
    with pytest.raises(Forbidden, match="not today"):
        asyncio.run(api._measure(Servers(), 1, lambda: None))
