"""The downward API's text: maps as the kubelet formats them, its errors."""
import pytest

from kubelet.downward import DownwardError, field_value, format_map, resource_value

POD = {"metadata": {"name": "w", "annotations": {"Note": 'a\nb "c"'}},
       "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1500m",
                                                                          "memory": "1G"}}}]}}


def test_format_map_sorts_keys_and_go_quotes_values():
    assert format_map({"b": "2", "a": 'x"\n'}) == 'a="x\\"\\n"\nb="2"'
    assert format_map({}) == ""


def test_annotations_by_key():
    assert field_value(POD, "metadata.annotations['Note']", [], []) == 'a\nb "c"'
    assert field_value(POD, "metadata.annotations", [], []) == 'Note="a\\nb \\"c\\""'


@pytest.mark.parametrize("path, message", [
    ("spec.containers", "field label not supported: spec.containers"),
    ("metadata.name['x']", "field label does not support subscript: metadata.name['x']"),
    ("status.phase", "unsupported fieldPath: status.phase"),
])
def test_field_errors(path, message):
    with pytest.raises(DownwardError, match=message.replace("[", r"\[").replace("]", r"\]")):
        field_value(POD, path, [], [])


@pytest.mark.parametrize("selector, expected", [
    ({"resource": "requests.cpu"}, "2"),                      # rounded up
    ({"resource": "requests.cpu", "divisor": "1m"}, "1500"),
    ({"resource": "requests.memory", "divisor": "1Mi"}, "954"),
    ({"resource": "limits.memory"}, "0"),                     # no limit, no allocatable
])
def test_resources(selector, expected):
    assert resource_value(selector, POD, "app") == expected


def test_resource_errors():
    with pytest.raises(DownwardError, match="unsupported container resource : limits.gpu"):
        resource_value({"resource": "limits.gpu"}, POD, "app")
