"""Server-side printing: the printers' columns as a meta.k8s.io/v1 Table."""
from __future__ import annotations

from components.apiserver.rest import tables
from kubemu.kubectl import printers

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                    "creationTimestamp": "2024-01-01T00:00:00Z"},
       "spec": {"nodeName": "node-0", "containers": [{"name": "c"}]},
       "status": {"phase": "Running", "podIP": "10.0.0.5",
                  "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0, "state": {"running": {}}}]}}
NOW = 1704067200.0 + 300  # five minutes after the pod's creation


def test_pod_columns_with_priorities_for_wide():
    cols = tables.columns("Pod")
    names = [c["name"] for c in cols]
    assert names[:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert "Nominated Node" in names
    assert [c["name"].upper() for c in cols] == printers.headers("Pod", wide=True)
    assert {c["name"] for c in cols if c["priority"] == 0} == {"Name", "Ready", "Status", "Restarts", "Age"}
    assert cols[0]["format"] == "name" and all(c["type"] == "string" and c["description"] for c in cols)


def test_list_table_rows_carry_cells_and_partial_metadata():
    t = tables.table("Pod", [POD], NOW, list_meta={"resourceVersion": "9"})
    assert t["kind"] == "Table" and t["apiVersion"] == "meta.k8s.io/v1" and t["metadata"] == {"resourceVersion": "9"}
    row = t["rows"][0]
    assert row["cells"] == printers.row("Pod", POD, NOW, wide=True)
    assert row["cells"][:5] == ["web", "1/1", "Running", "0", "5m"]
    assert row["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": POD["metadata"]}


def test_include_object_choices():
    assert tables.table("Pod", [POD], NOW, include="Object")["rows"][0]["object"] is POD
    assert "object" not in tables.table("Pod", [POD], NOW, include="None")["rows"][0]
    assert tables.table("Pod", [POD], NOW, version="v1beta1")["apiVersion"] == "meta.k8s.io/v1beta1"


def test_kind_without_printer_gets_name_and_age():
    cm = {"kind": "ConfigMap", "metadata": {"name": "cfg", "creationTimestamp": "2024-01-01T00:00:00Z"}}
    t = tables.table("ConfigMap", [cm], NOW)
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Age"]
    assert t["rows"][0]["cells"] == ["cfg", "5m"]


def test_service_and_endpointslice_columns_as_kubernetes_names_them():
    assert [(c["name"], c["priority"]) for c in tables.columns("Service")] == [
        ("Name", 0), ("Type", 0), ("Cluster-IP", 0), ("External-IP", 0), ("Port(s)", 0), ("Age", 0), ("Selector", 1)]
    assert [c["name"] for c in tables.columns("EndpointSlice")] == ["Name", "AddressType", "Ports", "Endpoints", "Age"]
    assert [c["name"] for c in tables.columns("Node")][5:7] == ["Internal-IP", "External-IP"]
