"""components/apiserver/rest/metrics.py: metrics-server's objects from kubelet summaries (pure),
the kubelets asked in parallel with failures left out, and the REST answers over fake handlers."""
from __future__ import annotations

import asyncio

import pytest

from components.apiserver.rest import metrics
from components.apiserver.rest.media import Output
from components.apiserver.rest.requestinfo import request_info
from kubemu import wire
from kubemu.api.times import format_time

MI = 1 << 20
NOW = 1_700_000_000.0


def stat(nanocores: int, nbytes: int, time: float = NOW - 3, window: float = 10.0) -> dict:
    return {"time": time, "window": window, "cpu": {"usageNanoCores": nanocores, "usageCoreNanoSeconds": 1},
            "memory": {"workingSetBytes": nbytes}}


def pod(name: str, uid: str, node: str = "node-1", namespace: str = "default", labels=None) -> dict:
    meta = {"name": name, "namespace": namespace, "uid": uid, **({"labels": labels} if labels else {})}
    return {"metadata": meta, "spec": {"nodeName": node}}


def node(name: str) -> dict:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}


def summary(node_name: str, *pods: tuple[dict, dict[str, dict]]) -> dict:
    return {"node": {"nodeName": node_name, **stat(500_000_000, 100 * MI)},
            "pods": [{"podRef": {"namespace": p["metadata"]["namespace"], "name": p["metadata"]["name"],
                                 "uid": p["metadata"]["uid"]}, **stat(1, MI),
                      "containers": [{"name": n, **s} for n, s in containers.items()]} for p, containers in pods]}


@pytest.mark.parametrize("nanocores, text", [(0, "0"), (1234, "1234n"), (12_000_000, "12m"),
                                             (12_345_000, "12345u"), (2_000_000_000, "2")])
def test_cpu_is_nanocores_as_a_canonical_quantity(nanocores, text):
    assert metrics.cpu_quantity(nanocores) == text


def test_memory_is_bytes_in_binary_units():
    assert metrics.memory_quantity(12345 * 1024) == "12345Ki"
    assert metrics.memory_quantity(64 * MI) == "64Mi"
    assert metrics.memory_quantity(1000) == "1k"  # below 1Ki Go falls back to DecimalSI too


def test_pod_metrics_as_metrics_server_serves_them():
    web = pod("web", "u1", labels={"app": "web"})
    s = summary("node-1", (web, {"app": stat(12_000_000, 12345 * 1024), "side": stat(1234, 4 * MI)}))
    assert metrics.pod_metrics(web, s, NOW) == {
        "kind": "PodMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": "web", "namespace": "default", "creationTimestamp": format_time(NOW),
                     "labels": {"app": "web"}},
        "timestamp": format_time(NOW - 3), "window": "10s",
        "containers": [{"name": "app", "usage": {"cpu": "12m", "memory": "12345Ki"}},
                       {"name": "side", "usage": {"cpu": "1234n", "memory": "4Mi"}}]}
    assert metrics.pod_usage(metrics.pod_metrics(web, s, NOW)) == {"cpu": "12001234n", "memory": "16441Ki"}
    # a static pod: its mirror pod in the API has a uid of its own
    assert metrics.pod_metrics(pod("web", "mirror-uid", labels={"app": "web"}), s, NOW) == \
        metrics.pod_metrics(web, s, NOW)
    # another pod, a pod without containers, a kubelet of another build
    assert metrics.pod_metrics(pod("web", "u1", namespace="other"), s, NOW) is None
    assert metrics.pod_metrics(web, summary("node-1", (web, {})), NOW) is None
    assert metrics.pod_metrics(web, summary("node-1", (web, {"app": {"cpu": {}}})), NOW) is None
    assert metrics.pod_metrics(web, {"pods": "junk"}, NOW) is None
    assert metrics.pod_metrics(web, None, NOW) is None


def test_node_metrics_as_metrics_server_serves_them():
    s = summary("node-1")
    s["node"]["window"] = 10.0123456
    assert metrics.node_metrics(node("node-1"), s, NOW) == {
        "kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": "node-1", "creationTimestamp": format_time(NOW),
                     "labels": {"kubernetes.io/hostname": "node-1"}},
        "timestamp": format_time(NOW - 3), "window": "10.012s", "usage": {"cpu": "500m", "memory": "100Mi"}}
    assert metrics.node_metrics(node("node-1"), {"pods": []}, NOW) is None


class FakeClient:
    def __init__(self, answer, started: list, all_started: asyncio.Event, expected: int):
        self.answer, self.started, self.all_started, self.expected = answer, started, all_started, expected

    async def call(self, method, params, timeout):
        assert method == "stats" and timeout == metrics.SCRAPE_TIMEOUT
        self.started.append(self)
        if len(self.started) == self.expected:
            self.all_started.set()
        await self.all_started.wait()  # answers only once every kubelet has been asked: in parallel
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def kubelets(answers: dict, failures: dict | None = None, asked: int | None = None) -> metrics.Kubelets:
    """Kubelets answering `answers` (node -> summary or error) once `asked` of them (all by
    default) have been asked."""
    started: list = []
    event = asyncio.Event()

    def client_for(name):
        if name not in answers:
            raise wire.Unavailable(f"no kubelet for {name}")
        return FakeClient(answers[name], started, event, asked or len(answers))
    if failures is None:
        return metrics.Kubelets(client_for)
    return metrics.Kubelets(client_for, on_failure=failures.__setitem__)


def test_kubelets_are_asked_at_once_and_those_that_fail_are_left_out(caplog):
    failures: dict = {}
    answers = {"node-0": {"pods": []}, "node-1": wire.Unavailable("no stats on node node-1: no pod cgroups"),
               "node-2": wire.Cancelled("stats: no answer within 5s"), "node-3": ["junk"]}
    found = asyncio.run(kubelets(answers, failures).summaries(["node-3", "node-2", "node-1", "node-0", "node-0",
                                                                "node-9"]))
    assert found == {"node-0": {"pods": []}}
    assert failures == {"node-1": "no stats on node node-1: no pod cgroups", "node-2": "stats: no answer within 5s",
                        "node-3": "unexpected answer list", "node-9": "no kubelet for node-9"}
    # by default, one log line per node, as metrics-server's
    asyncio.run(kubelets(answers, asked=1).summaries(["node-1"]))
    assert 'Failed to scrape node "node-1": no stats on node node-1: no pod cgroups' in caplog.text


# --- the REST answers -------------------------------------------------------------------------------

PODS = [pod("web", "u1", "node-1", labels={"app": "web"}), pod("db", "u2", "node-2"),
        pod("pending", "u3", ""), pod("new", "u4", "node-1")]
NODES = [node("node-1"), node("node-2"), node("node-3")]
SUMMARIES = {"node-1": summary("node-1", (PODS[0], {"c": stat(5_000_000, 10 * MI)})),
             "node-2": summary("node-2", (PODS[1], {"c": stat(7_000_000, 20 * MI)}))}


class FakeHandlers:
    def __init__(self):
        self.calls = []

    async def __call__(self, method, **params):
        self.calls.append((method, params))
        if params["resource"] == "pods":
            items = [p for p in PODS if params.get("namespace") in (None, p["metadata"]["namespace"])]
        else:
            items = NODES
        if method == "list":
            return {"items": items}
        found = [o for o in items if o["metadata"]["name"] == params["name"]]
        if not found:
            raise wire.NotFound(f'{params["resource"]} "{params["name"]}" not found')
        return found[0]


class Answering:
    """A node's kubelet that answers SUMMARIES at once (node-3's has no figures)."""

    def __init__(self, name: str):
        self.name = name

    async def call(self, method, params, timeout):
        return SUMMARIES.get(self.name, {"pods": []})


def serve(path: str, query: dict | None = None, method: str = "GET", out: Output = Output()):
    handlers = FakeHandlers()
    info = request_info(method, path, query or {})
    answer = asyncio.run(metrics.Metrics(metrics.Kubelets(Answering), lambda: NOW).serve(info, query or {}, out,
                                                                                          handlers))
    return answer, handlers.calls


def names(answer) -> list[str]:
    code, body = answer
    assert code == 200, body
    return [i["metadata"]["name"] for i in body["items"]]


def test_list_pods_in_a_namespace_with_selectors_through_the_pods_list():
    answer, calls = serve("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
                          {"labelSelector": "app=web", "fieldSelector": "metadata.name=web"})
    assert names(answer) == ["web", "db"]  # the fake ignores selectors; what it was asked is below
    assert answer[1]["kind"] == "PodMetricsList" and answer[1]["apiVersion"] == "metrics.k8s.io/v1beta1"
    assert calls == [("list", {"resource": "pods", "namespace": "default", "label_selector": "app=web",
                               "field_selector": "metadata.name=web"})]
    answer, calls = serve("/apis/metrics.k8s.io/v1beta1/pods")
    assert names(answer) == ["web", "db"] and calls[0][1]["namespace"] is None  # every namespace


def test_get_a_pod_or_node_and_their_not_found():
    (code, body), calls = serve("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web")
    assert code == 200 and body["kind"] == "PodMetrics" and body["containers"][0]["usage"] == {
        "cpu": "5m", "memory": "10Mi"}
    assert calls == [("get", {"resource": "pods", "name": "web", "namespace": "default"})]
    with pytest.raises(wire.NotFound, match='podmetrics.metrics.k8s.io "default/new" not found'):
        serve("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/new")  # its kubelet has no figures yet
    with pytest.raises(wire.NotFound, match='pods "nope" not found'):
        serve("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope")
    (code, body), _ = serve("/apis/metrics.k8s.io/v1beta1/nodes/node-2")
    assert code == 200 and body["kind"] == "NodeMetrics" and body["usage"] == {"cpu": "500m", "memory": "100Mi"}
    with pytest.raises(wire.NotFound, match='nodemetrics.metrics.k8s.io "node-3" not found'):
        serve("/apis/metrics.k8s.io/v1beta1/nodes/node-3")


def test_list_nodes_leaves_out_those_without_figures():
    answer, calls = serve("/apis/metrics.k8s.io/v1beta1/nodes", {"labelSelector": "a=b"})
    assert names(answer) == ["node-1", "node-2"]
    assert calls == [("list", {"resource": "nodes", "namespace": None, "label_selector": "a=b",
                               "field_selector": ""})]


def test_a_table_has_metrics_servers_columns():
    (code, body), _ = serve("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", out=Output("Table", "v1"))
    assert code == 200 and body["kind"] == "Table"
    assert [c["name"] for c in body["columnDefinitions"]] == ["Name", "cpu", "memory", "Window"]
    assert [r["cells"] for r in body["rows"]] == [["web", "5m", "10Mi", "10s"], ["db", "7m", "20Mi", "10s"]]
    assert body["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_what_metrics_server_does_not_serve():
    assert serve("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", {"watch": "true"})[0][0] == 405
    assert serve("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", method="POST")[0][0] == 405
    assert serve("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web", method="DELETE")[0][0] == 405
    assert serve("/apis/metrics.k8s.io/v1beta1/deployments")[0][0] == 404
    assert serve("/apis/metrics.k8s.io/v1/pods")[0][0] == 404
    assert serve("/apis/metrics.k8s.io/v1beta1/namespaces/default/nodes")[0][0] == 404
