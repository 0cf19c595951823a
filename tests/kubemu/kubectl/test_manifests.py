"""Reading -f manifests: YAML and JSON streams, directories, stdin, and kubectl's errors."""
from __future__ import annotations

import pytest

from kubemu.kubectl.manifests import Manifest, load, parse
from kubemu.kubectl.session import CommandError

POD = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n"


def test_multi_document_yaml_skips_empty_documents_and_keeps_strings():
    docs = parse("f.yaml", "---\n" + POD.format(name="a") + "---\n---\n" + POD.format(name="b") +
                 "  annotations: {when: 2024-01-01T00:00:00Z}\n")
    assert [d["metadata"]["name"] for d in docs] == ["a", "b"]
    assert docs[1]["metadata"]["annotations"]["when"] == "2024-01-01T00:00:00Z"  # not a datetime


def test_json_stream_and_lists():
    text = '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}\n\t{"apiVersion": "v1", ' \
           '"kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}}]}'
    assert [d["metadata"]["name"] for d in parse("f.json", text)] == ["a", "b"]


@pytest.mark.parametrize("text, message", [
    ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n   labels: oops\n",
     "error parsing f.yaml: error converting YAML to JSON: yaml: line 5: mapping values are not allowed"),
    ("- a\n- b\n", 'unable to decode "f.yaml": json: cannot unmarshal array into Go value of type map'),
    ("apiVersion: v1\nmetadata: {name: x}\n", "unable to decode \"f.yaml\": Object 'Kind' is missing in "
                                              "'{\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x\"}}'"),
    ('{"kind": "Pod",', "error parsing f.yaml: Expecting property name enclosed in double quotes at line 1"),
])
def test_errors_read_like_kubectl(text, message):
    with pytest.raises(CommandError) as err:
        parse("f.yaml", text)
    assert str(err.value).startswith(message)


def test_files_directories_and_stdin(tmp_path):
    (tmp_path / "b.yaml").write_text(POD.format(name="b"))
    (tmp_path / "a.json").write_text('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}')
    (tmp_path / "notes.txt").write_text("not a manifest")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yml").write_text(POD.format(name="c"))
    names = [m.name for m in load([str(tmp_path)], False, lambda: "")]
    assert names == ["a", "b"]
    assert [m.name for m in load([str(tmp_path)], True, lambda: "")] == ["a", "b", "c"]
    from_stdin = load(["-"], False, lambda: POD.format(name="s"))
    assert [(m.source, m.name) for m in from_stdin] == [("STDIN", "s")]
    with pytest.raises(CommandError, match='the path "nope.yaml" does not exist'):
        load(["nope.yaml"], False, lambda: "")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CommandError, match=r"recognized file extensions are \[.json .yaml .yml\]"):
        load([str(tmp_path / "empty")], False, lambda: "")


def test_unknown_kinds_are_a_mapping_error():
    m = Manifest("f.yaml", {"apiVersion": "v1", "kind": "Foo", "metadata": {"name": "x"}})
    with pytest.raises(CommandError) as err:
        m.resource()
    assert str(err.value) == ('resource mapping not found for name: "x" namespace: "" from "f.yaml": no matches for '
                              'kind "Foo" in version "v1"\nensure CRDs are installed first')
    assert Manifest("f", {"apiVersion": "apps/v1", "kind": "Deployment"}).resource().plural == "deployments"
