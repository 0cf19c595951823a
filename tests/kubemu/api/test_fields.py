"""Field selectors: parsing, escaping, the apiserver's supported-field check, matching."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubemu.api.fields import (POD_FIELDS, FieldSelector, FieldSelectorError, Term, escape_value,
                               field_value, one_term_equal, parse_field_selector,
                               selector_from_set, supported_fields, unescape_value)

POD = {"metadata": {"name": "web", "namespace": "default"},
       "spec": {"nodeName": "node-1", "hostNetwork": False, "restartPolicy": "Always"},
       "status": {"phase": "Running", "podIP": "10.0.0.5"}}
PENDING = {"metadata": {"name": "new", "namespace": "default"}, "spec": {},
           "status": {"phase": "Pending"}}


@pytest.mark.parametrize("text, canonical", [
    ("", ""),
    ("metadata.name=web", "metadata.name=web"),
    ("metadata.name==web", "metadata.name=web"),
    ("metadata.name!=web", "metadata.name!=web"),
    ("status.phase=Running,spec.nodeName!=", "spec.nodeName!=,status.phase=Running"),
    ("metadata.name=x,spec.nodeName!=,status.phase=Running",
     "metadata.name=x,spec.nodeName!=,status.phase=Running"),
    ("metadata.name=a\\,b", "metadata.name=a\\,b"),
    ("metadata.name=a\\=b\\\\c", "metadata.name=a\\=b\\\\c"),
    ("metadata.name=x,,", "metadata.name=x"),
])
def test_parse_canonical(text, canonical):
    s = parse_field_selector(text, POD_FIELDS)
    assert str(s) == canonical
    assert parse_field_selector(canonical, POD_FIELDS) == FieldSelector(
        tuple(sorted(s.terms, key=str)))


def test_escaped_values():
    s = parse_field_selector("metadata.name=a\\,b\\=c\\\\d")
    assert s.terms == (Term("metadata.name", "=", "a,b=c\\d"),)


@pytest.mark.parametrize("text, obj, match", [
    ("", POD, True),
    ("metadata.name=web", POD, True),
    ("metadata.name=other", POD, False),
    ("metadata.name!=other", POD, True),
    ("metadata.name==web,metadata.namespace=default", POD, True),
    ("spec.nodeName=", PENDING, True),       # unscheduled: the missing field is ""
    ("spec.nodeName=", POD, False),
    ("spec.nodeName!=", POD, True),
    ("spec.nodeName!=", PENDING, False),
    ("status.phase=Running,spec.nodeName=node-1", POD, True),
    ("status.phase=Running,spec.nodeName=node-2", POD, False),
    ("spec.hostNetwork=false", POD, True),
    ("spec.hostNetwork=true", POD, False),
    ("status.podIP=10.0.0.5", POD, True),
    ("status.phase!=Succeeded,status.phase!=Failed", PENDING, True),
])
def test_matches(text, obj, match):
    assert parse_field_selector(text, POD_FIELDS).matches(obj) is match


@pytest.mark.parametrize("text, message", [
    ("spec.foo=bar", "field label not supported: spec.foo"),
    ("metadata.name=x,status.bogus!=y", "field label not supported: status.bogus"),
    ("metadata.name = x", "field label not supported: metadata.name "),  # nothing is trimmed
    ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
    ("metadata.name=x,spec.nodeName",
     "invalid selector: 'metadata.name=x,spec.nodeName'; can't understand 'spec.nodeName'"),
    ("metadata.name=a=b", "invalid field selector: unescaped character in value: ="),
    ("metadata.name=a\\b", "invalid field selector: invalid escape sequence: \\b"),
    ("metadata.name in (a)", "invalid selector: 'metadata.name in (a)'; can't understand "
                             "'metadata.name in (a)'"),
])
def test_errors(text, message):
    with pytest.raises(FieldSelectorError) as e:
        parse_field_selector(text, POD_FIELDS)
    assert str(e.value) == message
    assert isinstance(e.value, ValueError)


def test_unsupported_only_checked_when_asked():
    assert str(parse_field_selector("spec.foo=bar")) == "spec.foo=bar"
    assert parse_field_selector("spec.foo=bar").matches({"spec": {"foo": "bar"}})
    with pytest.raises(FieldSelectorError, match="field label not supported: spec.nodeName"):
        parse_field_selector("spec.nodeName=x", supported_fields("ConfigMap"))
    assert "spec.nodeName" in supported_fields("Pod")


def test_requires_exact_match():
    s = parse_field_selector("spec.nodeName=node-1,metadata.name!=x")
    assert s.requires_exact_match("spec.nodeName") == "node-1"
    assert s.requires_exact_match("metadata.name") is None
    assert s.fields() == ["metadata.name", "spec.nodeName"]


def test_field_value():
    assert field_value(POD, "metadata.name") == "web"
    assert field_value(POD, "spec.missing.deeper") == ""
    assert field_value(POD, "metadata.name.deeper") == ""
    assert field_value({"a": {"b": 3}}, "a.b") == "3"
    assert field_value({"a": None}, "a") == ""
    assert field_value({"status": {"podIPs": [{"ip": "1.2.3.4"}]}}, "status.podIPs") == "1.2.3.4"


def test_helpers():
    assert str(selector_from_set({"spec.nodeName": "n", "metadata.name": "a,b"})) == \
        "metadata.name=a\\,b,spec.nodeName=n"
    assert one_term_equal("metadata.name", "web").matches(POD)
    assert parse_field_selector("").empty()


@given(st.text(max_size=20))
def test_escape_round_trip(value):
    assert unescape_value(escape_value(value)) == value


_field = st.sampled_from(sorted(POD_FIELDS))
_term = st.builds(Term, _field, st.sampled_from(["=", "!="]), st.text(max_size=8))


@given(st.lists(_term, max_size=4))
def test_round_trip(terms):
    s = FieldSelector(tuple(terms))
    again = parse_field_selector(str(s), POD_FIELDS)
    assert sorted(map(str, again.terms)) == sorted(map(str, s.terms))
    obj = {"metadata": {"name": "a,b"}, "spec": {"nodeName": ""}}
    assert again.matches(obj) == s.matches(obj)
