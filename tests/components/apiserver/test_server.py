"""components.apiserver.server with real processes: the HTTPS door on --advertise-address too,
the `kubernetes` Service the apiserver keeps, and Services through `kubemu apply`."""
from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from components.apiserver.server import HTTPSConfig
from kubemu.cli import main
from tests.conftest import wait_for

from . import running
from .rest import HTTPSEnv

ADVERTISE = "127.0.0.2"  # another loopback address: the door's second listener


def test_the_door_listens_on_the_advertise_address_when_it_is_another_specific_one():
    assert HTTPSConfig().hosts() == ["127.0.0.1"]
    assert HTTPSConfig(advertise_address="10.244.255.254").hosts() == ["127.0.0.1", "10.244.255.254"]
    assert HTTPSConfig(advertise_address="0.0.0.0").hosts() == ["127.0.0.1"]
    assert HTTPSConfig(bind_address="0.0.0.0", advertise_address="10.1.2.3").hosts() == ["0.0.0.0"]


def test_the_door_listens_on_the_external_address_too():
    assert HTTPSConfig(external_address="198.18.0.1").hosts() == ["127.0.0.1", "198.18.0.1"]
    assert HTTPSConfig(advertise_address="10.244.255.254", external_address="198.18.0.1").hosts() == \
        ["127.0.0.1", "10.244.255.254", "198.18.0.1"]
    assert HTTPSConfig(advertise_address="198.18.0.1", external_address="198.18.0.1").hosts() == \
        ["127.0.0.1", "198.18.0.1"]
    assert HTTPSConfig(bind_address="0.0.0.0", external_address="198.18.0.1").hosts() == ["0.0.0.0"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    path = tmp_path_factory.mktemp("s")
    env = HTTPSEnv(path)
    env.extra_args += ("--advertise-address", ADVERTISE, "--service-cluster-ip-range", "10.100.0.0/16",
                       "--service-node-port-range", "31000-31999")
    yield from running(env, path)


def _get(env, resource, name="kubernetes", namespace="default"):
    try:
        return env.call("get", resource=resource, name=name, namespace=namespace)
    except Exception:
        return None


def test_the_kubernetes_service_points_at_the_advertised_https_door(env):
    svc = wait_for(lambda: _get(env, "services"), message="the kubernetes Service")
    assert svc["spec"]["clusterIP"] == "10.100.0.1"
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": env.port}]
    eps = wait_for(lambda: _get(env, "endpointslices"), message="the kubernetes EndpointSlice")
    assert eps["endpoints"][0]["addresses"] == [ADVERTISE] and eps["ports"][0]["port"] == env.port
    ep = wait_for(lambda: _get(env, "endpoints"), message="the kubernetes Endpoints")
    assert ep["subsets"][0]["addresses"] == [{"ip": ADVERTISE}]
    with socket.create_connection((ADVERTISE, env.port), timeout=5):
        pass  # the endpoint answers
    assert "serving HTTPS on 127.0.0.1, 127.0.0.2:" in env.log_text()


def test_kubemu_apply_of_a_deployment_and_its_service_creates_both(env, tmp_path):
    manifest = tmp_path / "app.yaml"
    manifest.write_text("""\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, targetPort: http}]
""")
    run = CliRunner().invoke(main, ["--server", env.endpoint, "apply", "-f", str(manifest)], catch_exceptions=False)
    assert run.exit_code == 0 and run.stdout == "deployment.apps/web created\nservice/web created\n", run.stdout
    svc = env.call("get", resource="services", name="web", namespace="default")
    assert svc["spec"]["clusterIP"].startswith("10.100.") and 31000 <= svc["spec"]["ports"][0]["nodePort"] <= 31999
    again = CliRunner().invoke(main, ["--server", env.endpoint, "apply", "-f", str(manifest)], catch_exceptions=False)
    assert again.stdout == "deployment.apps/web unchanged\nservice/web unchanged\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec:\n  type: NodePort\n"
                   "  ports: [{port: 80, nodePort: 40000}]\n")
    refused = CliRunner().invoke(main, ["--server", env.endpoint, "apply", "-f", str(bad)], catch_exceptions=False)
    assert refused.exit_code == 1
    assert 'spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. ' \
           "The range of valid ports is 31000-31999" in refused.stderr


def test_a_restarted_apiserver_keeps_the_allocations(env):
    taken = env.call("get", resource="services", name="web", namespace="default")["spec"]["clusterIP"]
    env.kill_apiserver()
    env.start_apiserver()
    copy = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "copy"},
            "spec": {"clusterIP": taken, "ports": [{"port": 80}]}}
    with pytest.raises(Exception, match="provided IP is already allocated"):
        env.call("create", resource="services", object=copy)
