"""Arguments as kubectl reads them: TYPE NAME / TYPE/NAME, Go durations and Go booleans."""
from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from kubemu.api.resources import UnknownResourceError
from kubemu.kubectl.cmd_delete import grace_seconds
from kubemu.kubectl.durations import parse_duration
from kubemu.kubectl.options import GoCommand
from kubemu.kubectl.session import CommandError
from kubemu.kubectl.targets import namespace_of, one_target, parse_targets


def test_types_and_names():
    (t,) = parse_targets(("po", "a", "b"))
    assert (t.resource.plural, t.names) == ("pods", ["a", "b"])
    assert [(t.resource.plural, t.names) for t in parse_targets(("deploy,rs",))] == \
        [("deployments", []), ("replicasets", [])]
    assert [(t.resource.plural, t.names) for t in parse_targets(("deployment/web", "deploy/db", "pod/x"))] == \
        [("deployments", ["web", "db"]), ("pods", ["x"])]
    assert one_target(("deployments.apps/web",), "scale")[1] == "web"


def test_the_all_category_lists_kubectls_kinds_in_its_order():
    assert [t.resource.plural for t in parse_targets(("all",))] == ["pods", "services", "daemonsets", "deployments", "replicasets", "statefulsets", "cronjobs", "jobs"]
    assert [t.resource.plural for t in parse_targets(("svc,ep,endpointslices",))] == \
        ["services", "endpoints", "endpointslices"]


def test_argument_errors():
    with pytest.raises(CommandError, match="Required resource not specified"):
        parse_targets(())
    with pytest.raises(CommandError, match="no need to specify a resource type as a separate argument"):
        parse_targets(("pods", "pod/x"))
    with pytest.raises(UnknownResourceError, match='the server doesn\'t have a resource type "foo"'):
        parse_targets(("foo",))
    with pytest.raises(CommandError, match="exactly one resource"):
        one_target(("deploy", "a", "b"), "scale")


def test_namespaces():
    (pods,) = parse_targets(("pods",))
    (nodes,) = parse_targets(("nodes",))
    assert namespace_of(pods.resource, None) == "default"
    assert namespace_of(pods.resource, "kube-system") == "kube-system"
    assert namespace_of(nodes.resource, "kube-system") is None


@pytest.mark.parametrize("text, seconds", [("30", 30.0), ("30s", 30.0), ("2m", 120.0), ("1h30m", 5400.0),
                                           ("500ms", 0.5), ("1.5s", 1.5)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "m5", "1h 2m"])
def test_bad_durations(text):
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_go_booleans():
    @click.command(cls=GoCommand)
    @click.option("--wait/--no-wait", default=True)
    @click.option("--force", is_flag=True)
    @click.argument("args", nargs=-1)
    def cmd(wait, force, args):
        click.echo(f"{wait} {force} {list(args)}")

    def run(*args):
        return CliRunner().invoke(cmd, list(args)).output.strip()

    assert run("x") == "True False ['x']"
    assert run("--wait=false", "x") == "False False ['x']"
    assert run("--wait=true", "--force=true") == "True True []"
    assert run("--force=false", "x") == "True False ['x']"
    assert run("--", "--wait=false") == "True False ['--wait=false']"


def test_grace_periods_as_kubectl_reads_them():
    assert grace_seconds(-1, force=False, now=False) is None
    assert grace_seconds(0, force=False, now=False) == 1  # 0 means immediately only with --force
    assert grace_seconds(0, force=True, now=False) == 0
    assert grace_seconds(-1, force=True, now=False) == 0
    assert grace_seconds(10, force=False, now=False) == 10
    assert grace_seconds(-1, force=False, now=True) == 1


def test_logs_takes_a_pod_or_type_slash_name():
    from kubemu.kubectl.targets import one_pod_target

    assert [(r.kind, n) for r, n in map(one_pod_target, ("web-1", "pod/web-1", "po/web-1", "pods/web-1",
                                                         "deploy/web", "deployment.apps/web", "rs/web-5f"))] == [
        ("Pod", "web-1"), ("Pod", "web-1"), ("Pod", "web-1"), ("Pod", "web-1"),
        ("Deployment", "web"), ("Deployment", "web"), ("ReplicaSet", "web-5f")]
    with pytest.raises(CommandError, match="must have a single resource and name"):
        one_pod_target("deploy/")
    with pytest.raises(UnknownResourceError):
        one_pod_target("foo/x")


def test_pods_of_a_kind_without_a_selector_are_kubectls_error():
    from kubemu.api.resources import resolve
    from kubemu.kubectl.targets import pod_selector

    assert str(pod_selector(resolve("deploy"), {"spec": {"selector": {"matchLabels": {"app": "web"}}}})) == "app=web"
    with pytest.raises(CommandError,
                       match=r"^cannot get the logs from \*v1.Node: selector for \*v1.Node not implemented$"):
        pod_selector(resolve("node"), {})


def test_logs_picks_the_pod_kubectl_picks():
    """podutils.ByLogging: on a node, Running < Pending, ready, ready longer, more restarts, older."""
    from kubemu.kubectl.targets import logging_order

    def p(name, node="n1", phase="Running", ready_since=None, restarts=0, created="2024-01-01T00:00:00Z"):
        conditions = [{"type": "Ready", "status": "True", "lastTransitionTime": ready_since}] if ready_since else []
        return {"metadata": {"name": name, "creationTimestamp": created}, "spec": {"nodeName": node},
                "status": {"phase": phase, "conditions": conditions,
                           "containerStatuses": [{"restartCount": restarts}]}}

    def first(*pods):
        return min(pods, key=logging_order)["metadata"]["name"]

    assert first(p("unbound", node=""), p("bound", phase="Pending")) == "bound"
    assert first(p("pending", phase="Pending"), p("running")) == "running"
    assert first(p("unready"), p("ready", ready_since="2024-01-01T00:00:05Z")) == "ready"
    assert first(p("late", ready_since="2024-01-01T00:09:00Z"),
                 p("early", ready_since="2024-01-01T00:01:00Z")) == "early"
    assert first(p("calm"), p("crashy", restarts=3)) == "crashy"
    assert first(p("new", created="2024-01-02T00:00:00Z"), p("old")) == "old"
