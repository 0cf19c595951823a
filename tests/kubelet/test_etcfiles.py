"""/etc/hosts, /etc/hostname and /etc/resolv.conf as the kubelet writes them for a pod."""
import os

from kubelet import etcfiles

NODE_RESOLV = "# from the host\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nsearch lan corp\noptions edns0 ndots:1\n"


def pod(**spec):
    return {"metadata": {"name": "web-0", "namespace": "shop", "uid": "u1"},
            "spec": {"containers": [{"name": "app"}], **spec}}


LOCALHOST = ("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"
             "::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n"
             "fe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")


def test_hosts_names_the_pod_at_its_ip():
    assert etcfiles.hosts(pod(), ["10.244.1.5"]) == LOCALHOST + "10.244.1.5\tweb-0\n"


def test_hosts_with_hostname_subdomain_and_aliases():
    p = pod(hostname="db", subdomain="cluster",
            hostAliases=[{"ip": "1.2.3.4", "hostnames": ["a.example", "b.example"]}])
    assert etcfiles.hosts(p, ["10.244.1.5"]) == (
        LOCALHOST + "10.244.1.5\tdb.cluster.shop.svc.cluster.local\tdb\n"
        "\n# Entries added by HostAliases.\n1.2.3.4\ta.example\tb.example\n")


def test_a_host_network_pod_gets_the_nodes_hosts_file():
    text = etcfiles.hosts(pod(hostNetwork=True), ["10.0.0.1"], node_hosts="127.0.0.1 localhost\n")
    assert text == "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n"


def test_hostname_is_the_sandboxes():
    assert etcfiles.hostname(pod()) == "web-0\n"
    assert etcfiles.hostname(pod(hostname="db")) == "db\n"


def test_cluster_first_points_at_the_cluster_dns_with_the_namespaces_search_path():
    conf = etcfiles.resolv_conf(pod(), NODE_RESOLV, ["10.96.0.10"])
    assert conf.text == ("search shop.svc.cluster.local svc.cluster.local cluster.local lan corp\n"
                         "nameserver 10.96.0.10\noptions ndots:5\n")
    assert conf.warnings == []


def test_without_a_cluster_dns_cluster_first_falls_back_to_the_node_and_says_so():
    conf = etcfiles.resolv_conf(pod(), NODE_RESOLV, [])
    assert conf.text == "search lan corp\nnameserver 10.0.0.2\nnameserver 10.0.0.3\noptions edns0 ndots:1\n"
    assert conf.warnings == [("MissingClusterDNS", 'pod: "web-0_shop(u1)". kubelet does not have '
                              'ClusterDNS IP configured and cannot create Pod using "ClusterFirst" '
                              'policy. Falling back to "Default" policy.')]


def test_host_network_and_default_use_the_node_none_uses_dns_config_only():
    assert etcfiles.resolv_conf(pod(hostNetwork=True), NODE_RESOLV, ["10.96.0.10"]).text == \
        etcfiles.resolv_conf(pod(dnsPolicy="Default"), NODE_RESOLV, ["10.96.0.10"]).text == \
        "search lan corp\nnameserver 10.0.0.2\nnameserver 10.0.0.3\noptions edns0 ndots:1\n"
    assert etcfiles.resolv_conf(pod(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"),
                                NODE_RESOLV, ["10.96.0.10"]).text.startswith(
        "search shop.svc.cluster.local")
    none = pod(dnsPolicy="None", dnsConfig={"nameservers": ["1.1.1.1"], "searches": ["x.test"],
                                            "options": [{"name": "ndots", "value": "2"},
                                                        {"name": "rotate"}]})
    assert etcfiles.resolv_conf(none, NODE_RESOLV, ["10.96.0.10"]).text == \
        "search x.test\nnameserver 1.1.1.1\noptions ndots:2 rotate\n"


def test_dns_config_merges_and_the_limits_cut():
    p = pod(dnsConfig={"nameservers": ["10.96.0.10", "9.9.9.9", "8.8.8.8"],
                       "searches": ["lan", "extra"], "options": [{"name": "ndots", "value": "1"}]})
    conf = etcfiles.resolv_conf(p, NODE_RESOLV, ["10.96.0.10"])
    assert conf.text == ("search shop.svc.cluster.local svc.cluster.local cluster.local lan corp "
                         "extra\nnameserver 10.96.0.10\nnameserver 9.9.9.9\nnameserver 8.8.8.8\n"
                         "options ndots:1\n")
    many = pod(dnsPolicy="None", dnsConfig={"searches": [f"s{i}.test" for i in range(40)],
                                            "nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"]})
    conf = etcfiles.resolv_conf(many, "", [])
    assert conf.text.splitlines()[0].split() == ["search"] + [f"s{i}.test" for i in range(32)]
    assert conf.text.count("nameserver") == 3
    assert conf.warnings == [
        ("DNSConfigForming", "Nameserver limits were exceeded, some nameservers have been "
         "omitted, the applied nameserver line is: 1.1.1.1 2.2.2.2 3.3.3.3"),
        ("DNSConfigForming", "Search Line limits were exceeded, some search paths have been "
         "omitted, the applied search line is: " + " ".join(f"s{i}.test" for i in range(32)))]


def test_search_domains_over_253_characters_are_dropped_and_the_line_cut_to_2048():
    long = "a" * 254
    conf = etcfiles.resolv_conf(pod(dnsPolicy="None", dnsConfig={
        "nameservers": ["1.1.1.1"], "searches": ["one.test", long, "two.test"]}), "", [])
    assert conf.text.splitlines()[0] == "search one.test two.test"
    assert conf.warnings == [("DNSConfigForming", "Search Line limits were exceeded, some search paths "
                              "have been omitted, the applied search line is: one.test two.test")]
    wide = [f"{i:02d}" + "b" * 98 for i in range(25)]  # 100 characters each: 20 fit in 2048 with spaces
    conf = etcfiles.resolv_conf(pod(dnsPolicy="None", dnsConfig={"nameservers": ["1.1.1.1"],
                                                                  "searches": wide}), "", [])
    assert conf.text.splitlines()[0] == "search " + " ".join(wide[:20])
    assert len(" ".join(wide[:21])) > etcfiles.MAX_SEARCH_CHARS >= len(" ".join(wide[:20]))


def test_the_node_file_is_read_as_the_kubelet_reads_it():
    node = ("  # a comment\nnameserver 10.0.0.2\ndomain ignored.test\nsearch old.test\n"
            "search lan. . corp\noptions ndots:2\noptions edns0\nnameserver 10.0.0.3\n")
    assert etcfiles.resolv_conf(pod(dnsPolicy="Default"), node, []).text == \
        "search lan corp\nnameserver 10.0.0.2\nnameserver 10.0.0.3\noptions edns0\n"


def test_the_cluster_search_path_is_not_repeated_and_absent_without_a_cluster_domain():
    node = "nameserver 10.0.0.2\nsearch cluster.local lan\n"
    assert etcfiles.resolv_conf(pod(), node, ["10.96.0.10"]).text.splitlines()[0] == \
        "search shop.svc.cluster.local svc.cluster.local cluster.local lan"
    assert etcfiles.resolv_conf(pod(), node, ["10.96.0.10", "10.96.0.11"], "").text == \
        "search cluster.local lan\nnameserver 10.96.0.10\nnameserver 10.96.0.11\noptions ndots:5\n"
    assert etcfiles.resolv_conf(pod(), node, ["10.96.0.10"], "k8s.test").text.splitlines()[0] == \
        "search shop.svc.k8s.test svc.k8s.test k8s.test cluster.local lan"


def test_a_dns_config_option_without_a_value_is_its_bare_name():
    p = pod(dnsConfig={"options": [{"name": "ndots", "value": ""}, {"name": "single-request"}]})
    assert etcfiles.resolv_conf(p, NODE_RESOLV, ["10.96.0.10"]).text.splitlines()[-1] == \
        "options ndots single-request"


def test_cluster_first_with_host_net_without_a_cluster_dns_is_the_nodes_and_says_so():
    conf = etcfiles.resolv_conf(pod(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"), NODE_RESOLV, [])
    assert conf.text == "search lan corp\nnameserver 10.0.0.2\nnameserver 10.0.0.3\noptions edns0 ndots:1\n"
    assert [reason for reason, _ in conf.warnings] == ["MissingClusterDNS"]
    # a hostNetwork pod's ClusterFirst is Default: nothing is missing
    assert etcfiles.resolv_conf(pod(hostNetwork=True), NODE_RESOLV, []).warnings == []


def test_write_is_in_place_so_a_bind_mount_sees_the_change(tmp_path):
    assert etcfiles.write(str(tmp_path), etcfiles.HOSTS, "a\n")
    inode = os.stat(tmp_path / etcfiles.HOSTS).st_ino
    assert not etcfiles.write(str(tmp_path), etcfiles.HOSTS, "a\n")
    assert etcfiles.write(str(tmp_path), etcfiles.HOSTS, "b\n")
    assert (tmp_path / etcfiles.HOSTS).read_text() == "b\n"
    assert os.stat(tmp_path / etcfiles.HOSTS).st_ino == inode
    assert oct(os.stat(tmp_path / etcfiles.HOSTS).st_mode & 0o777) == "0o644"
