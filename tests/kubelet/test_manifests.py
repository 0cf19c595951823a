"""The kubelet's file source: which files are manifests, static-pod defaults, one clear error."""
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelet.manifests import (CONFIG_HASH, CONFIG_SOURCE, MAX_MANIFEST_BYTES, STATIC_TOLERATION,
                               Manifest, list_manifest_files, load_manifest, manifest_hash,
                               parse_manifest)

NODE = "node-0"
PATH = "/state/nodes/node-0/manifests/web.yaml"

WEB = b"""\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: app
    command: ["python", "-m", "http.server", "8080"]
    ports:
    - containerPort: 8080
      name: http
    readinessProbe:
      httpGet:
        port: http
"""


def parse(content: bytes, node: str = NODE, path: str = PATH) -> Manifest:
    return parse_manifest(node, path, content)


def error_of(content: bytes) -> str:
    m = parse(content)
    assert m.pod is None and not m.ok
    assert "\n" not in m.error, "one line"
    assert m.error.startswith(PATH + ": ")
    return m.error[len(PATH) + 2:]


# --- the directory --------------------------------------------------------------------------------

def test_list_skips_dotfiles_and_subdirectories_in_sorted_order(tmp_path):
    for name in ("b.yaml", "a.yaml", "c.json", "no-extension", ".hidden.yaml", ".b.yaml.swp"):
        (tmp_path / name).write_text("x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.yaml").write_text("x")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "a.yaml")
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "missing")
    (tmp_path / "dirlink").symlink_to(tmp_path / "sub")
    names = [os.path.basename(p) for p in list_manifest_files(str(tmp_path))]
    assert names == ["a.yaml", "b.yaml", "c.json", "link.yaml", "no-extension"]
    assert all(os.path.dirname(p) == str(tmp_path) for p in list_manifest_files(str(tmp_path)))


def test_a_missing_directory_has_no_manifests(tmp_path):
    assert list_manifest_files(str(tmp_path / "nope")) == []


def test_load_reads_the_file(tmp_path):
    path = tmp_path / "web.yaml"
    path.write_bytes(WEB)
    m = load_manifest(NODE, str(path))
    assert m.ok and m.path == str(path)
    assert m == parse_manifest(NODE, str(path), WEB)


def test_load_never_raises(tmp_path):
    for path, why in ((tmp_path / "missing.yaml", "No such file or directory"),
                      (tmp_path, "Is a directory")):
        m = load_manifest(NODE, str(path))
        assert m.pod is None and m.error == f"{path}: cannot read: {why}"
    binary = tmp_path / "binary"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00")
    assert load_manifest(NODE, str(binary)).error == \
        f"{binary}: not a text file (it contains NUL bytes)"


# --- a good manifest --------------------------------------------------------------------------------

def test_static_defaults():
    m = parse(WEB, node="node-0")
    assert m.ok and m.error is None and m.path == PATH
    pod = m.pod
    meta = pod["metadata"]
    assert meta["name"] == "web-node-0"
    assert meta["namespace"] == "default"
    assert meta["labels"] == {"app": "web"}
    assert len(meta["uid"]) == 32 and int(meta["uid"], 16) >= 0
    assert meta["uid"] == manifest_hash(NODE, PATH, WEB)
    assert meta["annotations"] == {CONFIG_HASH: meta["uid"], CONFIG_SOURCE: "file"}
    assert pod["spec"]["nodeName"] == "node-0"
    assert pod["spec"]["tolerations"] == [{"operator": "Exists", "effect": "NoExecute"}]
    assert pod["status"] == {"phase": "Pending"}
    # ...and the API defaults on top.
    assert pod["spec"]["restartPolicy"] == "Always"
    assert pod["spec"]["containers"][0]["readinessProbe"]["periodSeconds"] == 10


def test_name_suffix_is_the_lowercased_node_name():
    # Node names are lowercase in Kubernetes; the kubelet still lowercases for the pod name.
    m = parse(WEB.replace(b"  name: web\n", b"  name: web\n  namespace: kube-system\n"),
              node="worker-1")
    assert m.pod["metadata"]["name"] == "web-worker-1"
    assert m.pod["metadata"]["namespace"] == "kube-system"
    assert m.pod["spec"]["nodeName"] == "worker-1"


def test_given_uid_annotations_and_tolerations_are_kept():
    content = WEB.replace(b"  labels:\n", b"  uid: my-uid\n  annotations:\n    team: a\n  labels:\n")
    content = content.replace(b"spec:\n", b"spec:\n  tolerations:\n  - {key: k, operator: Exists}\n"
                                          b"  - {operator: Exists, effect: NoExecute}\n")
    m = parse(content)
    assert m.ok, m.error
    assert m.pod["metadata"]["uid"] == "my-uid"
    assert m.pod["metadata"]["annotations"] == {"team": "a", CONFIG_HASH: "my-uid",
                                                CONFIG_SOURCE: "file"}
    assert m.pod["spec"]["tolerations"] == [{"key": "k", "operator": "Exists"}, STATIC_TOLERATION]


def test_uid_is_stable_for_the_same_content_and_changes_with_it():
    uid = parse(WEB).pod["metadata"]["uid"]
    assert parse(bytes(WEB)).pod["metadata"]["uid"] == uid
    assert parse(WEB + b"# a comment\n").pod["metadata"]["uid"] != uid
    assert parse(WEB.replace(b"8080", b"8081")).pod["metadata"]["uid"] != uid
    assert parse(WEB, path="/other/web.yaml").pod["metadata"]["uid"] != uid
    assert parse(WEB, node="node-1").pod["metadata"]["uid"] != uid
    assert parse(WEB).pod == parse(WEB).pod


def test_json_and_leading_document_marker_are_fine():
    assert parse(b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"}, '
                 b'"spec": {"containers": [{"name": "a", "command": ["true"]}]}}').ok
    assert parse(b"---\n" + WEB).ok
    assert parse(WEB + b"---\n").ok, "an empty trailing document is no second Pod"


def test_yaml_strings_stay_strings():
    content = WEB.replace(b"  labels:\n", b"  annotations:\n    built: 2024-01-02\n    eq: =\n"
                                          b"  labels:\n")
    m = parse(content)
    assert m.ok, m.error
    assert m.pod["metadata"]["annotations"]["built"] == "2024-01-02"
    assert m.pod["metadata"]["annotations"]["eq"] == "="


# --- a bad manifest: one line naming the file and the problem --------------------------------------

IMAGE_REQUIRED = "Required value: a container needs an image or, in kubemu, a command"


@pytest.mark.parametrize("content, expected", [
    (b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n   bad: indent\n",
     "invalid YAML: line 5, column 7: mapping values are not allowed here"),
    (b"kind: Pod\nmetadata: {name: [web\n",
     "invalid YAML: line 3, column 1: expected ',' or ']', but got '<stream end>' "
     "(while parsing a flow sequence at line 2, column 18)"),
    (b"a: \x07\n", "invalid YAML: unacceptable character #x0007 at character 3: "
                   "special characters are not allowed"),
    (b"", "empty manifest: expected a Pod"),
    (b"# only a comment\n", "empty manifest: expected a Pod"),
    (WEB + b"---\n" + WEB, "multiple documents are not supported: found 2, a static pod "
                           "manifest holds exactly one Pod"),
    (b"- apiVersion: v1\n", "expected a Pod (a YAML mapping), found a list"),
    (b"just text\n", "expected a Pod (a YAML mapping), found a string"),
    (b"apiVersion: apps/v1\nkind: Deployment\n",
     'kind "Deployment" is not supported: a static pod manifest holds one Pod '
     "(apiVersion: v1, kind: Pod)"),
    (b"apiVersion: v1\nmetadata: {name: x}\n",
     "kind is missing: a static pod manifest holds one Pod (apiVersion: v1, kind: Pod)"),
    (b"apiVersion: v2\nkind: Pod\n", 'apiVersion "v2" is not supported: a Pod is apiVersion v1'),
    (b"kind: Pod\n", "apiVersion is missing: a Pod is apiVersion v1"),
    (b"\xff\xfekind: Pod", "not UTF-8 text (invalid byte at offset 0)"),
])
def test_unusable_files(content, expected):
    assert error_of(content) == expected


@pytest.mark.parametrize("old, new, expected", [
    (b"  containers:\n  - name: app\n", b"  containers: x\n  other:\n  - name: app\n",
     'Pod "web-node-0" is invalid: [spec.other: Unknown field, '
     'spec.containers: Invalid value: "x": must be a list]'),
    (b'    command: ["python", "-m", "http.server", "8080"]\n', b"",
     f'Pod "web-node-0" is invalid: spec.containers[0].image: {IMAGE_REQUIRED}'),
    (b'    command: ["python", "-m", "http.server", "8080"]\n', b"    command: 5\n",
     'Pod "web-node-0" is invalid: spec.containers[0].command: Invalid value: 5: '
     "must be a list of strings"),
    (b"  - name: app\n", b"  - nme: app\n",
     'Pod "web-node-0" is invalid: [spec.containers[0].nme: Unknown field, '
     "spec.containers[0].name: Required value]"),
    (b"        port: http\n", b"        port: web\n",
     'Pod "web-node-0" is invalid: spec.containers[0].readinessProbe.httpGet.port: '
     "Invalid value: \"web\": must be the name of one of the container's ports"),
    (b"  name: web\n", b"  generateName: web-\n",
     'Pod "" is invalid: metadata.name: Required value: a static pod needs a name '
     "(generateName is not supported)"),
    (b"  name: web\n", b"  namespace: x\n",
     'Pod "" is invalid: metadata.name: Required value: a static pod needs a name '
     "(generateName is not supported)"),
    (b"  name: web\n", b"  name: Web_1\n",
     'Pod "Web_1-node-0" is invalid: metadata.name: Invalid value: "Web_1-node-0": a lowercase '
     "RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
     "must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
     r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
])
def test_invalid_pods_name_the_file_and_the_fields(old, new, expected):
    assert old in WEB
    assert error_of(WEB.replace(old, new)) == expected


def test_missing_containers():
    assert error_of(b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {}\n") == \
        'Pod "web-node-0" is invalid: spec.containers: Required value'
    assert error_of(b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n") == \
        'Pod "web-node-0" is invalid: spec: Required value'


def test_too_large():
    assert error_of(b"#" * (MAX_MANIFEST_BYTES + 1)) == \
        f"file is larger than {MAX_MANIFEST_BYTES} bytes"


def test_pathological_yaml_is_an_error_not_a_crash():
    assert error_of(b"[" * 5000).startswith("invalid YAML")
    assert error_of(b"a: " + b"9" * 5000 + b"\n").startswith("invalid YAML")
    bomb = (b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n"
            b"  - name: a\n    command: &a [x, x, x, x, x, x, x, x, x]\n"
            b"    args: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            b"    workingDir: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n")
    assert "workingDir: Invalid value: [[[" in error_of(bomb)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_give_a_manifest(content):
    m = parse(content)
    assert (m.pod is None) != (m.error is None)
    assert m.ok or (m.error.startswith(PATH + ": ") and "\n" not in m.error)
