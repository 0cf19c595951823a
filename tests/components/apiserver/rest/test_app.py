"""The REST API over HTTPS against a real store and apiserver process: authentication,
authorization, every verb, bodies, Table printing, watch, logs, and bad input (the server keeps
serving, with no traceback in its log)."""
from __future__ import annotations

import json
import time
from urllib.parse import quote

from tests.conftest import DEADLINE, wait_for

from . import https  # noqa: F401  (a fixture)

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def pod(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "100"]}]}}


def namespace(env, name: str) -> str:
    code, body = env.json("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    assert code == 201, body
    return f"/api/v1/namespaces/{name}"


def no_traceback(env) -> None:
    assert "Traceback" not in env.log_text(), env.log_text()


# --- who is asking

def test_public_paths_are_open_and_the_rest_is_anonymous_to_rbac(https):  # noqa: F811
    code, _, body = https.request("GET", "/version", user=None)
    assert code == 200 and json.loads(body)["minor"] == "32"
    assert https.request("GET", "/healthz", user=None)[2] == b"ok"
    code, _, body = https.request("GET", "/readyz?verbose", user=None)
    assert code == 200 and body.decode().splitlines() == ["[+]ping ok", "[+]etcd ok", "[+]ready ok",
                                                          "readyz check passed"]
    assert https.request("GET", "/livez/ping", user=None)[2] == b"ok"
    code, body = https.json("GET", "/api/v1/namespaces/default/pods", user=None)
    assert code == 403 and body["reason"] == "Forbidden" and body["kind"] == "Status"
    assert body["message"] == ('pods is forbidden: User "system:anonymous" cannot list resource "pods" in '
                               'API group "" in the namespace "default"')


def test_a_user_without_bindings_is_refused_in_kubernetes_words(https):  # noqa: F811
    code, body = https.json("GET", "/api/v1/namespaces/default/pods", user="jane")
    assert code == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('pods is forbidden: User "jane" cannot list resource "pods" in API group "" '
                               'in the namespace "default"')
    code, body = https.json("GET", "/api/v1/namespaces/default/pods/web/log", user="jane")
    assert body["message"] == ('pods "web" is forbidden: User "jane" cannot get resource "pods/log" in API '
                               'group "" in the namespace "default"')


def test_a_namespace_path_under_another_namespace_is_404(https):  # noqa: F811
    """A Role in "nsfoo" that grants on namespaces covers nsfoo itself and nothing else: a
    cluster-scoped resource under /namespaces/<ns>/ names nothing (kube-apiserver's 404)."""
    namespace(https, "nsfoo")
    namespace(https, "nsbar")
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "ns-reader"},
            "rules": [{"apiGroups": [""], "resources": ["namespaces", "namespaces/status"],
                       "verbs": ["get", "list", "watch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "jane"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ns-reader"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}]}
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/nsfoo"
    assert https.json("POST", f"{rbac}/roles", role)[0] == 201
    assert https.json("POST", f"{rbac}/rolebindings", binding)[0] == 201
    wait_for(lambda: https.json("GET", "/api/v1/namespaces/nsfoo", user="jane")[0] == 200,
             message="jane's RoleBinding to take effect")
    assert https.json("GET", "/api/v1/namespaces/nsfoo/status", user="jane")[0] == 200
    assert https.json("GET", "/api/v1/namespaces/nsbar", user="jane")[0] == 403
    for path in ("/api/v1/namespaces/nsfoo/namespaces/nsbar", "/api/v1/namespaces/nsfoo/namespaces",
                 "/api/v1/namespaces/nsfoo/namespaces?watch=1", "/api/v1/watch/namespaces/nsfoo/namespaces",
                 "/api/v1/namespaces/nsfoo/namespaces/nsbar/status"):
        for user in ("jane", "admin"):
            code, body = https.json("GET", path, user=user)
            assert code == 404 and body["reason"] == "NotFound", (path, user, body)


def test_impersonation_is_refused(https):  # noqa: F811
    for header in ("Impersonate-User", "Impersonate-Group", "Impersonate-Uid", "Impersonate-Extra-scopes"):
        code, body = https.json("GET", "/api/v1/namespaces/default/pods", headers={header: "jane"})
        assert code == 403 and body["reason"] == "Forbidden", (header, body)
        assert body["message"] == "impersonation (Impersonate-* headers, kubectl --as) is not supported by kubemu"


def test_audit_names_the_authenticated_user(https):  # noqa: F811
    base = namespace(https, "audited")
    assert https.json("POST", f"{base}/pods", pod("a1"))[0] == 201
    records = [json.loads(line) for line in https.audit_path.read_text().splitlines()]
    mine = [r for r in records if r.get("name") == "a1"]
    assert mine and mine[-1]["user"] == "kubernetes-admin" and mine[-1]["code"] == 201


def test_audit_records_the_user_agent_header(https):  # noqa: F811
    base = namespace(https, "agents")
    agent = {"User-Agent": "kubectl/v1.30.0 (linux/amd64)"}
    assert https.json("POST", f"{base}/pods", pod("ua"), headers=agent)[0] == 201
    assert https.json("POST", f"{base}/pods", pod("none"))[0] == 201
    records = {r.get("name"): r for r in map(json.loads, https.audit_path.read_text().splitlines())}
    assert records["ua"]["userAgent"] == "kubectl/v1.30.0 (linux/amd64)"
    assert "userAgent" not in records["none"]


# --- verbs

def test_create_get_list_update_delete(https):  # noqa: F811
    base = namespace(https, "crud")
    code, created = https.json("POST", f"{base}/pods", pod("web", {"app": "web"}))
    assert code == 201 and created["metadata"]["namespace"] == "crud"
    code, again = https.json("POST", f"{base}/pods", pod("web"))
    assert code == 409 and again["reason"] == "AlreadyExists" and again["details"] == {"name": "web", "kind": "pods"}
    code, got = https.json("GET", f"{base}/pods/web")
    assert code == 200 and got["metadata"]["uid"] == created["metadata"]["uid"]
    assert https.json("GET", f"{base}/pods/nope")[1]["message"] == 'pods "nope" not found'
    https.json("POST", f"{base}/pods", pod("other", {"app": "other"}))
    code, listed = https.json("GET", f"{base}/pods?labelSelector=app%3Dweb")
    assert code == 200 and [p["metadata"]["name"] for p in listed["items"]] == ["web"]
    code, listed = https.json("GET", f"{base}/pods?fieldSelector=metadata.name%3Dother")
    assert [p["metadata"]["name"] for p in listed["items"]] == ["other"]
    got["metadata"]["labels"]["v"] = "2"
    code, updated = https.json("PUT", f"{base}/pods/web", got)
    assert code == 200 and updated["metadata"]["labels"]["v"] == "2"
    code, stale = https.json("PUT", f"{base}/pods/web", got)
    assert code == 409 and stale["reason"] == "Conflict"
    code, wrong = https.json("PUT", f"{base}/pods/other", updated)
    assert code == 400 and "does not match the name on the URL" in wrong["message"]
    code, pre = https.json("DELETE", f"{base}/pods/web", {"preconditions": {"uid": "not-it"}})
    assert code == 409 and "Precondition failed" in pre["message"]
    code, _ = https.json("DELETE", f"{base}/pods/web", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                        "gracePeriodSeconds": 0, "propagationPolicy": "Background"})
    assert code == 200
    assert https.json("GET", f"{base}/pods/web")[0] == 404
    code, bad = https.json("DELETE", f"{base}/pods/other?propagationPolicy=Sideways")
    assert code == 400 and "propagationPolicy" in bad["message"]


def test_pagination_with_limit_and_continue(https):  # noqa: F811
    base = namespace(https, "pages")
    for i in range(5):
        https.json("POST", f"{base}/pods", pod(f"p{i}"))
    names, token = [], ""
    while True:
        code, page = https.json("GET", f"{base}/pods?limit=2" + (f"&continue={quote(token)}" if token else ""))
        assert code == 200 and len(page["items"]) <= 2
        names += [p["metadata"]["name"] for p in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
    assert names == [f"p{i}" for i in range(5)]


def test_patch_types_and_server_side_apply_refused(https):  # noqa: F811
    base = namespace(https, "patches")
    https.json("POST", f"{base}/pods", pod("pt"))
    for ctype, body, label in [
            ("application/merge-patch+json", {"metadata": {"labels": {"m": "1"}}}, "m"),
            ("application/strategic-merge-patch+json", {"metadata": {"labels": {"s": "1"}}}, "s"),
            ("application/json-patch+json", [{"op": "add", "path": "/metadata/labels/j", "value": "1"}], "j")]:
        code, patched = https.json("PATCH", f"{base}/pods/pt", body, {"Content-Type": ctype})
        assert code == 200 and patched["metadata"]["labels"][label] == "1", patched
    code, ssa = https.json("PATCH", f"{base}/pods/pt?fieldManager=kubectl", {"metadata": {}},
                           {"Content-Type": "application/apply-patch+yaml"})
    assert code == 415 and ssa["reason"] == "UnsupportedMediaType"
    assert "server-side apply is not supported by kubemu" in ssa["message"]
    code, bad = https.json("PATCH", f"{base}/pods/pt", [{"op": "test", "path": "/metadata/name", "value": "x"}],
                           {"Content-Type": "application/json-patch+json"})
    assert code in (400, 422) and bad["kind"] == "Status"


def test_scale_subresource_get_put_patch(https):  # noqa: F811
    base = namespace(https, "scaling").replace("/api/v1", "/apis/apps/v1")
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    assert https.json("POST", f"{base}/deployments", dep)[0] == 201
    code, scale = https.json("GET", f"{base}/deployments/d/scale")
    assert code == 200 and scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1
    code, scale = https.json("PATCH", f"{base}/deployments/d/scale", {"spec": {"replicas": 3}},
                             {"Content-Type": "application/merge-patch+json"})
    assert code == 200 and scale["spec"]["replicas"] == 3
    scale["spec"]["replicas"] = 2
    code, scale = https.json("PUT", f"{base}/deployments/d/scale", scale)
    assert code == 200 and scale["spec"]["replicas"] == 2
    assert https.json("GET", f"{base}/deployments/d")[1]["spec"]["replicas"] == 2


def test_scale_put_follows_the_scale_rules(https):  # noqa: F811
    """The whole Scale goes to update_scale, as on the wire: an empty Scale scales to 0 and
    unknown fields are refused under fieldValidation=Strict."""
    base = namespace(https, "scalerules").replace("/api/v1", "/apis/apps/v1")
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {"labels": {"app": "d"}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    assert https.json("POST", f"{base}/deployments", dep)[0] == 201
    code, strict = https.json("PUT", f"{base}/deployments/d/scale?fieldValidation=Strict",
                              {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"},
                               "spec": {"replicas": 1, "bogus": True}})
    assert code == 400 and "bogus" in strict["message"], strict
    assert https.json("GET", f"{base}/deployments/d")[1]["spec"]["replicas"] == 2
    code, scale = https.json("PUT", f"{base}/deployments/d/scale",
                             {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"}})
    assert code == 200 and scale["spec"].get("replicas", 0) == 0, scale
    assert https.json("GET", f"{base}/deployments/d")[1]["spec"]["replicas"] == 0
    no_traceback(https)


def test_dry_run_creates_nothing(https):  # noqa: F811
    base = namespace(https, "dry")
    code, obj = https.json("POST", f"{base}/pods?dryRun=All", pod("ghost"))
    assert code == 201 and obj["metadata"]["name"] == "ghost"
    assert https.json("GET", f"{base}/pods/ghost")[0] == 404
    code, bad = https.json("POST", f"{base}/pods?dryRun=Some", pod("ghost"))
    assert code == 400 and 'dryRun: Unsupported value: "Some"' in bad["message"]


def test_yaml_bodies_and_answers(https):  # noqa: F811
    base = namespace(https, "yamls")
    body = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: y\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
    code, _, data = https.request("POST", f"{base}/pods", body, {"Content-Type": "application/yaml",
                                                                "Accept": "application/yaml"})
    assert code == 201 and b"name: y\n" in data and not data.startswith(b"{")


def test_table_answers_for_lists_items_and_kinds_without_printers(https):  # noqa: F811
    base = namespace(https, "tables")
    https.json("POST", f"{base}/pods", pod("t1"))
    code, table = https.json("GET", f"{base}/pods", headers={"Accept": TABLE})
    assert code == 200 and table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]][:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    row = table["rows"][0]
    assert row["cells"][:3] == ["t1", "0/1", "Pending"]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "t1"
    assert table["metadata"]["resourceVersion"]
    code, one = https.json("GET", f"{base}/pods/t1?includeObject=Object", headers={"Accept": TABLE})
    assert len(one["rows"]) == 1 and one["rows"][0]["object"]["kind"] == "Pod"
    code, sas = https.json("GET", "/api/v1/namespaces/default/configmaps", headers={"Accept": TABLE})
    assert code == 200 and [c["name"] for c in sas["columnDefinitions"]] == ["Name", "Age"]
    code, _, _ = https.request("GET", f"{base}/pods", headers={"Accept": "application/vnd.kubernetes.protobuf"})
    assert code == 406


def test_unknown_paths_are_404_status(https):  # noqa: F811
    for path in ("/api/v1/foos", "/apis/apps/v1/namespaces/default/pods", "/nothing/here", "/api/v1/watch"):
        code, body = https.json("GET", path)
        assert code == 404 and body["kind"] == "Status" and body["reason"] == "NotFound", (path, body)


# --- watch

def _watch(env, path: str, headers: dict | None = None, timeout: float = DEADLINE):
    conn = env.connection(timeout=timeout)
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    return conn, resp


def test_watch_streams_events_and_ends_at_timeout_seconds(https):  # noqa: F811
    base = namespace(https, "watching")
    rv = https.json("GET", f"{base}/pods")[1]["metadata"]["resourceVersion"]
    conn, resp = _watch(https, f"{base}/pods?watch=1&resourceVersion={rv}&timeoutSeconds=5")
    try:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("application/json")
        assert resp.headers.get("Transfer-Encoding") == "chunked"
        https.json("POST", f"{base}/pods", pod("w1"))
        event = json.loads(resp.readline())
        assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "w1"
        https.json("DELETE", f"{base}/pods/w1?gracePeriodSeconds=0")
        assert json.loads(resp.readline())["type"] in ("MODIFIED", "DELETED")
        started = time.monotonic()
        while resp.readline():  # until the server ends the stream (timeoutSeconds)
            assert time.monotonic() - started < DEADLINE
    finally:
        conn.close()


def test_watch_under_table_and_with_bookmarks(https):  # noqa: F811
    base = namespace(https, "watchtable")
    rv = https.json("GET", f"{base}/pods")[1]["metadata"]["resourceVersion"]
    conn, resp = _watch(https, f"{base}/pods?watch=true&resourceVersion={rv}&allowWatchBookmarks=true",
                        {"Accept": TABLE})
    try:
        https.json("POST", f"{base}/pods", pod("wt"))
        seen = []
        while not any(e["type"] == "BOOKMARK" for e in seen) or not any(e["type"] == "ADDED" for e in seen):
            seen.append(json.loads(resp.readline()))
        added = next(e for e in seen if e["type"] == "ADDED")["object"]
        assert added["kind"] == "Table" and len(added["rows"]) == 1 and added["rows"][0]["cells"][0] == "wt"
        bookmark = next(e for e in seen if e["type"] == "BOOKMARK")["object"]
        assert bookmark["metadata"]["resourceVersion"]
    finally:
        conn.close()


def test_watch_errors_before_the_stream_are_http_errors(https):  # noqa: F811
    code, body = https.json("GET", "/api/v1/pods?watch=1&labelSelector=a%3D%3D%3Db")
    assert code == 400 and body["kind"] == "Status"


def test_a_watch_by_name_watches_only_that_name(https):  # noqa: F811
    base = namespace(https, "watchname").replace("/api/v1/", "/api/v1/watch/")
    code, body = https.json("GET", f"{base}/pods/allowed?fieldSelector=metadata.name%21%3Dallowed")
    assert code == 400 and body["message"] == "fieldSelector metadata.name doesn't match requested name", body
    code, body = https.json("GET", f"{base}/pods/allowed?fieldSelector=metadata.name%3Dother")
    assert code == 400 and body["reason"] == "BadRequest"
    code, body = https.json("GET", f"{base}/pods/allowed/status")
    assert code == 404 and body["reason"] == "NotFound"
    plain = base.replace("/watch/", "/")
    rv = https.json("GET", f"{plain}/pods")[1]["metadata"]["resourceVersion"]
    conn, resp = _watch(https, f"{base}/pods/allowed?fieldSelector=metadata.name%3Dallowed&resourceVersion={rv}")
    try:
        assert resp.status == 200
        https.json("POST", f"{plain}/pods", pod("other"))
        https.json("POST", f"{plain}/pods", pod("allowed"))
        event = json.loads(resp.readline())
        assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "allowed"
    finally:
        conn.close()


def test_watch_from_a_compacted_revision_is_an_expired_event(https):  # noqa: F811
    conn, resp = _watch(https, "/api/v1/pods?watch=1&resourceVersion=1")
    try:
        assert resp.status == 200
        event = json.loads(resp.readline())
        if event["type"] == "ERROR":  # the store still holds revision 1 unless compacted
            assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    finally:
        conn.close()


def test_client_going_away_ends_its_watch(https):  # noqa: F811
    for _ in range(20):
        conn, resp = _watch(https, "/api/v1/pods?watch=1")
        assert resp.status == 200
        conn.close()
    assert https.request("GET", "/healthz")[2] == b"ok"
    no_traceback(https)


# --- logs

def _bound_pod_with_log(env, base: str, name: str, text: str) -> tuple[dict, object]:
    code, created = env.json("POST", f"{base}/pods", pod(name))
    assert code == 201
    ns = created["metadata"]["namespace"]
    assert env.json("POST", f"{base}/pods/{name}/binding",
                    {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                     "target": {"kind": "Node", "name": "node-9"}})[0] == 201
    d = env.dir / "nodes" / "node-9" / "pods" / f"{ns}_{name}_{created['metadata']['uid']}" / "c"
    d.mkdir(parents=True)
    (d / "0.log").write_text(text)
    return created, d


def test_logs_plain_tail_limit_and_timestamps(https):  # noqa: F811
    base = namespace(https, "logs")
    _bound_pod_with_log(https, base, "talker", "one\ntwo\nthree\n")
    code, headers, body = https.request("GET", f"{base}/pods/talker/log")
    assert code == 200 and body == b"one\ntwo\nthree\n" and headers["Content-Type"].startswith("text/plain")
    assert https.request("GET", f"{base}/pods/talker/log?tailLines=2")[2] == b"two\nthree\n"
    assert https.request("GET", f"{base}/pods/talker/log?limitBytes=5")[2] == b"one\nt"
    stamped = https.request("GET", f"{base}/pods/talker/log?timestamps=true")[2].decode().splitlines()
    assert [line.split(" ", 1)[1] for line in stamped] == ["one", "two", "three"]
    assert all(line.split(" ")[0].endswith("Z") for line in stamped)
    code, body = https.json("GET", f"{base}/pods/talker/log?container=nope")
    assert code == 400 and body["message"] == "container nope is not valid for pod talker"


def test_logs_follow_streams_until_the_container_ends(https):  # noqa: F811
    base = namespace(https, "follow")
    _, d = _bound_pod_with_log(https, base, "chatty", "first\n")
    conn, resp = _watch(https, f"{base}/pods/chatty/log?follow=true")
    try:
        assert resp.status == 200 and resp.readline() == b"first\n"
        with open(d / "0.log", "a") as f:
            f.write("second\n")
        assert resp.readline() == b"second\n"
        (d / "0.exit.json").write_text("{}")
        assert resp.read() == b""  # the stream ends
    finally:
        conn.close()


# --- bad input

def test_bad_bodies_get_a_status_and_the_server_keeps_serving(https):  # noqa: F811
    base = namespace(https, "garbage")
    cases = [
        ({"Content-Type": "application/json"}, b"{not json", 400),
        ({"Content-Type": "text/plain"}, b"hello", 415),
        ({"Content-Type": "application/yaml"}, b"a: [", 400),
        ({"Content-Type": "application/json"}, b"[" * 5000 + b"]" * 5000, 400),
        ({"Content-Type": "application/json"}, b'"just a string"', 400),
        ({"Content-Type": "application/json"}, b"\xff\xfe\xfd", 400),
        ({"Content-Type": "application/vnd.kubernetes.protobuf"}, b"k8s\x00\n\x03\n\x01", 400),
    ]
    for headers, body, want in cases:
        code, _, data = https.request("POST", f"{base}/pods", body, headers)
        status = json.loads(data)
        assert (code, status["kind"], status["code"]) == (want, "Status", want), (body[:20], data)
    big = b'{"metadata": {"name": "big"}, "x": "' + b"a" * (4 * 1024 * 1024) + b'"}'
    code, _, data = https.request("POST", f"{base}/pods", big, {"Content-Type": "application/json"})
    assert code in (413, 0)  # the server may answer, or close as it refuses the rest of the body
    if code:
        assert json.loads(data)["reason"] == "RequestEntityTooLarge"
    assert https.request("GET", "/healthz")[2] == b"ok"
    no_traceback(https)


def test_garbage_http_is_refused_without_a_traceback(https):  # noqa: F811
    import socket
    import ssl
    for junk in (b"NOT HTTP AT ALL\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X: " + b"a" * 70000 + b"\r\n\r\n",
                 b"\x00\x01\x02\x03" * 100):
        with socket.create_connection(("127.0.0.1", https.port), timeout=DEADLINE) as raw:
            with https.context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(junk)
                try:
                    tls.recv(4096)
                except (OSError, ssl.SSLError):
                    pass
    with socket.create_connection(("127.0.0.1", https.port), timeout=DEADLINE) as raw:
        raw.sendall(b"GET / HTTP/1.1\r\n\r\n")  # plain HTTP on the TLS port
        try:
            raw.recv(4096)
        except OSError:
            pass
    wait_for(lambda: https.request("GET", "/healthz")[2] == b"ok")
    no_traceback(https)


def test_many_connections_at_once(https):  # noqa: F811
    conns = []
    try:
        for _ in range(50):
            c = https.connection()
            c.connect()
            conns.append(c)
        assert https.request("GET", "/healthz")[2] == b"ok"
    finally:
        for c in conns:
            c.close()


# --- more verbs

def test_field_validation_warn_answers_warning_headers(https):  # noqa: F811
    base = namespace(https, "warned")
    body = pod("wv")
    body["spec"]["bogus"] = 1
    code, headers, data = https.request("POST", f"{base}/pods?fieldValidation=Warn", body)
    assert code == 201, data
    warnings = headers.get_all("Warning")
    assert warnings and all(w.startswith('299 - "') for w in warnings) and any("bogus" in w for w in warnings)
    code, strict = https.json("POST", f"{base}/pods?fieldValidation=Strict", {**body, "metadata": {"name": "ws"}})
    assert code == 400 and "bogus" in strict["message"]
    assert https.json("POST", f"{base}/pods?fieldValidation=Loose", body)[0] == 400


def test_delete_collection_binding_and_eviction(https):  # noqa: F811
    base = namespace(https, "collection")
    for name, app in (("c1", "x"), ("c2", "x"), ("c3", "y")):
        https.json("POST", f"{base}/pods", pod(name, {"app": app}))
    code, deleted = https.json("DELETE", f"{base}/pods?labelSelector=app%3Dx")
    assert code == 200 and sorted(p["metadata"]["name"] for p in deleted["items"]) == ["c1", "c2"]
    names = [p["metadata"]["name"] for p in https.json("GET", f"{base}/pods")[1]["items"]]
    assert "c3" in names
    code, bound = https.json("POST", f"{base}/pods/c3/binding",
                             {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "c3"},
                              "target": {"kind": "Node", "name": "node-1"}})
    assert code == 201 and bound["status"] == "Success"
    assert https.json("GET", f"{base}/pods/c3")[1]["spec"]["nodeName"] == "node-1"
    code, evicted = https.json("POST", f"{base}/pods/c3/eviction",
                               {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "c3"},
                                "deleteOptions": {"gracePeriodSeconds": 0}})
    assert code == 201 and evicted["status"] == "Success", evicted
    wait_for(lambda: https.json("GET", f"{base}/pods/c3")[0] == 404, message="the evicted pod to be gone")


def test_bad_query_values_are_400(https):  # noqa: F811
    for path in ("/readyz?verbose=maybe", "/api/v1/pods?limit=lots", "/api/v1/pods?includeObject=All",
                 "/api/v1/namespaces/default/pods/x/log?tailLines=-1"):
        code, body = https.json("GET", path)
        assert code == 400 and body["reason"] == "BadRequest", (path, body)
    no_traceback(https)
