"""Node IPAM in a real controller-manager process started with kube-controller-manager's flags:
nodes get podCIDRs from the cluster CIDR around the reserved blocks, what existing nodes hold
is occupied at the start, a full range is an Event and a retry, a deleted node's block is
handed out again, and a podCIDR it cannot occupy is reported without stopping anything."""
from __future__ import annotations

import pytest

from components.controller_manager.__main__ import build_parser, config_from, main
from components.controller_manager.app import build_controllers
from components.controller_manager.informers import SharedInformers
from kubemu.apiclient import Invalid
from tests.conftest import wait_for

from . import cluster  # noqa: F401  (a fixture)

# 4 blocks: 10.200.1.0/24 is the service range's, 10.200.3.0/24 the host link's
FLAGS = ("--controllers", "nodeipam", "--allocate-node-cidrs", "--cluster-cidr", "10.200.0.0/22",
         "--node-cidr-mask-size", "24", "--service-cluster-ip-range", "10.200.1.0/24")


def node(name: str, pod_cidr: str | None = None) -> dict:
    spec = {"podCIDR": pod_cidr} if pod_cidr else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec}


def pod_cidrs(api, name: str):
    spec = api.get("nodes", name).get("spec") or {}
    return spec.get("podCIDR"), spec.get("podCIDRs")


def test_nodes_get_pod_cidrs_around_what_is_taken(cluster):
    api = cluster.api
    # before the controller-manager starts: one node holds a block, one holds an address
    # outside the cluster CIDR (valid to the apiserver, nothing node IPAM can occupy)
    api.create("nodes", node("old", "10.200.0.0/24"))
    api.create("nodes", node("stray", "192.168.5.0/24"))
    cm = cluster.controller_manager(*FLAGS, name="nodeipam")

    api.create("nodes", node("n1"))
    wait_for(lambda: pod_cidrs(api, "n1")[0], message="n1's podCIDR")
    assert pod_cidrs(api, "n1") == ("10.200.2.0/24", ["10.200.2.0/24"])
    assert pod_cidrs(api, "old") == ("10.200.0.0/24", ["10.200.0.0/24"])
    wait_for(lambda: cluster.events("default", "InvalidPodCIDR", "stray"),
             message="the stray node's InvalidPodCIDR event")
    (stray,) = cluster.events("default", "InvalidPodCIDR", "stray")
    assert stray["type"] == "Warning"
    assert stray["message"] == ("failed to mark cidr[192.168.5.0/24] at idx [0] as occupied for "
                                "node: stray: cidr 192.168.5.0/24 is out the range of cluster "
                                "cidr 10.200.0.0/22")
    assert stray["source"]["component"] == "cidrAllocator"

    # the range is full now
    api.create("nodes", node("n2"))
    wait_for(lambda: cluster.events("default", "CIDRNotAvailable", "n2"),
             message="n2's CIDRNotAvailable event")
    (full,) = cluster.events("default", "CIDRNotAvailable", "n2")
    assert (full["type"], full["message"]) == ("Normal", "Node n2 status is now: CIDRNotAvailable")
    assert pod_cidrs(api, "n2") == (None, None)

    # n1 leaves: its block goes to n2
    api.delete("nodes", "n1")
    wait_for(lambda: pod_cidrs(api, "n2")[0], message="n2's podCIDR after n1 left")
    assert pod_cidrs(api, "n2") == ("10.200.2.0/24", ["10.200.2.0/24"])

    # the apiserver keeps it: set once, never changed
    with pytest.raises(Invalid, match="node updates may not change podCIDR"):
        api.patch("nodes", "n2", {"spec": {"podCIDR": "10.200.0.0/24",
                                           "podCIDRs": ["10.200.0.0/24"]}})

    log = cm.log_text()
    assert "Set Node PodCIDR node=n1 podCIDRs=['10.200.2.0/24']" in log
    assert "there are no remaining CIDRs left to allocate" in log
    assert "Traceback" not in log

    # kill -9 and start again: what the nodes hold is occupied from the cache, nothing moves
    cm.kill()
    cm = cluster.controller_manager(*FLAGS, name="nodeipam-again")
    api.create("nodes", node("n3"))
    wait_for(lambda: cluster.events("default", "CIDRNotAvailable", "n3"),
             message="n3's CIDRNotAvailable event after the restart")
    assert [pod_cidrs(api, n)[0] for n in ("old", "n2", "n3")] == \
        ["10.200.0.0/24", "10.200.2.0/24", None]
    assert "Traceback" not in cm.log_text()
    assert cm.terminate() == 0


def test_node_ipam_runs_only_with_allocate_node_cidrs():
    args = ["--api", "ipc:///nowhere", "--controllers", "nodeipam", "--cluster-cidr",
            "10.200.0.0/16"]
    config = config_from(build_parser().parse_args(args))
    assert config.node_ipam is None
    assert build_controllers(config, None, SharedInformers(None)) == []
    on = config_from(build_parser().parse_args(args + ["--allocate-node-cidrs"]))
    assert (str(on.node_ipam.cluster_cidr), on.node_ipam.node_mask) == ("10.200.0.0/16", 24)
    assert on.node_ipam.service_cidr is None


@pytest.mark.parametrize("flags, message", [
    (["--allocate-node-cidrs"],
     "Controller: Must specify --cluster-cidr if --allocate-node-cidrs is set"),
    (["--allocate-node-cidrs", "--cluster-cidr", "10.0.0.0/16", "--node-cidr-mask-size", "12"],
     "Controller: Invalid --cluster-cidr, mask size of cluster CIDR must be less than or equal "
     "to --node-cidr-mask-size configured for CIDR family"),
    (["--allocate-node-cidrs", "--cluster-cidr", "10.0.0.0/16", "--service-cluster-ip-range",
      "nonsense"], "invalid --service-cluster-ip-range 'nonsense'"),
])
def test_unusable_flags_are_one_clear_error(flags, message, capsys):
    with pytest.raises(SystemExit) as exit:
        main(["--api", "ipc:///nowhere", *flags])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
