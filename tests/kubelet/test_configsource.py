"""Which ConfigMaps and Secrets a pod reads, and their data as env vars and files see it."""
import base64

from kubelet.configsource import NO_OBJECTS, binary_data, not_found, references, string_data


def test_references_cover_env_env_from_volumes_and_projections_of_every_container():
    pod = {"metadata": {"namespace": "ns"}, "spec": {
        "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "s1"}}]}],
        "containers": [{"name": "a", "envFrom": [{"configMapRef": {"name": "c1"}, "prefix": "X"}],
                        "env": [{"name": "A", "value": "1"},
                                {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "c2", "key": "k"}}},
                                {"name": "C", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}},
                                {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
        "volumes": [{"name": "v1", "configMap": {"name": "c3"}},
                    {"name": "v2", "secret": {"secretName": "s3"}},
                    {"name": "v3", "projected": {"sources": [
                        {"configMap": {"name": "c4"}}, {"secret": {"name": "s4"}},
                        {"serviceAccountToken": {"path": "t"}}]}},
                    {"name": "v4", "emptyDir": {}}]}}
    assert references(pod) == {("configmaps", "ns", f"c{i}") for i in range(1, 5)} | \
        {("secrets", "ns", f"s{i}") for i in range(1, 5)}
    assert references({"metadata": {"namespace": "ns"}, "spec": {"containers": [{"name": "a"}]}}) == set()


def test_env_vars_read_configmap_data_and_decoded_secret_data():
    cm = {"data": {"a": "1"}, "binaryData": {"b": base64.b64encode(b"\x00").decode()}}
    secret = {"data": {"pw": base64.b64encode("héllo".encode()).decode()}}
    assert string_data("configmaps", cm) == {"a": "1"}
    assert string_data("secrets", secret) == {"pw": "héllo"}
    assert binary_data("configmaps", cm) == {"a": b"1", "b": b"\x00"}
    assert binary_data("secrets", secret) == {"pw": "héllo".encode()}
    assert binary_data("secrets", {"data": None}) == {} == string_data("configmaps", {})


def test_the_not_found_words_and_no_objects_without_the_api():
    assert not_found("configmaps", "x") == 'configmap "x" not found'
    assert not_found("secrets", "x") == 'secret "x" not found'
    assert NO_OBJECTS("configmaps", "ns", "x") is None
