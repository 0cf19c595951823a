"""kubelet/cni.py: the CNI runtime's decisions, with a fake `execute` standing for the plugins."""
from __future__ import annotations

import json

import pytest

from kubelet import cni

RT = cni.Runtime("pod-1", "/proc/42/ns/net", "eth0", ("/usr/lib/cni", "/opt/cni/bin"))


def conflist(**over) -> cni.Conflist:
    raw = {"cniVersion": "1.0.0", "name": "net",
           "plugins": [{"type": "first", "a": 1}, {"type": "second", "cniVersion": "0.3.1", "name": "mine"}]}
    raw.update(over)
    return cni.load_conflist(json.dumps(raw))


def result(address: str, **extra) -> dict:
    return {"cniVersion": "1.0.0", "ips": [{"address": address, **extra}], **{}}


class FakePlugins:
    """Records every invocation; answers from a table keyed by (type, command)."""

    def __init__(self, answers: dict | None = None):
        self.calls: list[cni.Invocation] = []
        self.answers = answers or {}

    def __call__(self, inv: cni.Invocation) -> cni.Output:
        self.calls.append(inv)
        answer = self.answers.get((inv.type, inv.command))
        if answer is None:
            if inv.command == "ADD":  # pass the previous result on, or make the first
                return cni.Output(0, json.dumps(inv.config.get("prevResult") or result(f"10.0.0.{len(self.calls)}/24")).encode())
            return cni.Output(0)
        return answer

    def order(self) -> list[tuple[str, str]]:
        return [(c.type, c.command) for c in self.calls]


# --- configuration ---------------------------------------------------------------------------

def test_conflist_is_loaded():
    conf = conflist(disableCheck="true")
    assert conf.name == "net" and conf.cni_version == "1.0.0" and conf.disable_check
    assert [p["type"] for p in conf.plugins] == ["first", "second"]


def test_single_plugin_conf_is_a_list_of_one():
    conf = cni.load_conflist('{"cniVersion": "0.4.0", "name": "one", "type": "bridge", "bridge": "b0"}')
    assert conf.name == "one" and conf.cni_version == "0.4.0"
    assert conf.plugins == ({"cniVersion": "0.4.0", "name": "one", "type": "bridge", "bridge": "b0"},)


@pytest.mark.parametrize("text, says", [
    ('{"name": "x", "plugins": [', "not JSON"),
    (b"\xff\xfe", "not JSON"),
    ('[1, 2]', "a JSON object is needed, not a list"),
    ('{"cniVersion": "1.0.0", "name": "x"}', 'neither a "plugins" list nor a plugin "type"'),
    ('{"cniVersion": "1.0.0", "name": "x", "plugins": []}', "no plugins in list"),
    ('{"cniVersion": "1.0.0", "name": "x", "plugins": {"type": "a"}}', '"plugins" must be a list, not an object'),
    ('{"cniVersion": "1.0.0", "plugins": [{"type": "a"}]}', '"name" must be a non-empty string'),
    ('{"cniVersion": "1.0.0", "name": 7, "plugins": [{"type": "a"}]}', '"name" must be a non-empty string'),
    ('{"cniVersion": "9.9.9", "name": "x", "plugins": [{"type": "a"}]}', 'cniVersion "9.9.9" is not supported'),
    ('{"name": "x", "plugins": [{"type": "a"}]}', "cniVersion null is not supported"),
    ('{"cniVersion": "0.2.0", "name": "x", "plugins": [{"type": "a"}]}', 'cniVersion "0.2.0" is not supported'),
    ('{"cniVersion": "1.0.0", "name": "x", "plugins": ["bridge"]}', "plugin 0 is a string, not an object"),
    ('{"cniVersion": "1.0.0", "name": "x", "plugins": [{"bridge": "b"}]}', "plugin 0 has type null"),
    ('{"cniVersion": "1.0.0", "name": "x", "plugins": [{"type": "a"}, {"type": "../../bin/sh"}]}',
     'plugin 1 has type "../../bin/sh": a plugin type is the bare name of an executable'),
    ('{"cniVersion": "1.0.0", "name": "x", "plugins": [{"type": "/bin/sh"}]}', 'plugin 0 has type "/bin/sh"'),
    ('{"cniVersion": "1.0.0", "name": "x", "plugins": [{"type": ".."}]}', 'plugin 0 has type ".."'),
    ('{"cniVersion": "1.0.0", "name": "x", "plugins": [{"type": ""}]}', 'plugin 0 has type ""'),
    ('{"cniVersion": "1.0.0", "name": "x", "disableCheck": "maybe", "plugins": [{"type": "a"}]}',
     'disableCheck must be true or false, not "maybe"'),
])
def test_invalid_conflist_is_one_clear_error(text, says):
    with pytest.raises(cni.ConfigError) as err:
        cni.load_conflist(text)
    assert says in str(err.value)
    assert str(err.value).startswith("invalid CNI config") and "\n" not in str(err.value)


def test_kubemu_conflist():
    conf = cni.kubemu_conflist("10.244.3.0/24", "10.244.0.0/16", "/state/node-3/cni/networks", "kmbr3")
    assert conf == {
        "cniVersion": "1.0.0", "name": "kubemu",
        "plugins": [
            {"type": "bridge", "bridge": "kmbr3", "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.3.0/24"}]],
                      "routes": [{"dst": "10.244.0.0/16", "gw": "10.244.3.1"}],
                      "dataDir": "/state/node-3/cni/networks"}},
            {"type": "loopback"}]}
    assert cni.load_conflist(json.dumps(conf)).name == "kubemu"


def test_kubemu_conflist_routes_the_service_cidr_through_the_bridge_gateway():
    """ClusterIPs are not on the pod's subnet: their packets go to the gateway, into the fabric,
    where kube-proxy's DNAT takes them (a pod has no default route to send them by)."""
    conf = cni.kubemu_conflist("10.244.3.0/24", "10.244.0.0/16", "/d", "kmbr3", service_cidr="10.96.0.0/12")
    assert conf["plugins"][0]["ipam"]["routes"] == [{"dst": "10.244.0.0/16", "gw": "10.244.3.1"},
                                                    {"dst": "10.96.0.0/12", "gw": "10.244.3.1"}]


# --- invocations -----------------------------------------------------------------------------

def test_plugin_config_takes_the_lists_name_and_version_and_drops_runtime_config():
    conf = cni.load_conflist(json.dumps({"cniVersion": "0.4.0", "name": "net", "plugins": [
        {"type": "p", "name": "other", "cniVersion": "1.0.0", "runtimeConfig": {"portMappings": []}, "x": [1]}]}))
    inv = cni.invocation(conf, conf.plugins[0], "ADD", RT, None)
    assert inv.config == {"type": "p", "name": "net", "cniVersion": "0.4.0", "x": [1]}
    assert json.loads(inv.stdin) == inv.config
    with_prev = cni.invocation(conf, conf.plugins[0], "DEL", RT, {"ips": []})
    assert with_prev.config["prevResult"] == {"ips": []}


def test_plugin_environment_is_the_spec_variables_and_a_path_only():
    inv = cni.invocation(conflist(), {"type": "first"}, "CHECK", RT, None)
    assert inv.env == {"CNI_COMMAND": "CHECK", "CNI_CONTAINERID": "pod-1", "CNI_NETNS": "/proc/42/ns/net",
                       "CNI_IFNAME": "eth0", "CNI_ARGS": "", "CNI_PATH": "/usr/lib/cni:/opt/cni/bin",
                       "PATH": cni.PLUGIN_PATH}
    rt = cni.Runtime("c", "", "eth0", ("/b",), (("K8S_POD_NAMESPACE", "default"), ("K8S_POD_NAME", "web")))
    env = cni.invocation(conflist(), {"type": "first"}, "DEL", rt, None).env
    assert env["CNI_ARGS"] == "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web"
    assert env["CNI_NETNS"] == ""


def test_add_runs_in_order_and_feeds_each_result_to_the_next():
    plugins = FakePlugins({("first", "ADD"): cni.Output(0, json.dumps(result("10.0.0.5/24")).encode()),
                           ("second", "ADD"): cni.Output(0, json.dumps(result("10.0.0.6/24", gateway="10.0.0.1")).encode())})
    res = cni.add(conflist(), RT, plugins)
    assert plugins.order() == [("first", "ADD"), ("second", "ADD")]
    assert "prevResult" not in plugins.calls[0].config
    assert plugins.calls[1].config["prevResult"] == result("10.0.0.5/24")
    assert all(c.config["name"] == "net" and c.config["cniVersion"] == "1.0.0" for c in plugins.calls)
    assert res.ips == ["10.0.0.6"] and res.raw == result("10.0.0.6/24", gateway="10.0.0.1")


def test_check_runs_in_order_with_the_add_result():
    plugins = FakePlugins()
    cni.check(conflist(), RT, plugins, {"saved": 1})
    assert plugins.order() == [("first", "CHECK"), ("second", "CHECK")]
    assert all(c.config["prevResult"] == {"saved": 1} for c in plugins.calls)


@pytest.mark.parametrize("over", [{"disableCheck": True}, {"cniVersion": "0.3.1"}])
def test_check_is_skipped_when_disabled_or_older_than_check(over):
    plugins = FakePlugins()
    cni.check(conflist(**over), RT, plugins, {"saved": 1})
    assert plugins.calls == []


def test_delete_runs_in_reverse_with_the_add_result():
    plugins = FakePlugins()
    cni.delete(conflist(), RT, plugins, {"saved": 1})
    assert plugins.order() == [("second", "DEL"), ("first", "DEL")]
    assert all(c.config["prevResult"] == {"saved": 1} for c in plugins.calls)


def test_delete_without_a_result_or_before_0_4_0_passes_no_prev_result():
    plugins = FakePlugins()
    cni.delete(conflist(), RT, plugins, None)
    cni.delete(conflist(cniVersion="0.3.1"), RT, plugins, {"saved": 1})
    assert [("prevResult" in c.config) for c in plugins.calls] == [False] * 4


def test_delete_stops_at_the_first_error():
    plugins = FakePlugins({("second", "DEL"): cni.Output(1, b'{"code": 3, "msg": "gone"}')})
    with pytest.raises(cni.CNIError) as err:
        cni.delete(conflist(), RT, plugins, None)
    assert plugins.order() == [("second", "DEL")]
    assert str(err.value) == 'plugin type="second" name="net" failed (delete): gone'


def test_failed_add_deletes_the_whole_list_then_raises():
    plugins = FakePlugins({("second", "ADD"): cni.Output(
        1, b'{"cniVersion": "1.0.0", "code": 999, "msg": "failed to allocate for range 0: no IP addresses available"}')})
    with pytest.raises(cni.CNIError) as err:
        cni.add(conflist(), RT, plugins)
    assert plugins.order() == [("first", "ADD"), ("second", "ADD"), ("second", "DEL"), ("first", "DEL")]
    assert all("prevResult" not in c.config for c in plugins.calls[2:])
    assert (err.value.plugin_type, err.value.network, err.value.command, err.value.code) == ("second", "net", "add", 999)
    assert str(err.value) == ('plugin type="second" name="net" failed (add): '
                              'failed to allocate for range 0: no IP addresses available')


def test_failed_cleanup_does_not_hide_the_add_error():
    plugins = FakePlugins({("first", "ADD"): cni.Output(1, b'{"code": 7, "msg": "bad config"}'),
                           ("second", "DEL"): cni.Output(1, b'{"code": 5, "msg": "io"}')})
    with pytest.raises(cni.CNIError) as err:
        cni.add(conflist(), RT, plugins)
    assert err.value.code == 7 and err.value.msg == "bad config"
    assert plugins.order() == [("first", "ADD"), ("second", "DEL")]


def test_add_result_that_is_not_a_result_fails_the_add():
    plugins = FakePlugins({("first", "ADD"): cni.Output(0, b"all good!")})
    with pytest.raises(cni.CNIError) as err:
        cni.add(conflist(), RT, plugins)
    assert str(err.value).startswith('plugin type="first" name="net" failed (add): netplugin returned an invalid result "all good!"')
    assert plugins.order() == [("first", "ADD"), ("second", "DEL"), ("first", "DEL")]


# --- results and errors ----------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    # 1.0.0 (the bridge plugin's, as seen on this machine)
    {"cniVersion": "1.0.0", "interfaces": [{"name": "kmbr0"}, {"name": "veth1"}, {"name": "eth0", "sandbox": "/proc/1/ns/net"}],
     "ips": [{"interface": 2, "address": "10.244.0.2/24", "gateway": "10.244.0.1"}], "routes": [{"dst": "10.244.0.0/16"}], "dns": {}},
    # 0.4.0 and 0.3.1: ips carry a version
    {"cniVersion": "0.4.0", "interfaces": [{"name": "eth0"}],
     "ips": [{"version": "4", "interface": 0, "address": "10.244.0.2/24"}, {"version": "6", "address": "fd00::2/64"}]},
    {"cniVersion": "0.3.1", "ips": [{"version": "4", "address": "10.244.0.2/24", "gateway": "10.244.0.1"}], "dns": {}},
])
def test_results_of_every_supported_version(raw):
    res = cni.parse_result(json.dumps(raw).encode())
    assert res.ips[0] == "10.244.0.2" and res.raw == raw
    assert res.ips[1:] in ([], ["fd00::2"])


def test_result_without_ips_has_none():
    assert cni.parse_result(b'{"cniVersion": "1.0.0", "interfaces": [{"name": "lo"}]}').ips == []


@pytest.mark.parametrize("stdout, says", [
    (b"", "invalid result"), (b"[]", "not a JSON object"), (b'{"ips": {}}', '"ips" is an object, not a list'),
    (b'{"ips": [{"address": "10.0.0.300/24"}]}', 'bad address "10.0.0.300/24"'), (b'{"ips": [7]}', "bad address null"),
])
def test_bad_results_are_one_clear_error(stdout, says):
    with pytest.raises(ValueError, match=says):
        cni.parse_result(stdout)


@pytest.mark.parametrize("stdout, code, msg, details", [
    (b'{"cniVersion": "1.0.0", "code": 1, "msg": "incompatible CNI versions", '
     b'"details": "config is \\"9.9.9\\", plugin supports [\\"0.1.0\\"]"}',
     1, "incompatible CNI versions", 'config is "9.9.9", plugin supports ["0.1.0"]'),
    (b'{"code": 6, "msg": "error unmarshall network config: unexpected end of JSON input"}',
     6, "error unmarshall network config: unexpected end of JSON input", ""),
    (b'{"code": 7, "msg": "invalid config"}\n', 7, "invalid config", ""),
    (b'{"code": 999, "msg": "failed to allocate for range 0: no IP addresses available in range set: '
     b'10.244.9.1-10.244.9.2"}', 999,
     "failed to allocate for range 0: no IP addresses available in range set: 10.244.9.1-10.244.9.2", ""),
    (b'{"code": "eleven", "msg": "odd"}', None, "odd", ""),
    (b'{"code": 11}', 11, "netplugin failed: exit status 1", ""),
])
def test_plugin_errors_by_code(stdout, code, msg, details):
    assert cni.plugin_error(cni.Output(1, stdout, b"ignored")) == (code, msg, details)


def test_error_text_has_libcni_wording_with_details():
    plugins = FakePlugins({("first", "ADD"): cni.Output(
        1, b'{"code": 1, "msg": "incompatible CNI versions", "details": "config is \\"9.9.9\\""}')})
    with pytest.raises(cni.CNIError) as err:
        cni.add(conflist(), RT, plugins)
    assert str(err.value) == 'plugin type="first" name="net" failed (add): incompatible CNI versions; config is "9.9.9"'
    assert err.value.details == 'config is "9.9.9"'


@pytest.mark.parametrize("output, msg", [
    (cni.Output(1, b"", b""), "netplugin failed with no error message: exit status 1"),
    (cni.Output(-9, b"", b""), "netplugin failed with no error message: signal: killed"),
    (cni.Output(2, b"", b"panic: runtime error\n"), 'netplugin failed: "panic: runtime error": exit status 2'),
    (cni.Output(1, b"Segmentation fault", b"x"),
     'netplugin failed but error parsing its diagnostic message "Segmentation fault": Expecting value: line 1 column 1 (char 0)'),
    (cni.Output(1, b'"just a string"'), 'netplugin failed but its diagnostic message is not a CNI error: "\\"just a string\\""'),
    (cni.Output(failure="failed to find plugin \"x\" in path [/a /b]"), 'failed to find plugin "x" in path [/a /b]'),
])
def test_garbage_from_a_failed_plugin_is_one_clear_error(output, msg):
    code, text, details = cni.plugin_error(output)
    assert (code, text, details) == (None, msg, "")


def test_garbage_is_quoted_short():
    code, text, _ = cni.plugin_error(cni.Output(1, b"x" * 10000))
    assert len(text) < 500 and "\n" not in text


def test_runtime_failure_becomes_a_cni_error():
    plugins = FakePlugins({("first", "ADD"): cni.Output(failure=cni.not_found_message("first", RT.bin_dirs))})
    with pytest.raises(cni.CNIError) as err:
        cni.add(conflist(), RT, plugins)
    assert str(err.value) == ('plugin type="first" name="net" failed (add): '
                              'failed to find plugin "first" in path [/usr/lib/cni /opt/cni/bin]')
    assert err.value.code is None


def test_only_container_only_plugins_may_run_in_the_host_namespace():
    assert cni.host_namespace_refusal("loopback") is None
    for kind in ("bridge", "ptp", "macvlan", "something-new"):
        assert "refusing to run CNI plugin" in cni.host_namespace_refusal(kind)


def test_a_checks_prev_result_names_the_sandbox_as_the_check_does():
    prev = {"cniVersion": "1.0.0", "interfaces": [{"name": "kmbr0", "mac": "m"},
                                                  {"name": "eth0", "sandbox": "/proc/self/fd/9"}], "ips": []}
    assert cni.renamed_sandbox(prev, "/proc/self/fd/12") == {
        "cniVersion": "1.0.0", "interfaces": [{"name": "kmbr0", "mac": "m"},
                                              {"name": "eth0", "sandbox": "/proc/self/fd/12"}], "ips": []}
    assert prev["interfaces"][1]["sandbox"] == "/proc/self/fd/9"  # a copy
    assert cni.renamed_sandbox({"ips": []}, "/x") == {"ips": []}
