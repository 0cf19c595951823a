"""Smoke test of the api benchmark at tiny scale: both doors measured, sane figures. Speed is
never asserted."""
import math

from bench import api

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
