"""Pod defaulting and validation: Kubernetes' defaults, field paths and messages; never a crash."""
import copy
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubemu.api.fielderrors import (DUPLICATE, FORBIDDEN, INVALID, NOT_SUPPORTED, REQUIRED,
                                    TOO_LONG, UNKNOWN_FIELD, FieldError, ValidationError,
                                    go_float, go_quote, go_value)
from kubemu.api.pod import KNOWN_FIELDS, claim_names, default_pod, validate_pod

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    r"for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
IMAGE_REQUIRED = "Required value: a container needs an image or, in kubemu, a command"


def pod(**spec_extra):
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "command": ["sleep", "1000"]}], **spec_extra},
    }


def realistic_pod():
    """A kubeadm-style control-plane manifest, with a command instead of an image entrypoint."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "kube-apiserver", "namespace": "kube-system",
                     "labels": {"component": "kube-apiserver", "tier": "control-plane"},
                     "annotations": {"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint":
                                     "10.0.0.1:6443"},
                     "creationTimestamp": None},
        "spec": {
            "hostNetwork": True, "priority": 2000001000,
            "priorityClassName": "system-node-critical",
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [{"name": "certs", "hostPath": {"path": "/etc/ssl/certs",
                                                       "type": "DirectoryOrCreate"}}],
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane",
                             "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "dedicated", "operator": "Equal", "value": "infra",
                             "effect": "NoExecute", "tolerationSeconds": 30}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "containers": [{
                "name": "kube-apiserver",
                "image": "registry.k8s.io/kube-apiserver:v1.30.0",
                "imagePullPolicy": "IfNotPresent",
                "command": ["python", "-m", "components.apiserver", "--port=6443"],
                "args": ["--verbose"],
                "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "my.env-name"}],
                "ports": [{"name": "https", "containerPort": 6443, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "250m", "memory": "128Mi"},
                              "limits": {"cpu": 1, "memory": "1Gi"}},
                "livenessProbe": {"httpGet": {"host": "127.0.0.1", "path": "/livez",
                                              "port": "https", "scheme": "HTTPS"},
                                  "initialDelaySeconds": 10, "timeoutSeconds": 15,
                                  "failureThreshold": 8},
                "readinessProbe": {"tcpSocket": {"port": 6443}, "successThreshold": 2},
                "startupProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
                "volumeMounts": [{"mountPath": "/etc/ssl/certs", "name": "certs",
                                  "readOnly": True}],
                "securityContext": {"runAsUser": 0},
            }],
        },
    }


def set_path(obj, path, value):
    """Set (or with value=DELETE, remove) the field at a dotted path with [i] indexes."""
    parts = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", path)]
    for part in parts[:-1]:
        obj = obj[part]
    if value is DELETE:
        del obj[parts[-1]]
    else:
        obj[parts[-1]] = value


DELETE = object()


def errors_after(path, value, base=None):
    p = copy.deepcopy(base or pod())
    set_path(p, path, value)
    return [str(e) for e in validate_pod(p)]


# --- field errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("error, text", [
    (FieldError("spec.containers[0].name", REQUIRED), "spec.containers[0].name: Required value"),
    (FieldError("spec.restartPolicy", NOT_SUPPORTED,
                'supported values: "Always", "OnFailure", "Never"', "Sometimes"),
     'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'),
    (FieldError("spec.containers[1].name", DUPLICATE, value="app"),
     'spec.containers[1].name: Duplicate value: "app"'),
    (FieldError("spec.containers[0].foo", UNKNOWN_FIELD), "spec.containers[0].foo: Unknown field"),
    (FieldError("a", FORBIDDEN, "no"), "a: Forbidden: no"),
    (FieldError("a", TOO_LONG, "may not be more than 5 bytes", "xxxxxx"),
     "a: Too long: may not be more than 5 bytes"),
    (FieldError("a", INVALID, "bad", 5), "a: Invalid value: 5: bad"),
    (FieldError("a", INVALID, "bad", None), "a: Invalid value: null: bad"),
    (FieldError("a", INVALID, "bad", True), "a: Invalid value: true: bad"),
    (FieldError("a", INVALID, "bad", 1.5), "a: Invalid value: 1.5: bad"),
    (FieldError("a", INVALID, "bad", ["x", 1]), 'a: Invalid value: ["x",1]: bad'),
    (FieldError("a", INVALID, "bad", {"k": None}), 'a: Invalid value: {"k":null}: bad'),
])
def test_field_error_text(error, text):
    assert str(error) == text


def test_validation_error_reads_like_kubectl():
    one = FieldError("spec.containers[0].name", REQUIRED)
    two = FieldError("spec.restartPolicy", NOT_SUPPORTED, 'supported values: "Always"', "X")
    assert str(ValidationError([one], name="web")) == \
        'Pod "web" is invalid: spec.containers[0].name: Required value'
    assert str(ValidationError([one, two, one], name="web")) == (
        'Pod "web" is invalid: [spec.containers[0].name: Required value, '
        'spec.restartPolicy: Unsupported value: "X": supported values: "Always"]')
    assert ValidationError([one, two]).errors == [one, two]


@pytest.mark.parametrize("s, quoted", [("a", '"a"'), ('say "hi"\n', r'"say \"hi\"\n"'),
                                       ("tab\t\\", r'"tab\t\\"'), ("\x1b", r'"\x1b"'),
                                       ("é", '"é"'), ("\u200b", r'"\u200b"')])
def test_go_quote(s, quoted):
    assert go_quote(s) == quoted


@pytest.mark.parametrize("f, text", [(1.5, "1.5"), (100.0, "100"), (1e21, "1e+21"),
                                     (1e20, "100000000000000000000"), (0.0001, "0.0001"),
                                     (0.00001, "1e-05"), (-2.5, "-2.5"), (float("nan"), "NaN"),
                                     (float("inf"), "+Inf")])
def test_go_float(f, text):
    assert go_float(f) == text


def test_values_are_bounded_even_when_cyclic():
    cyclic = []
    cyclic.append(cyclic)
    assert len(go_value(cyclic)) < 300
    assert len(go_value("x" * 10000)) < 300
    assert go_value(10**5000).endswith("-bit integer>")


# --- defaulting -----------------------------------------------------------------------------------

def test_defaults():
    p = pod()
    p["spec"]["containers"][0].update({
        "image": "nginx",
        "ports": [{"containerPort": 80}],
        "livenessProbe": {"httpGet": {"port": 80}},
        "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
        "env": [{"name": "A", "value": "1"}],
    })
    p["spec"]["initContainers"] = [{"name": "init", "command": ["true"]}]
    original = copy.deepcopy(p)
    d = default_pod(p)
    assert p == original, "the input is left untouched"
    assert d["apiVersion"] == "v1" and d["kind"] == "Pod"
    assert d["metadata"] == {"name": "web", "namespace": "default", "labels": {"app": "web"},
                             "annotations": {}}
    spec = d["spec"]
    assert (spec["restartPolicy"], spec["terminationGracePeriodSeconds"], spec["dnsPolicy"],
            spec["schedulerName"]) == ("Always", 30, "ClusterFirst", "default-scheduler")
    c = spec["containers"][0]
    assert (c["terminationMessagePath"], c["terminationMessagePolicy"]) == \
        ("/dev/termination-log", "File")
    assert c["imagePullPolicy"] == "Always"
    assert c["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert c["resources"] == {}
    assert c["env"] == [{"name": "A", "value": "1"}]
    assert c["livenessProbe"] == {"httpGet": {"port": 80, "scheme": "HTTP", "path": "/"},
                                  "timeoutSeconds": 1, "periodSeconds": 10,
                                  "successThreshold": 1, "failureThreshold": 3,
                                  "initialDelaySeconds": 0}
    assert c["readinessProbe"]["periodSeconds"] == 5
    init = spec["initContainers"][0]
    assert init["terminationMessagePath"] == "/dev/termination-log"
    assert "imagePullPolicy" not in init, "no image, no pull policy"
    assert "status" not in d
    assert validate_pod(d) == []


@pytest.mark.parametrize("image, policy", [("nginx", "Always"), ("nginx:latest", "Always"),
                                           ("nginx:1.25", "IfNotPresent"),
                                           ("localhost:5000/app", "Always"),
                                           ("localhost:5000/app:v2", "IfNotPresent"),
                                           ("app@sha256:abcd", "IfNotPresent")])
def test_image_pull_policy_default(image, policy):
    p = pod()
    p["spec"]["containers"][0]["image"] = image
    assert default_pod(p)["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_given_values_are_kept():
    p = pod(restartPolicy="Never", terminationGracePeriodSeconds=0)
    p["metadata"]["namespace"] = "kube-system"
    d = default_pod(p)
    assert (d["spec"]["restartPolicy"], d["spec"]["terminationGracePeriodSeconds"]) == ("Never", 0)
    assert d["metadata"]["namespace"] == "kube-system"


def test_limits_default_requests():
    p = pod()
    p["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1"}, "requests": {"memory": "1Mi"}}
    assert default_pod(p)["spec"]["containers"][0]["resources"]["requests"] == \
        {"cpu": "1", "memory": "1Mi"}


def test_status_only_on_request():
    assert default_pod(pod(), with_status=True)["status"] == {"phase": "Pending"}
    p = pod()
    p["status"] = {}
    assert default_pod(p)["status"] == {}
    assert default_pod(p, with_status=True)["status"] == {"phase": "Pending"}
    p["status"] = {"phase": "Running"}
    assert default_pod(p, with_status=True)["status"] == {"phase": "Running"}


def test_defaulting_leaves_wrong_types_for_validation():
    p = {"metadata": "x", "spec": {"containers": ["x", {"ports": "y", "livenessProbe": 3}]}}
    d = default_pod(p)
    assert d["metadata"] == "x"
    assert d["spec"]["containers"][0] == "x"
    assert d["spec"]["containers"][1]["ports"] == "y"
    assert default_pod([1]) == [1]


# --- validation: valid pods ---------------------------------------------------------------------

def test_minimal_and_realistic_pods_are_valid():
    assert validate_pod(pod()) == []
    assert validate_pod(realistic_pod()) == []
    assert validate_pod(default_pod(realistic_pod(), with_status=True)) == []


def test_an_image_without_a_command_is_valid():
    """The docs' Deployment (`image: nginx:1.14.2`, no command): whether the image can be had
    is the kubelet's to find out (its image catalog), not the apiserver's."""
    p = pod()
    p["spec"]["containers"] = [{"name": "nginx", "image": "nginx:1.14.2", "ports": [{"containerPort": 80}]}]
    assert validate_pod(default_pod(p)) == []
    p["spec"]["containers"][0]["image"] = "nosuch/image:1"
    assert validate_pod(default_pod(p)) == []


def test_generate_name_instead_of_name():
    p = pod()
    p["metadata"] = {"generateName": "web-"}
    assert validate_pod(p) == []


# --- validation: one mistake, one message ------------------------------------------------------

@pytest.mark.parametrize("path, value, expected", [
    ("apiVersion", "v2", 'apiVersion: Unsupported value: "v2": supported values: "v1"'),
    ("apiVersion", DELETE, "apiVersion: Required value"),
    ("kind", "Deployment", 'kind: Unsupported value: "Deployment": supported values: "Pod"'),
    ("metadata", DELETE, "metadata.name: Required value: name or generateName is required"),
    ("metadata.name", DELETE, "metadata.name: Required value: name or generateName is required"),
    ("metadata.name", "Foo_Bar", f'metadata.name: Invalid value: "Foo_Bar": {SUBDOMAIN_MSG}'),
    ("metadata.name", 5, "metadata.name: Invalid value: 5: must be a string"),
    ("metadata.namespace", "Kube_System",
     f'metadata.namespace: Invalid value: "Kube_System": {LABEL_MSG}'),
    ("metadata.labels", ["a"], 'metadata.labels: Invalid value: ["a"]: must be an object'),
    ("metadata.labels", {"app": 5}, "metadata.labels[app]: Invalid value: 5: must be a string"),
    ("metadata.labels", {"app": "has space"},
     'metadata.labels: Invalid value: "has space": a valid label must be an empty string or '
     "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
     "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
     "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
    ("metadata.labels", {"/app": "x"},
     'metadata.labels: Invalid value: "/app": prefix part must be non-empty'),
    ("metadata.annotations", {"note": 3},
     "metadata.annotations[note]: Invalid value: 3: must be a string"),
    ("metadata.annotations", {"big": "x" * 300000},
     "metadata.annotations: Too long: may not be more than 262144 bytes"),
    ("spec", DELETE, "spec: Required value"),
    ("spec", "x", 'spec: Invalid value: "x": must be an object'),
    ("spec.containers", DELETE, "spec.containers: Required value"),
    ("spec.containers", [], "spec.containers: Required value"),
    ("spec.containers", "x", 'spec.containers: Invalid value: "x": must be a list'),
    ("spec.containers[0]", "x", 'spec.containers[0]: Invalid value: "x": must be an object'),
    ("spec.containers[0].name", DELETE, "spec.containers[0].name: Required value"),
    ("spec.containers[0].name", "App", f'spec.containers[0].name: Invalid value: "App": {LABEL_MSG}'),
    ("spec.containers[0].command", DELETE, f"spec.containers[0].image: {IMAGE_REQUIRED}"),
    ("spec.containers[0].command", [], f"spec.containers[0].image: {IMAGE_REQUIRED}"),
    ("spec.containers[0].command", 5,
     "spec.containers[0].command: Invalid value: 5: must be a list of strings"),
    ("spec.containers[0].command", "sleep 1",
     'spec.containers[0].command: Invalid value: "sleep 1": must be a list of strings'),
    ("spec.containers[0].command", ["sleep", 1],
     "spec.containers[0].command[1]: Invalid value: 1: must be a string"),
    ("spec.containers[0].args", [None], "spec.containers[0].args[0]: Invalid value: null: must be a string"),
    ("spec.containers[0].workingDir", 1, "spec.containers[0].workingDir: Invalid value: 1: must be a string"),
    ("spec.containers[0].image", ["x"], 'spec.containers[0].image: Invalid value: ["x"]: must be a string'),
    ("spec.containers[0].imagePullPolicy", "Sometimes",
     'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: '
     '"Always", "IfNotPresent", "Never"'),
    ("spec.containers[0].tty", "yes", 'spec.containers[0].tty: Invalid value: "yes": must be a boolean'),
    ("spec.containers[0].env", {"A": "1"},
     'spec.containers[0].env: Invalid value: {"A":"1"}: must be a list'),
    ("spec.containers[0].env", [{"value": "1"}], "spec.containers[0].env[0].name: Required value"),
    ("spec.containers[0].env", [{"name": "A", "value": 1}],
     "spec.containers[0].env[0].value: Invalid value: 1: must be a string"),
    ("spec.containers[0].env", [{"name": "1A"}],
     'spec.containers[0].env[0].name: Invalid value: "1A": a valid environment variable name '
     "must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a "
     "digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation "
     "is '[-._a-zA-Z][-._a-zA-Z0-9]*')"),
    ("spec.containers[0].env", [{"name": "A", "valueFrom": {"fieldRef": {}}}],
     "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Required value"),
    ("spec.containers[0].ports", [{"containerPort": 70000}],
     "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and "
     "65535, inclusive"),
    ("spec.containers[0].ports", [{"name": "web"}],
     "spec.containers[0].ports[0].containerPort: Required value"),
    ("spec.containers[0].ports", [{"containerPort": "80"}],
     'spec.containers[0].ports[0].containerPort: Invalid value: "80": must be an integer'),
    ("spec.containers[0].ports", [{"containerPort": 80, "protocol": "HTTP"}],
     'spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", '
     '"TCP", "UDP"'),
    ("spec.containers[0].ports", [{"containerPort": 80, "name": "web"},
                                  {"containerPort": 81, "name": "web"}],
     'spec.containers[0].ports[1].name: Duplicate value: "web"'),
    ("spec.containers[0].ports", [{"containerPort": 80, "name": "80"}],
     'spec.containers[0].ports[0].name: Invalid value: "80": must contain at least one letter (a-z)'),
    ("spec.containers[0].resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
     'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to '
     "cpu limit of 1"),
    ("spec.containers[0].resources", {"requests": {"memory": "2048Mi"}, "limits": {"memory": "1Gi"}},
     'spec.containers[0].resources.requests: Invalid value: "2Gi": must be less than or equal to '
     "memory limit of 1Gi"),
    ("spec.containers[0].resources", {"limits": {"cpu": "lots"}},
     'spec.containers[0].resources.limits[cpu]: Invalid value: "lots": quantities must match the '
     "regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ("spec.containers[0].resources", {"limits": {"cpu": "-1"}},
     'spec.containers[0].resources.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
    ("spec.containers[0].resources", {"limits": {"gpu": "1"}},
     'spec.containers[0].resources.limits[gpu]: Unsupported value: "gpu": supported values: "cpu", "memory"'),
    ("spec.containers[0].resources", {"limits": "1"},
     'spec.containers[0].resources.limits: Invalid value: "1": must be an object'),
    ("spec.containers[0].livenessProbe", {"periodSeconds": 5},
     "spec.containers[0].livenessProbe: Required value: must specify a handler type"),
    ("spec.containers[0].livenessProbe", {"exec": {"command": ["true"]}, "tcpSocket": {"port": 1}},
     "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"),
    ("spec.containers[0].livenessProbe", {"exec": {"command": ["true"]}, "successThreshold": 2},
     "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"),
    ("spec.containers[0].startupProbe", {"exec": {"command": ["true"]}, "successThreshold": 3},
     "spec.containers[0].startupProbe.successThreshold: Invalid value: 3: must be 1"),
    ("spec.containers[0].readinessProbe", {"exec": {"command": ["true"]}, "periodSeconds": 0},
     "spec.containers[0].readinessProbe.periodSeconds: Invalid value: 0: must be greater than or equal to 1"),
    ("spec.containers[0].readinessProbe", {"exec": {"command": ["true"]}, "initialDelaySeconds": -1},
     "spec.containers[0].readinessProbe.initialDelaySeconds: Invalid value: -1: must be greater "
     "than or equal to 0"),
    ("spec.containers[0].readinessProbe", {"exec": {"command": ["true"]}, "timeoutSeconds": "1s"},
     'spec.containers[0].readinessProbe.timeoutSeconds: Invalid value: "1s": must be an integer'),
    ("spec.containers[0].readinessProbe", {"exec": {}},
     "spec.containers[0].readinessProbe.exec.command: Required value"),
    ("spec.containers[0].readinessProbe", {"exec": ["true"]},
     'spec.containers[0].readinessProbe.exec: Invalid value: ["true"]: must be an object'),
    ("spec.containers[0].readinessProbe", {"httpGet": {"port": 0}},
     "spec.containers[0].readinessProbe.httpGet.port: Invalid value: 0: must be between 1 and "
     "65535, inclusive"),
    ("spec.containers[0].readinessProbe", {"httpGet": {"port": 80, "scheme": "FTP"}},
     'spec.containers[0].readinessProbe.httpGet.scheme: Unsupported value: "FTP": supported '
     'values: "HTTP", "HTTPS"'),
    ("spec.containers[0].readinessProbe", {"tcpSocket": {}},
     "spec.containers[0].readinessProbe.tcpSocket.port: Required value"),
    ("spec.containers[0].readinessProbe", {"tcpSocket": {"port": "metrics"}},
     'spec.containers[0].readinessProbe.tcpSocket.port: Invalid value: "metrics": must be the '
     "name of one of the container's ports"),
    ("spec.containers[0].readinessProbe", {"grpc": {"port": 9000}},
     "spec.containers[0].readinessProbe.grpc: Forbidden: kubemu probes with exec, httpGet or "
     "tcpSocket only"),
    ("spec.initContainers", [{"name": "app", "command": ["true"]}],
     'spec.containers[0].name: Duplicate value: "app"'),
    ("spec.initContainers", [{"name": "init", "command": ["true"],
                              "livenessProbe": {"exec": {"command": ["true"]}}}],
     "spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers"),
    ("spec.initContainers", [{"name": "init"}], f"spec.initContainers[0].image: {IMAGE_REQUIRED}"),
    ("spec.restartPolicy", "Sometimes",
     'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
     '"OnFailure", "Never"'),
    ("spec.terminationGracePeriodSeconds", -1,
     "spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0"),
    ("spec.terminationGracePeriodSeconds", 1.5,
     "spec.terminationGracePeriodSeconds: Invalid value: 1.5: must be an integer"),
    ("spec.nodeName", 7, "spec.nodeName: Invalid value: 7: must be a string"),
    ("spec.nodeSelector", {"disk": 1}, "spec.nodeSelector[disk]: Invalid value: 1: must be a string"),
    ("spec.tolerations", {"key": "x"}, 'spec.tolerations: Invalid value: {"key":"x"}: must be a list'),
    ("spec.tolerations", [{"operator": "Equal"}],
     'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is '
     'empty, which means "match all values and all keys"'),
    ("spec.tolerations", [{"key": "k", "operator": "Maybe"}],
     'spec.tolerations[0].operator: Unsupported value: "Maybe": supported values: "Equal", "Exists"'),
    ("spec.tolerations", [{"key": "k", "operator": "Exists", "effect": "Evict"}],
     'spec.tolerations[0].effect: Unsupported value: "Evict": supported values: "NoSchedule", '
     '"PreferNoSchedule", "NoExecute"'),
    ("spec.tolerations", [{"key": "k", "operator": "Exists", "tolerationSeconds": 5}],
     "spec.tolerations[0].effect: Invalid value: \"\": effect must be 'NoExecute' when "
     "`tolerationSeconds` is set"),
    ("spec.volumes", {"name": "x"}, 'spec.volumes: Invalid value: {"name":"x"}: must be a list'),
    ("status", [], "status: Invalid value: []: must be an object"),
])
def test_one_mistake_one_message(path, value, expected):
    assert errors_after(path, value) == [expected]


def test_multiple_errors_are_all_reported():
    p = pod(restartPolicy="Sometimes")
    p["spec"]["containers"].append({"name": "app"})
    errors = [str(e) for e in validate_pod(p)]
    assert errors == [
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
        '"OnFailure", "Never"',
        'spec.containers[1].name: Duplicate value: "app"',
        f"spec.containers[1].image: {IMAGE_REQUIRED}",
    ]


def test_validation_error_of_a_pod():
    p = pod()
    p["spec"]["containers"][0]["name"] = ""
    assert str(ValidationError(validate_pod(p), name="web")) == \
        'Pod "web" is invalid: spec.containers[0].name: Required value'


def test_a_named_probe_port_must_exist():
    p = pod()
    c = p["spec"]["containers"][0]
    c["ports"] = [{"containerPort": 8080, "name": "metrics"}]
    c["readinessProbe"] = {"httpGet": {"port": "metrics", "path": "/healthz"}}
    assert validate_pod(p) == []


# --- strict mode --------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    "extra", "metadata.extra", "spec.extra", "spec.containers[0].extra",
    "spec.containers[0].ports[0].extra", "spec.containers[0].env[0].extra",
    "spec.containers[0].resources.extra", "spec.containers[0].livenessProbe.extra",
    "spec.containers[0].livenessProbe.httpGet.extra",
    "spec.containers[0].livenessProbe.httpGet.httpHeaders[0].extra",
    "spec.containers[0].readinessProbe.exec.extra", "spec.containers[0].startupProbe.tcpSocket.extra",
    "spec.tolerations[0].extra", "spec.initContainers[0].extra",
])
def test_unknown_fields_in_strict_mode(path):
    p = pod(tolerations=[{"operator": "Exists"}],
            initContainers=[{"name": "init", "command": ["true"]}])
    c = p["spec"]["containers"][0]
    c.update(ports=[{"containerPort": 80}], env=[{"name": "A", "value": "b"}],
             resources={"limits": {"cpu": "1"}},
             livenessProbe={"httpGet": {"port": 80, "httpHeaders": [{"name": "X-A", "value": "b"}]}},
             readinessProbe={"exec": {"command": ["true"]}},
             startupProbe={"tcpSocket": {"port": 80}})
    assert validate_pod(p) == []
    set_path(p, path, 1)
    assert [str(e) for e in validate_pod(p)] == [f"{path}: Unknown field"]
    assert validate_pod(p, strict=False) == []


def test_unknown_fields_are_each_reported_in_the_objects_order_beside_known_ones():
    p = pod()
    c = p["spec"]["containers"][0]
    c.update(zeta=1, image="x", alpha=2)  # fewer fields than a Container has: still each one checked
    assert [str(e) for e in validate_pod(p)] == ["spec.containers[0].zeta: Unknown field",
                                                 "spec.containers[0].alpha: Unknown field"]


# --- env sources and volumes (validateEnvVarValueFrom, ValidateEnvFrom, ValidateVolumes) -------

def env_pod(env=None, env_from=None, volumes=None, mounts=None):
    p = pod()
    ctr = p["spec"]["containers"][0]
    for field, value in (("env", env), ("envFrom", env_from), ("volumeMounts", mounts)):
        if value is not None:
            ctr[field] = value
    if volumes is not None:
        p["spec"]["volumes"] = volumes
    return p


def test_every_env_source_and_volume_kind_kubemu_runs_is_valid_raw_and_defaulted():
    p = env_pod(
        env=[{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a.b",
                                                             "optional": True}}},
             {"name": "B", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "pw"}}},
             {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
             {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
             {"name": "E", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                              "divisor": "1Mi"}}}],
        env_from=[{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"},
                  {"secretRef": {"name": "sec", "optional": False}}],
        volumes=[{"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                 {"name": "bare"},
                 {"name": "host", "hostPath": {"path": "/tmp", "type": "Directory"}},
                 {"name": "cfg", "configMap": {"name": "cfg", "items": [
                     {"key": "a.b", "path": "conf/a", "mode": 0o600}]}},
                 {"name": "sec", "secret": {"secretName": "sec", "defaultMode": 0o400}},
                 {"name": "info", "downwardAPI": {"items": [
                     {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                     {"path": "mem", "resourceFieldRef": {"containerName": "app",
                                                          "resource": "requests.memory"}}]}},
                 {"name": "all", "projected": {"sources": [
                     {"configMap": {"name": "cfg"}}, {"secret": {"name": "sec"}},
                     {"downwardAPI": {"items": [{"path": "name", "fieldRef": {
                         "fieldPath": "metadata.name"}}]}},
                     {"serviceAccountToken": {"path": "token", "audience": "api"}}]}}],
        mounts=[{"name": "cfg", "mountPath": "/etc/cfg", "readOnly": True},
                {"name": "scratch", "mountPath": "/scratch", "subPath": "a/b"}])
    assert validate_pod(p) == []
    defaulted = default_pod(p)
    assert validate_pod(defaulted) == []
    vols = {v["name"]: v for v in defaulted["spec"]["volumes"]}
    assert vols["bare"] == {"name": "bare", "emptyDir": {}}  # SetDefaults_Volume
    assert vols["cfg"]["configMap"]["defaultMode"] == 0o644
    assert vols["sec"]["secret"]["defaultMode"] == 0o400
    assert vols["host"]["hostPath"]["type"] == "Directory"
    assert vols["info"]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    token = vols["all"]["projected"]["sources"][3]["serviceAccountToken"]
    assert token["expirationSeconds"] == 3600
    env = defaulted["spec"]["containers"][0]["env"]
    assert env[2]["valueFrom"]["fieldRef"] == {"fieldPath": "status.podIP", "apiVersion": "v1"}


FILE_MODE = "must be a number between 0 and 0777 (octal), both inclusive"
ENV_FIELDS = ('"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", '
              '"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", '
              '"status.podIPs"')
E0 = "spec.containers[0].env[0].valueFrom"


@pytest.mark.parametrize("env, expected", [
    ([{"name": "A", "valueFrom": {}}],
     [f'{E0}: Invalid value: "": must specify one of: `fieldRef`, `resourceFieldRef`, '
      "`configMapKeyRef` or `secretKeyRef`"]),
    ([{"name": "A", "value": "x", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
     [f'{E0}: Invalid value: "": may not be specified when `value` is not empty']),
    ([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"},
                                  "configMapKeyRef": {"name": "c", "key": "k"}}}],
     [f'{E0}: Invalid value: "": may not have more than one field specified at a time']),
    ([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c"}}}],
     [f"{E0}.configMapKeyRef.key: Required value"]),
    ([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "a/b"}}}],
     [f'{E0}.configMapKeyRef.key: Invalid value: "a/b": a valid config key must consist of '
      "alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or "
      "'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"]),
    ([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "Bad", "key": "k"}}}],
     [f'{E0}.secretKeyRef.name: Invalid value: "Bad": ' + SUBDOMAIN_MSG]),
    ([{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels"}}}],
     [f'{E0}.fieldRef.fieldPath: Unsupported value: "metadata.labels": supported values: '
      + ENV_FIELDS]),
    ([{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}}],
     [f'{E0}.fieldRef.fieldPath: Invalid value: "spec.containers": error converting '
      "fieldPath: field label not supported: spec.containers"]),
    ([{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name['x']"}}}],
     [f"{E0}.fieldRef.fieldPath: Invalid value: \"metadata.name['x']\": error converting "
      "fieldPath: field label does not support subscript: metadata.name['x']"]),
    ([{"name": "A", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.name"}}}],
     [f'{E0}.fieldRef.fieldPath: Invalid value: "metadata.name": error converting fieldPath: '
      "unsupported pod version: v2"]),
    ([{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['a b']"}}}],
     [f'{E0}.fieldRef: Invalid value: "a b": name part must consist of alphanumeric '
      "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
      "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
      "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]),
    ([{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}],
     [f'{E0}.resourceFieldRef.resource: Unsupported value: "limits.gpu": supported values: '
      '"limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu", '
      '"requests.ephemeral-storage", "requests.memory"']),
    ([{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                       "divisor": "2"}}}],
     [f'{E0}.resourceFieldRef.divisor: Invalid value: "limits.cpu": only divisor\'s values 1m '
      "and 1 are supported with the cpu resource"]),
    ([{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                       "divisor": "1000m"}}}], []),
    ([{"name": "A", "valueFrom": {"resourceFieldRef": {}}}],
     [f"{E0}.resourceFieldRef.resource: Required value"]),
])
def test_env_value_from(env, expected):
    assert [str(e) for e in validate_pod(env_pod(env=env))] == expected


@pytest.mark.parametrize("env_from, expected", [
    ([{"prefix": "P_"}],
     ['spec.containers[0].envFrom: Invalid value: "": must specify one of: `configMapRef` or '
      "`secretRef`"]),
    ([{"configMapRef": {"name": "c"}, "secretRef": {"name": "s"}}],
     ['spec.containers[0].envFrom: Invalid value: "": may not have more than one field '
      "specified at a time"]),
    ([{"configMapRef": {}}], ["spec.containers[0].envFrom[0].configMapRef.name: Required value"]),
    ([{"secretRef": {"name": "s"}, "prefix": "1X"}],
     ['spec.containers[0].envFrom[0].prefix: Invalid value: "1X": a valid environment variable '
      "name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start "
      "with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for "
      "validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"]),
    ([{"configMapRef": {"name": "c", "color": "red"}}],
     ["spec.containers[0].envFrom[0].configMapRef.color: Unknown field"]),
])
def test_env_from(env_from, expected):
    assert [str(e) for e in validate_pod(env_pod(env_from=env_from))] == expected


V0 = "spec.volumes[0]"


@pytest.mark.parametrize("volume, expected", [
    ({"name": "v", "emptyDir": {}, "hostPath": {"path": "/tmp"}},
     [f"{V0}.hostPath: Forbidden: may not specify more than 1 volume type"]),
    ({"name": "v", "nfs": {"server": "s", "path": "/"}},
     [f"{V0}.nfs: Forbidden: kubemu runs emptyDir, hostPath, configMap, "
      "secret, downwardAPI, projected and persistentVolumeClaim volumes only"]),
    ({"name": "v", "persistentVolumeClaim": {"claimName": "c", "readOnly": True}}, []),
    ({"name": "v", "persistentVolumeClaim": {}}, [f"{V0}.persistentVolumeClaim.claimName: Required value"]),
    ({"name": "v", "persistentVolumeClaim": {"claimName": ""}},
     [f"{V0}.persistentVolumeClaim.claimName: Required value"]),
    ({"name": "v", "persistentVolumeClaim": {"claimName": "c", "readOnly": "yes"}},
     [f'{V0}.persistentVolumeClaim.readOnly: Invalid value: "yes": must be a boolean']),
    ({"name": "v", "persistentVolumeClaim": {"claimName": "c", "size": 1}},
     [f"{V0}.persistentVolumeClaim.size: Unknown field"]),
    ({"emptyDir": {}}, [f"{V0}.name: Required value"]),
    ({"name": "V_1", "emptyDir": {}},
     [f'{V0}.name: Invalid value: "V_1": ' + LABEL_MSG]),
    ({"name": "v", "emptyDir": {"sizeLimit": "-1Mi"}},
     [f"{V0}.emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity"]),
    ({"name": "v", "hostPath": {}}, [f"{V0}.hostPath.path: Required value"]),
    ({"name": "v", "hostPath": {"path": "/a/../etc"}},
     [f"{V0}.hostPath.path: Invalid value: \"/a/../etc\": must not contain '..'"]),
    ({"name": "v", "hostPath": {"path": "/x", "type": "Dir"}},
     [f'{V0}.hostPath.type: Unsupported value: "Dir": supported values: "", "BlockDevice", '
      '"CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"']),
    ({"name": "v", "configMap": {}}, [f"{V0}.configMap.name: Required value"]),
    ({"name": "v", "configMap": {"name": "c", "defaultMode": 0o1000}},
     [f"{V0}.configMap.defaultMode: Invalid value: 512: {FILE_MODE}"]),
    ({"name": "v", "secret": {"secretName": "s", "items": [{"key": "k", "path": "/abs"}]}},
     [f'{V0}.secret.items[0].path: Invalid value: "/abs": must be a relative path']),
    ({"name": "v", "secret": {"secretName": "s", "items": [{"path": "..b/c", "mode": -1}]}},
     [f"{V0}.secret.items[0].key: Required value",
      f"{V0}.secret.items[0].path: Invalid value: \"..b/c\": must not start with '..'",
      f"{V0}.secret.items[0].mode: Invalid value: -1: {FILE_MODE}"]),
    ({"name": "v", "secret": {"secretName": "s", "items": [{"key": "k", "path": "a/..b"}]}}, []),
    ({"name": "v", "emptyDir": {}, "downwardAPI": {}},
     [f"{V0}.downwarAPI: Forbidden: may not specify more than 1 volume type"]),  # sic
    ({"name": "v", "secret": {}}, [f"{V0}.secret.secretName: Required value"]),
    ({"name": "v", "downwardAPI": {"items": [{"path": "x"}]}},
     [f"{V0}.downwardAPI: Required value: one of fieldRef and resourceFieldRef is required"]),
    ({"name": "v", "downwardAPI": {"items": [{"path": "x", "fieldRef": {
        "fieldPath": "status.podIP"}}]}},
     [f'{V0}.downwardAPI.fieldRef.fieldPath: Unsupported value: "status.podIP": supported '
      'values: "metadata.annotations", "metadata.labels", "metadata.name", '
      '"metadata.namespace", "metadata.uid"']),
    ({"name": "v", "downwardAPI": {"items": [{"path": "x", "resourceFieldRef": {
        "resource": "limits.cpu"}}]}},
     [f"{V0}.downwardAPI.resourceFieldRef.containerName: Required value"]),
    ({"name": "v", "projected": {"sources": [{"configMap": {"name": "a"},
                                              "secret": {"name": "b"}}]}},
     [f"{V0}.projected.sources[0]: Forbidden: may not specify more than 1 volume type"]),
    ({"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "/token"}}]}},
     [f'{V0}.projected.path: Invalid value: "/token": must be a relative path']),
    ({"name": "v", "projected": {"sources": [
        {"configMap": {"name": "a", "items": [{"key": "k", "path": "p"}]}},
        {"secret": {"name": "b", "items": [{"key": "k", "path": "p"}]}}]}},
     [f'{V0}.projected: Invalid value: "b": conflicting duplicate paths']),
    ({"name": "v", "projected": {"sources": [{"serviceAccountToken": {
        "path": "t", "expirationSeconds": 60}}]}},
     [f"{V0}.projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 60: "
      "may not specify a duration less than 10 minutes"]),
    ({"name": "v", "projected": {"sources": [{"serviceAccountToken": {}}]}},
     [f"{V0}.projected.path: Required value"]),
])
def test_volumes(volume, expected):
    assert [str(e) for e in validate_pod(env_pod(volumes=[volume]))] == expected


def test_volume_names_are_unique_and_mounts_name_a_valid_volume():
    p = env_pod(volumes=[{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}},
                         {"name": "bad", "configMap": {}}],
                mounts=[{"name": "a", "mountPath": "/a"}, {"name": "bad", "mountPath": "/a"},
                        {"mountPath": "/c", "subPath": "../x"}, {"name": "a"}])
    M = "spec.containers[0].volumeMounts"
    assert [str(e) for e in validate_pod(p)] == [
        'spec.volumes[1].name: Duplicate value: "a"',
        "spec.volumes[2].configMap.name: Required value",
        # a mount of a volume that is not valid names no volume, as in Kubernetes
        f'{M}[1].name: Not found: "bad"',
        f'{M}[1].mountPath: Invalid value: "/a": must be unique',
        f"{M}[2].name: Required value",
        f'{M}[2].name: Not found: ""',
        f"{M}.subPath: Invalid value: \"../x\": must not contain '..'",
        f"{M}[3].mountPath: Required value",
    ]


@pytest.mark.parametrize("mount, expected", [
    ({"mountPropagation": "Sideways"},
     'spec.containers[0].volumeMounts.mountPropagation: Unsupported value: "Sideways": '
     'supported values: "Bidirectional", "HostToContainer", "None"'),
    ({"mountPropagation": "Bidirectional"},
     "spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount "
     "propagation is available only to privileged containers"),
    ({"recursiveReadOnly": "Enabled"},
     "spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when "
     "readOnly is true"),
    ({"recursiveReadOnly": "Always", "readOnly": True},
     'spec.containers[0].volumeMounts.recursiveReadOnly: Unsupported value: "Always": '
     'supported values: "Disabled", "Enabled", "IfPossible"'),
])
def test_mount_propagation_and_recursive_read_only(mount, expected):
    p = env_pod(volumes=[{"name": "a", "emptyDir": {}}],
                mounts=[{"name": "a", "mountPath": "/a", **mount}])
    assert [str(e) for e in validate_pod(p)] == [expected]
    p["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    if mount == {"mountPropagation": "Bidirectional"}:
        assert validate_pod(p) == []


def test_a_mount_without_a_volumes_list_is_only_reported_once():
    p = env_pod(volumes={"a": {}}, mounts=[{"name": "a", "mountPath": "/a"}])
    assert [str(e) for e in validate_pod(p)] == [
        'spec.volumes: Invalid value: {"a":{}}: must be a list']


def test_kubernetes_fields_kubemu_ignores_are_known():
    for field in ("image", "imagePullPolicy", "securityContext", "volumeMounts", "lifecycle"):
        assert field in KNOWN_FIELDS["Container"]
    for field in ("volumes", "serviceAccountName", "affinity", "tolerations", "priority",
                  "hostNetwork", "priorityClassName", "securityContext"):
        assert field in KNOWN_FIELDS["PodSpec"]


# --- never a crash ------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)

FIELD_NAMES = sorted(set().union(*KNOWN_FIELDS.values()))


def json_with(keys):
    """JSON-like values whose dict keys are mostly real field names, to reach deep code."""
    names = st.sampled_from(keys) | st.text(max_size=6)
    return st.recursive(
        st.none() | st.booleans() | st.integers(-5, 70000) | st.floats() | st.text(max_size=6)
        | st.sampled_from(["v1", "Pod", "1", "100m", "1Gi", "Exists", "NoExecute", "TCP", "http"]),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=6),
        max_leaves=40)


def _check_never_raises(value):
    errors = validate_pod(value)
    assert all(isinstance(e, FieldError) for e in errors)
    for e in errors:
        str(e)
    str(ValidationError(errors))
    d = default_pod(value)
    validate_pod(d, strict=False)
    default_pod(d, with_status=True)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_arbitrary_json_never_raises(value):
    _check_never_raises(value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_with(FIELD_NAMES))
def test_arbitrary_pod_shaped_json_never_raises(value):
    _check_never_raises(value)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([
    "metadata", "metadata.name", "metadata.labels", "metadata.annotations", "spec",
    "spec.containers", "spec.containers[0]", "spec.containers[0].name",
    "spec.containers[0].command", "spec.containers[0].env", "spec.containers[0].ports",
    "spec.containers[0].resources", "spec.containers[0].resources.requests",
    "spec.containers[0].resources.limits", "spec.containers[0].livenessProbe",
    "spec.containers[0].livenessProbe.httpGet", "spec.containers[0].livenessProbe.httpGet.port",
    "spec.containers[0].readinessProbe", "spec.containers[0].startupProbe",
    "spec.tolerations", "spec.initContainers", "spec.nodeSelector", "spec.restartPolicy",
    "spec.terminationGracePeriodSeconds", "status",
]), JSON)
def test_any_value_anywhere_in_a_real_pod(path, value):
    p = realistic_pod()
    set_path(p, path, value)
    _check_never_raises(p)
    # Whatever was put there, the pod is either valid or every complaint has a path.
    assert all(e.path for e in validate_pod(p))


def test_claim_names():
    pod = {"spec": {"volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "one"}},
                                {"name": "b", "hostPath": {"path": "/"}},
                                {"name": "c", "persistentVolumeClaim": {"claimName": "two"}}]}}
    assert claim_names(pod) == ["one", "two"]
    assert claim_names({"spec": {}}) == [] and claim_names({}) == []
