"""kubelet/__main__.py: the flags as the kubelet's Options."""
import pytest

from kubelet import __main__ as kubelet_main


@pytest.fixture
def started(monkeypatch):
    """The Options a command line starts the kubelet with (nothing runs)."""
    seen = []

    class Fake:
        def __init__(self, opts):
            seen.append(opts)

        async def run(self):
            pass

    monkeypatch.setattr(kubelet_main, "Kubelet", Fake)
    return seen


def test_pod_max_pids_is_each_pods_pids_limit_and_minus_one_is_unlimited(started, tmp_path):
    base = ["--node", "n", "--node-dir", str(tmp_path), "--cgroup-root", "kubemu-x"]
    assert kubelet_main.main(base + ["--pod-max-pids", "4096"]) == 0
    assert kubelet_main.main(base) == 0
    assert [o.pod_pids_limit for o in started] == [4096, None]


@pytest.mark.parametrize("bad", ["0", "-2", "many"])
def test_a_bad_pod_max_pids_is_one_clear_error(started, tmp_path, capsys, bad):
    with pytest.raises(SystemExit) as exit_:
        kubelet_main.main(["--node", "n", "--node-dir", str(tmp_path), "--pod-max-pids", bad])
    assert exit_.value.code == 2 and not started
    assert f"--pod-max-pids: '{bad}': a positive number of processes, or -1 for unlimited" in capsys.readouterr().err


def test_the_cidr_flags_follow_netplans_rules(started, tmp_path, capsys):
    base = ["--node", "n", "--node-dir", str(tmp_path), "--network-mode", "cni"]
    assert kubelet_main.main(base + ["--pod-cidr", "10.244.3.0/29"]) == 0
    assert started[0].network.cluster_cidr == "10.244.0.0/16" and started[0].network.pod_cidr == "10.244.3.0/29"
    assert started[0].network.bin_dirs == ("/usr/lib/cni", "/opt/cni/bin")
    with pytest.raises(SystemExit):
        kubelet_main.main(base + ["--cluster-cidr", "10.244.0.0/29"])
    assert "--cluster-cidr 10.244.0.0/29: too small for a cluster" in capsys.readouterr().err


def test_cluster_dns_is_comma_separated_or_repeated_and_the_domain_defaults_as_kubeadm_sets_it(started, tmp_path):
    base = ["--node", "n", "--node-dir", str(tmp_path)]
    assert kubelet_main.main(base) == 0
    assert kubelet_main.main(base + ["--cluster-dns", "10.96.0.10,10.96.0.11", "--cluster-dns", "fd00::a",
                                     "--cluster-domain", "k8s.test."]) == 0
    assert [(o.cluster_dns, o.cluster_domain) for o in started] == [
        ((), "cluster.local"), (("10.96.0.10", "10.96.0.11", "fd00::a"), "k8s.test")]


def test_a_bad_cluster_dns_is_one_clear_error(started, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        kubelet_main.main(["--node", "n", "--node-dir", str(tmp_path), "--cluster-dns", "10.96.0.10,dns.local"])
    assert exit_.value.code == 2 and not started
    assert "--cluster-dns: 'dns.local' is not an IP address" in capsys.readouterr().err


def test_the_service_cidr_reaches_the_network_options(started, tmp_path, capsys):
    base = ["--node", "n", "--node-dir", str(tmp_path), "--network-mode", "cni"]
    assert kubelet_main.main(base + ["--service-cidr", "10.96.0.0/12"]) == 0
    assert kubelet_main.main(base) == 0
    assert [o.network.service_cidr for o in started] == ["10.96.0.0/12", None]
    with pytest.raises(SystemExit):
        kubelet_main.main(base + ["--service-cidr", "10.96.0.1/12"])
    assert "--service-cidr" in capsys.readouterr().err


def test_wire_curve_dir_presents_the_nodes_curve_keys(started, tmp_path, capsys):
    from kubemu import wirekeys
    from kubemu._wire_auth import CurveCredentials

    base = ["--node", "w1", "--node-dir", str(tmp_path / "n"), "--api", "tcp://198.18.0.1:6444"]
    curve = wirekeys.curve_dir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        kubelet_main.main(base + ["--wire-curve-dir", str(curve)])
    assert exit_.value.code == 2 and not started
    assert "--wire-curve-dir: no CURVE key file" in capsys.readouterr().err
    server = wirekeys.ensure_server_keys(tmp_path)
    node = wirekeys.ensure_client_keys(tmp_path, "system:node:w1")
    assert kubelet_main.main(base + ["--wire-curve-dir", str(curve)]) == 0
    assert started[0].api_credentials == CurveCredentials(server.public, node.public, node.secret)
    secret = tmp_path / "system:node:w1.secret"
    secret.write_text("s3cret\n")
    with pytest.raises(SystemExit):
        kubelet_main.main(base + ["--wire-curve-dir", str(curve), "--wire-credentials", str(secret)])
    assert "--wire-curve-dir and --wire-credentials: give one" in capsys.readouterr().err
