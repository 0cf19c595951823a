"""The DNS throughput measures the bench uses: they measure something, and count what they should
(no speed is asserted)."""
from __future__ import annotations

from components.dns import measure

from . import DNSProc


def test_the_sample_view_answers_its_names_and_the_in_process_rate_is_measured():
    view = measure.sample_view(10)
    assert len(view.services) == 10 and all(len(eps) == 3 for eps in view.endpoints.values())
    assert measure.zone_answers_per_second(0.05, view, name="svc-3.default.svc.cluster.local") > 0


def test_the_floor_and_a_dns_component_answer_the_load_client(state_dir):
    assert measure.floor_queries_per_second(0.2) > 0
    proc = DNSProc(state_dir, "ipc:///nonexistent/kubemu-dns-test/api.sock")   # never synced: REFUSED
    try:
        for vary in (False, True):
            rate, not_noerror = measure.udp_queries_per_second(proc.host, proc.port, "example.com", 0.2,
                                                               vary_case=vary)
            assert rate > 0 and not_noerror > 0   # example.com is REFUSED: counted as not NOERROR
    finally:
        assert proc.stop() == 0
