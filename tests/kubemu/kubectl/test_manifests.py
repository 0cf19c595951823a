"""Reading -f manifests: YAML and JSON streams, directories, stdin, kubectl's errors, and the limits."""
from __future__ import annotations

import json

import pytest

from kubemu.api.limits import MAX_DEPTH, MAX_MANIFEST_BYTES
from kubemu.kubectl.manifests import Manifest, load, parse
from kubemu.kubectl.session import CommandError

POD = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n"


def objects(source: str, text: str) -> list[dict]:
    """The objects of a file that must read without error."""
    docs, errors = parse(source, text)
    assert errors == []
    return docs


def errors_of(source: str, text: str) -> list[str]:
    return [str(e) for e in parse(source, text)[1]]


def no_stdin(size: int = -1) -> bytes:
    return b""


def test_multi_document_yaml_skips_empty_documents_and_keeps_strings():
    docs = objects("f.yaml", "---\n" + POD.format(name="a") + "---\n---\n" + POD.format(name="b") +
                   "  annotations: {when: 2024-01-01T00:00:00Z}\n")
    assert [d["metadata"]["name"] for d in docs] == ["a", "b"]
    assert docs[1]["metadata"]["annotations"]["when"] == "2024-01-01T00:00:00Z"  # not a datetime


def test_integers_beyond_int64_become_floats_as_in_unstructured():
    doc, = objects("f.json", '{"kind": "Pod", "a": 123456789012345678901234567890, "b": -9223372036854775808}')
    assert doc["a"] == 1.2345678901234568e+29 and doc["b"] == -2**63
    doc, = objects("f.yaml", "kind: Pod\na: 123456789012345678901234567890\n")
    assert isinstance(doc["a"], float)


def test_yaml_reads_through_json():
    doc, = objects("f.yaml", "kind: Pod\n1: a\nnull: b\nbin: !!binary aGk=\n")
    assert doc == {"kind": "Pod", "1": "a", "null": "b", "bin": "aGk="}


def test_json_stream_and_lists():
    text = '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}\n\t{"apiVersion": "v1", ' \
           '"kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}}]}'
    assert [d["metadata"]["name"] for d in objects("f.json", text)] == ["a", "b"]


@pytest.mark.parametrize("text, message", [
    ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n   labels: oops\n",
     "error parsing f.yaml: error converting YAML to JSON: yaml: line 5: mapping values are not allowed"),
    ("- a\n- b\n", 'unable to decode "f.yaml": json: cannot unmarshal array into Go value of type map'),
    ("apiVersion: v1\nmetadata: {name: x}\n", "unable to decode \"f.yaml\": Object 'Kind' is missing in "
                                              "'{\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"x\"}}'"),
    ('{"kind": "Pod",', "error parsing f.yaml: Expecting property name enclosed in double quotes at line 1"),
    ("kind: List\nitems: 3\n", 'unable to decode "f.yaml": json: cannot unmarshal number into Go struct field'),
    ("kind: [Pod]\n", 'unable to decode "f.yaml": json: cannot unmarshal array into Go struct field .kind of type '
                      "string"),
    ("kind: Pod\nmetadata: abc\n", 'unable to decode "f.yaml": .metadata accessor error: abc is of the type string, '
                                   "expected map[string]interface {}"),
    ("kind: Pod\nmetadata: {name: [x]}\n", 'unable to decode "f.yaml": .metadata.name accessor error: ["x"] is of '
                                          "the type []interface {}, expected string"),
    ("kind: Pod\nmetadata: {annotations: [1]}\n", 'unable to decode "f.yaml": .metadata.annotations accessor error: '
                                                  "[1] is of the type []interface {}"),
    ("kind: Pod\nmetadata: {namespace: 5}\n", 'unable to decode "f.yaml": .metadata.namespace accessor error: 5 is of '
                                         "the type int64, expected string"),
    ("kind: Pod\nx: *nope\n", "error parsing f.yaml: error converting YAML to JSON: yaml: line 2: found undefined"),
    ("kind: Pod\nx: .nan\n", "error parsing f.yaml: error converting YAML to JSON: Out of range float values"),
])
def test_errors_read_like_kubectl(text, message):
    errors = errors_of("f.yaml", text)
    assert len(errors) == 1 and errors[0].startswith(message), errors


def test_a_bad_document_is_skipped_alone_and_a_parse_error_ends_its_file():
    text = POD.format(name="a") + "---\n- not an object\n---\n" + POD.format(name="b") + \
        "---\nkind: Pod\n bad: indent\n---\n" + POD.format(name="never")
    docs, errors = parse("f.yaml", text)
    assert [d["metadata"]["name"] for d in docs] == ["a", "b"]
    assert [str(e).split(":")[0] for e in errors] == ['unable to decode "f.yaml"', "error parsing f.yaml"]


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("levels", [MAX_DEPTH, 900, 10_000, 200_000])
def test_deep_json_is_one_error_naming_the_file(levels):
    fits = MAX_DEPTH - 1  # under the document's own map: exactly MAX_DEPTH deep
    good = f'{{"kind": "Pod", "metadata": {{"name": "ok"}}, "x": {nested(fits)}}}'
    deep = f'{{"kind": "Pod", "metadata": {{"name": "deep"}}, "x": {nested(levels)}}}'
    docs, errors = parse("deep.json", good + "\n" + deep)
    assert [d["metadata"]["name"] for d in docs] == ["ok"]
    column = deep.index("[") + fits + 1  # the bracket one level too deep
    assert [str(e) for e in errors] == [f"error parsing deep.json: nested more than {MAX_DEPTH} levels deep "
                                        f"(the limit) at line 2 column {column}"]


def test_brackets_in_json_strings_are_not_nesting():
    doc, = objects("f.json", json.dumps({"kind": "Pod", "x": "[{" * 5000, "y": '\\"[[' * 100}))
    assert doc["x"] == "[{" * 5000


@pytest.mark.parametrize("levels", [MAX_DEPTH, 900, 5_000])
def test_deep_yaml_is_one_error_naming_the_file(levels):
    block = "kind: Pod\nx:\n" + "".join("  " * i + "- \n" for i in range(1, levels + 1))
    flow = "kind: Pod\nx: " + nested(levels) + "\n"
    for text in (block, flow):
        errors = errors_of("deep.yaml", POD.format(name="ok") + "---\n" + text)
        assert len(errors) == 1 and errors[0].startswith("error parsing deep.yaml: "), errors
        assert "nested more than 100 levels deep" in errors[0] or "exceeded maximum nesting depth" in errors[0]


def test_yaml_aliases_cannot_nest_or_multiply_past_the_limits():
    cycle = errors_of("c.yaml", "kind: Pod\nx: &a [*a]\n")
    assert cycle == ["error parsing c.yaml: error converting YAML to JSON: nested more than 100 levels deep "
                     "(the limit)"]
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]  # 10**10 values
    bomb = errors_of("bomb.yaml", "kind: Pod\n" + "\n".join(lines) + "\n")
    assert bomb == ["error parsing bomb.yaml: error converting YAML to JSON: more than 1572864 values (the limit)"]


def test_files_directories_and_stdin(tmp_path):
    (tmp_path / "b.yaml").write_text(POD.format(name="b"))
    (tmp_path / "a.json").write_text('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}')
    (tmp_path / "notes.txt").write_text("not a manifest")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yml").write_text(POD.format(name="c"))
    manifests, errors = load([str(tmp_path)], False, no_stdin)
    assert [m.name for m in manifests] == ["a", "b"] and errors == []
    assert [m.name for m in load([str(tmp_path)], True, no_stdin)[0]] == ["a", "b", "c"]
    from_stdin, _ = load(["-"], False, lambda size=-1: POD.format(name="s").encode())
    assert [(m.source, m.name) for m in from_stdin] == [("STDIN", "s")]
    with pytest.raises(CommandError, match='the path "nope.yaml" does not exist'):
        load(["nope.yaml"], False, no_stdin)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CommandError, match=r"recognized file extensions are \[.json .yaml .yml\]"):
        load([str(tmp_path / "empty")], False, no_stdin)


def test_a_file_that_cannot_be_read_is_one_error_and_the_others_are_read(tmp_path):
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(MAX_MANIFEST_BYTES + 1)  # sparse: the size alone refuses it, nothing is read
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"kind: Pod\n\xff\xfe")
    good = tmp_path / "good.yaml"
    good.write_text(POD.format(name="g"))
    manifests, errors = load([str(big), str(binary), str(good)], False, no_stdin)
    assert [m.name for m in manifests] == ["g"]
    assert [str(e) for e in errors][0] == (f"error reading {big}: the file is {MAX_MANIFEST_BYTES + 1} bytes, "
                                           f"more than the limit of {MAX_MANIFEST_BYTES} bytes")
    assert str(errors[1]).startswith(f"error reading {binary}: 'utf-8' codec can't decode")
    asked = []
    _, errors = load(["-"], False, lambda size: asked.append(size) or b"x" * size)
    assert asked == [MAX_MANIFEST_BYTES + 1]
    assert [str(e) for e in errors] == [f"error reading STDIN: the input is larger, more than the limit of "
                                        f"{MAX_MANIFEST_BYTES} bytes"]


def test_unknown_kinds_are_a_mapping_error():
    m = Manifest("f.yaml", {"apiVersion": "v1", "kind": "Foo", "metadata": {"name": "x"}})
    with pytest.raises(CommandError) as err:
        m.resource()
    assert str(err.value) == ('resource mapping not found for name: "x" namespace: "" from "f.yaml": no matches for '
                              'kind "Foo" in version "v1"\nensure CRDs are installed first')
    assert Manifest("f", {"apiVersion": "apps/v1", "kind": "Deployment"}).resource().plural == "deployments"
