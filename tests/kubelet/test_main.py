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
