"""TokenRequest, TokenReview and SelfSubjectReview against a fake API (the handlers' get)."""
from __future__ import annotations

import asyncio

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from components.apiserver import caller
from components.apiserver.authn import (Authenticator, bound_object_lookup,
                                        service_account_lookup)
from components.apiserver.tokens import Tokens
from kubemu import serviceaccount_token as satoken
from kubemu.api.identity import authenticated
from kubemu.wire import BadRequest, Conflict, Invalid, NotFound

ISSUER = satoken.DEFAULT_ISSUER
NOW = 1_800_000_000.0


class FakeAPI:
    """handlers.API's get, over a dict of objects."""

    def __init__(self):
        self.objects = {
            ("serviceaccounts", "team", "builder"): {"metadata": {"name": "builder", "uid": "sa-uid"}},
            ("pods", "team", "web"): {"metadata": {"name": "web", "uid": "pod-uid"},
                                      "spec": {"serviceAccountName": "builder"}},
            ("pods", "team", "plain"): {"metadata": {"name": "plain", "uid": "p2"}, "spec": {}},
            ("secrets", "team", "s"): {"metadata": {"name": "s", "uid": "secret-uid"}},
        }

    async def get(self, resource, name, namespace=None):
        obj = self.objects.get((resource, namespace, name))
        if obj is None:
            raise NotFound(f'{resource} "{name}" not found')
        return obj


@pytest.fixture(scope="module")
def key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def api():
    return FakeAPI()


@pytest.fixture
def tokens(tmp_path, key, api):
    (tmp_path / "sa.pub").write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))

    clock = lambda: NOW  # noqa: E731
    authn = Authenticator(None, [str(tmp_path / "sa.pub")], ISSUER, service_account_lookup(api),
                          bound_lookup=bound_object_lookup(api), clock=clock)
    return Tokens(api, satoken.Signer(key, ISSUER), authn, clock=clock)


def run(coro):
    return asyncio.run(coro)


def request(spec=None, **meta):
    """What `kubectl create token` sends (nulls included)."""
    return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": None, **meta},
            "spec": {"audiences": None, "expirationSeconds": None, "boundObjectRef": None,
                     **(spec or {})},
            "status": {"token": "", "expirationTimestamp": None}}


def verify(key, token, audiences=(ISSUER,)):
    return satoken.verify(token, [key.public_key()], ISSUER, audiences=audiences, now=NOW)


# --- TokenRequest -----------------------------------------------------------------------------

def test_a_token_request_defaults_to_the_issuer_and_an_hour(tokens, key):
    answer = run(tokens.token_request("builder", request(), "team"))
    assert answer["kind"] == "TokenRequest" and answer["apiVersion"] == "authentication.k8s.io/v1"
    assert answer["metadata"] == {"name": "builder", "namespace": "team",
                                  "creationTimestamp": "2027-01-15T08:00:00Z"}
    assert answer["spec"] == {"audiences": [ISSUER], "expirationSeconds": 3600,
                              "boundObjectRef": None}
    assert answer["status"]["expirationTimestamp"] == "2027-01-15T09:00:00Z"
    verified = verify(key, answer["status"]["token"])
    assert (verified.namespace, verified.name, verified.uid) == ("team", "builder", "sa-uid")


def test_a_token_request_without_a_body_is_the_default_one(tokens, key):
    assert verify(key, run(tokens.token_request("builder", None, "team"))["status"]["token"])


def test_audiences_and_expiration_are_the_requests(tokens, key):
    answer = run(tokens.token_request("builder", request(
        {"audiences": ["vault"], "expirationSeconds": 600}), "team"))
    assert answer["status"]["expirationTimestamp"] == "2027-01-15T08:10:00Z"
    assert verify(key, answer["status"]["token"], ("vault",)).audiences == ("vault",)


@pytest.mark.parametrize("seconds, message", [
    (599, "TokenRequest.authentication.k8s.io \"builder\" is invalid: spec.expirationSeconds: "
          "Invalid value: 599: may not specify a duration less than 10 minutes"),
    (2 ** 32 + 1, "may not specify a duration larger than 2^32 seconds"),
    ("long", "spec.expirationSeconds: Invalid value: \"long\": must be an integer"),
])
def test_a_bad_expiration_is_invalid(tokens, seconds, message):
    with pytest.raises(Invalid) as err:
        run(tokens.token_request("builder", request({"expirationSeconds": seconds}), "team"))
    assert message in err.value.message


def test_metadata_must_match_the_service_account(tokens):
    with pytest.raises(Invalid, match="metadata.name: Invalid value: \"other\": must match the "
                                      "service account name if specified"):
        run(tokens.token_request("builder", request(name="other"), "team"))


def test_the_service_account_must_exist(tokens):
    with pytest.raises(NotFound, match='serviceaccounts "ghost" not found'):
        run(tokens.token_request("ghost", request(), "team"))


def test_a_request_of_another_kind_is_refused(tokens):
    with pytest.raises(BadRequest, match="kind"):
        run(tokens.token_request("builder", dict(request(), kind="Pod"), "team"))
    with pytest.raises(BadRequest, match="must be a map"):
        run(tokens.token_request("builder", ["x"], "team"))


def test_a_token_bound_to_a_pod_names_it(tokens, key):
    ref = {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": "pod-uid"}
    answer = run(tokens.token_request("builder", request({"boundObjectRef": ref}), "team"))
    assert answer["spec"]["boundObjectRef"] == ref
    assert verify(key, answer["status"]["token"]).pod == ("web", "pod-uid")


def test_a_token_bound_to_a_secret(tokens, key):
    ref = {"kind": "Secret", "apiVersion": "v1", "name": "s"}
    answer = run(tokens.token_request("builder", request({"boundObjectRef": ref}), "team"))
    verified = verify(key, answer["status"]["token"])
    assert (verified.pod, verified.secret) == (None, ("s", "secret-uid"))


def test_the_bound_object_must_be_the_current_one(tokens):
    ref = {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": "old-uid"}
    with pytest.raises(Conflict, match=r'Operation cannot be fulfilled on Pod "web": the UID in the '
                                       r"bound object reference \(old-uid\) does not match"):
        run(tokens.token_request("builder", request({"boundObjectRef": ref}), "team"))
    with pytest.raises(NotFound, match='pods "gone" not found'):
        run(tokens.token_request("builder", request({"boundObjectRef": dict(ref, name="gone")}),
                                 "team"))


def test_a_pod_of_another_service_account_cannot_hold_the_token(tokens):
    ref = {"kind": "Pod", "apiVersion": "v1", "name": "plain"}
    with pytest.raises(BadRequest, match='cannot bind token for serviceaccount "builder" to pod '
                                         "running with different serviceaccount name."):
        run(tokens.token_request("builder", request({"boundObjectRef": ref}), "team"))


def test_a_token_binds_only_to_pods_and_secrets(tokens):
    ref = {"kind": "Deployment", "apiVersion": "apps/v1", "name": "web"}
    with pytest.raises(BadRequest, match="cannot bind token to object of type apps/v1, Kind=Deployment"):
        run(tokens.token_request("builder", request({"boundObjectRef": ref}), "team"))


# --- TokenReview ------------------------------------------------------------------------------

def review(token, audiences=None):
    spec = {"token": token}
    if audiences is not None:
        spec["audiences"] = audiences
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}


def test_a_review_of_a_good_token_shows_its_user(tokens):
    token = run(tokens.token_request("builder", request(), "team"))["status"]["token"]
    answer = run(tokens.token_review(review(token)))
    assert answer["kind"] == "TokenReview"
    assert answer["spec"] == {"token": token}
    status = answer["status"]
    assert status["authenticated"] is True
    assert status["audiences"] == [ISSUER]
    assert status["user"]["username"] == "system:serviceaccount:team:builder"
    assert status["user"]["uid"] == "sa-uid"
    assert status["user"]["groups"] == ["system:serviceaccounts", "system:serviceaccounts:team",
                                        "system:authenticated"]
    assert list(status["user"]["extra"]) == ["authentication.kubernetes.io/credential-id"]


def test_a_review_for_other_audiences(tokens):
    token = run(tokens.token_request("builder", request({"audiences": ["vault", "x"]}), "team"))
    token = token["status"]["token"]
    assert run(tokens.token_review(review(token, ["vault"])))["status"]["audiences"] == ["vault"]
    refused = run(tokens.token_review(review(token)))["status"]
    assert refused == {"user": {}, "error": f'token audiences ["vault" "x"] is invalid for the '
                                           f'target audiences ["{ISSUER}"]'}


def test_a_review_of_a_bad_token_says_why(tokens, api):
    token = run(tokens.token_request("builder", request(), "team"))["status"]["token"]
    del api.objects[("serviceaccounts", "team", "builder")]
    assert run(tokens.token_review(review(token)))["status"] == {
        "user": {}, "error": 'serviceaccounts "builder" not found'}
    assert run(tokens.token_review(review("garbage")))["status"]["error"] == "invalid bearer token"


@pytest.mark.parametrize("resource,kind,name", [("pods", "Pod", "web"),
                                                ("secrets", "Secret", "s")])
def test_a_review_of_a_token_whose_bound_object_is_gone(tokens, api, resource, kind, name):
    ref = {"kind": kind, "apiVersion": "v1", "name": name}
    token = run(tokens.token_request("builder", request({"boundObjectRef": ref}), "team"))
    token = token["status"]["token"]
    assert run(tokens.token_review(review(token)))["status"]["authenticated"] is True
    del api.objects[(resource, "team", name)]
    assert run(tokens.token_review(review(token)))["status"] == {
        "user": {}, "error": "service account token has been invalidated"}


def test_a_review_needs_a_token(tokens):
    with pytest.raises(BadRequest, match="token is required for TokenReview in authentication"):
        run(tokens.token_review(review("")))
    with pytest.raises(Invalid, match="spec.token: Invalid value: 5: must be a string"):
        run(tokens.token_review(review(5)))


# --- SelfSubjectReview ------------------------------------------------------------------------

def test_a_self_subject_review_shows_the_caller(tokens):
    async def whoami():
        caller.current.set(authenticated("alice", ["dev"], "u-1", {"k": ("v",)}))
        return await tokens.self_subject_review({"apiVersion": "authentication.k8s.io/v1",
                                                 "kind": "SelfSubjectReview"})
    answer = run(whoami())
    assert answer["kind"] == "SelfSubjectReview"
    assert answer["status"] == {"userInfo": {"username": "alice", "uid": "u-1",
                                             "groups": ["dev", "system:authenticated"],
                                             "extra": {"k": ["v"]}}}


def test_a_self_subject_review_without_a_caller_is_refused(tokens):
    with pytest.raises(BadRequest, match="no user present on request"):
        run(tokens.self_subject_review(None))
