"""Label selectors: kubectl's `-l` syntax, matching, canonical form, LabelSelector objects."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubemu.api.fielderrors import ValidationError
from kubemu.api.labels import (EVERYTHING, NOTHING, LabelSelectorError, Requirement, Selector,
                               check_label_selector, format_labels, parse_selector, requirement,
                               selector_from_label_selector, selector_from_set,
                               validate_label_selector)

PROD_QA = {"environment": "qa", "tier": "backend"}


@pytest.mark.parametrize("text, canonical", [
    ("", ""),
    ("environment = production", "environment=production"),
    ("environment=production", "environment=production"),
    ("environment==production", "environment==production"),
    ("tier != frontend", "tier!=frontend"),
    ("environment=production,tier!=frontend", "environment=production,tier!=frontend"),
    ("environment in (production, qa)", "environment in (production,qa)"),
    ("tier notin (frontend, backend)", "tier notin (backend,frontend)"),
    ("partition", "partition"),
    ("!partition", "!partition"),
    (" ! partition ", "!partition"),
    ("partition,environment notin (qa)", "environment notin (qa),partition"),
    ("environment in (production, qa), tier!=frontend, !canary",
     "!canary,environment in (production,qa),tier!=frontend"),
    ("a=", "a="), ("a!=", "a!="), ("a in ()", "a in ()"), ("a in (,)", "a in ()"),
    ("a in (x,,y)", "a in (,x,y)"),
    ("a in (x, x)", "a in (x)"),
    ("in in (in, notin)", "in in (in,notin)"),
    ("notin=in", "notin=in"),
    ("x>1", "x>1"), ("x < 2", "x<2"),
    ("app.kubernetes.io/name=web", "app.kubernetes.io/name=web"),
    ("a=b\t,\nc", "a=b,c"),
    ("z,y,x", "x,y,z"),
])
def test_parse_canonical(text, canonical):
    assert str(parse_selector(text)) == canonical
    assert str(parse_selector(canonical)) == canonical


@pytest.mark.parametrize("text, labels, match", [
    ("", {}, True), ("", {"a": "b"}, True),
    ("environment=production", {"environment": "production"}, True),
    ("environment=production", {"environment": "qa"}, False),
    ("environment=production", {}, False),
    ("tier!=frontend", {"tier": "backend"}, True),
    ("tier!=frontend", {}, True),  # != and notin match objects without the label
    ("tier!=frontend", {"tier": "frontend"}, False),
    ("environment in (production, qa)", PROD_QA, True),
    ("environment in (production)", PROD_QA, False),
    ("environment in (production)", {}, False),
    ("tier notin (frontend, backend)", PROD_QA, False),
    ("tier notin (frontend)", PROD_QA, True),
    ("tier notin (frontend)", {}, True),
    ("partition", {"partition": ""}, True),
    ("partition", {}, False),
    ("!partition", {}, True),
    ("!partition", {"partition": "a"}, False),
    ("a=", {"a": ""}, True), ("a=", {}, False),
    ("a in ()", {"a": ""}, True),
    ("environment in (production, qa), tier!=frontend, !canary", PROD_QA, True),
    ("environment in (production, qa), tier!=frontend, !canary", {**PROD_QA, "canary": "1"}, False),
    ("x>1", {"x": "2"}, True), ("x>1", {"x": "1"}, False), ("x>1", {"x": "a"}, False),
    ("x>1", {}, False), ("x<1", {"x": "-5"}, True),
])
def test_matches(text, labels, match):
    assert parse_selector(text).matches(labels) is match


def test_matches_none_labels():
    assert parse_selector("!a").matches(None)
    assert not parse_selector("a").matches(None)


@pytest.mark.parametrize("text, message, position", [
    ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt", 2),
    ("a in (x", "unable to parse requirement: found '', expected: ',' or ')'", 7),
    ("a in x", "unable to parse requirement: found 'x' expected: '('", 5),
    ("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'", 8),
    (",a", "found ',', expected: !, identifier, or 'end of string'", 0),
    ("a,", "found '', expected: identifier after ','", 2),
    ("a=b,,c", "found ',', expected: identifier after ','", 4),
    ("a=b c", "found 'c', expected: ',' or 'end of string'", 4),
    ("a=b=c", "found '=', expected: ',' or 'end of string'", 3),
    ("!a=b", "found '=', expected: ',' or 'end of string'", 2),
    ("a=(", "unable to parse requirement: found '(', expected: identifier", 2),
    ("!", "unable to parse requirement: found '', expected: identifier", 1),
    ("a=!!b", "unable to parse requirement: found '!', expected: identifier", 2),
    ("a>=1", "unable to parse requirement: found '=', expected: identifier", 2),
])
def test_syntax_errors(text, message, position):
    with pytest.raises(LabelSelectorError) as e:
        parse_selector(text)
    assert e.value.message == message
    assert e.value.position == position
    assert f"at position {position}" in str(e.value)
    assert isinstance(e.value, ValueError)


def test_invalid_key_and_value_messages():
    with pytest.raises(LabelSelectorError) as e:
        parse_selector("-a=b")
    assert e.value.message.startswith('unable to parse requirement: <nil>: Invalid value: "-a": '
                                      "name part must consist of alphanumeric characters")
    with pytest.raises(LabelSelectorError) as e:
        parse_selector("app in (web, -x)")
    assert e.value.message.startswith('unable to parse requirement: values[0][app]: Invalid '
                                      'value: "-x": a valid label must be an empty string')
    with pytest.raises(LabelSelectorError) as e:
        parse_selector("x>y")
    assert e.value.message == ('unable to parse requirement: values[0]: Invalid value: "y": '
                               "for 'Gt', 'Lt' operators, the value must be an integer")
    with pytest.raises(LabelSelectorError, match="must be no more than 63 characters"):
        parse_selector("a=" + "x" * 64)


def test_non_string_is_rejected():
    with pytest.raises(LabelSelectorError):
        parse_selector(None)


def test_empty_and_nothing():
    assert parse_selector("").empty() and parse_selector("  ").empty()
    assert EVERYTHING.matches({"a": "b"})
    assert not NOTHING.matches({}) and not NOTHING.empty()


def test_requires_exact_match_and_add():
    s = parse_selector("app=web,tier in (db)")
    assert s.requires_exact_match("app") == "web"
    assert s.requires_exact_match("tier") == "db"
    assert s.requires_exact_match("x") is None
    s2 = s.add(requirement("aaa", "exists"))
    assert str(s2) == "aaa,app=web,tier in (db)"


def test_requirement_constructor_validates():
    assert requirement("a", "in", ["y", "x", "y"]) == Requirement("a", "in", ("x", "y"))
    with pytest.raises(LabelSelectorError, match="values set can't be empty"):
        requirement("a", "in", [])
    with pytest.raises(LabelSelectorError, match="exact-match compatibility requires one"):
        requirement("a", "=", ["x", "y"])
    with pytest.raises(LabelSelectorError, match="values set must be empty"):
        requirement("a", "exists", ["x"])
    with pytest.raises(LabelSelectorError, match="Unsupported value"):
        requirement("a", "like", ["x"])


def test_selector_from_set():
    s = selector_from_set({"tier": "db", "app": "web"})
    assert str(s) == "app=web,tier=db"
    assert s.matches({"app": "web", "tier": "db", "x": "y"})
    assert not s.matches({"app": "web"})
    assert selector_from_set({}).matches({"anything": "x"})
    assert selector_from_set(None).empty()
    assert format_labels({"b": "2", "a": "1"}) == "a=1,b=2"


# --- LabelSelector objects -------------------------------------------------------------------

DOC_SELECTOR = {  # the example in "Labels and Selectors: Resources that support set-based"
    "matchLabels": {"component": "redis"},
    "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["cache"]},
        {"key": "environment", "operator": "NotIn", "values": ["dev"]},
    ],
}


def test_label_selector_object():
    s = selector_from_label_selector(DOC_SELECTOR)
    assert str(s) == "component=redis,environment notin (dev),tier in (cache)"
    assert s.matches({"component": "redis", "tier": "cache"})
    assert not s.matches({"component": "redis", "tier": "cache", "environment": "dev"})
    assert not s.matches({"component": "redis"})
    assert validate_label_selector(DOC_SELECTOR) == []
    ex = selector_from_label_selector({"matchExpressions": [
        {"key": "a", "operator": "Exists"}, {"key": "b", "operator": "DoesNotExist"}]})
    assert str(ex) == "a,!b"
    assert ex.matches({"a": "1"}) and not ex.matches({"a": "1", "b": "2"})


def test_label_selector_object_empty_and_nil():
    assert selector_from_label_selector({}).matches({"x": "y"})
    assert selector_from_label_selector({"matchLabels": {}, "matchExpressions": []}).empty()
    assert not selector_from_label_selector(None).matches({})


def test_label_selector_object_bad_operator():
    with pytest.raises(LabelSelectorError, match='"Like" is not a valid label selector operator'):
        selector_from_label_selector({"matchExpressions": [{"key": "a", "operator": "Like"}]})


@pytest.mark.parametrize("selector, expected", [
    ({"matchExpressions": [{"key": "a", "operator": "In"}]},
     ["spec.selector.matchExpressions[0].values: Required value: must be specified when "
      "`operator` is 'In' or 'NotIn'"]),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]},
     ["spec.selector.matchExpressions[0].values: Required value: must be specified when "
      "`operator` is 'In' or 'NotIn'"]),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
     ["spec.selector.matchExpressions[0].values: Forbidden: may not be specified when "
      "`operator` is 'Exists' or 'DoesNotExist'"]),
    ({"matchExpressions": [{"key": "a", "operator": "Like", "values": ["x"]}]},
     ['spec.selector.matchExpressions[0].operator: Invalid value: "Like": not a valid selector '
      "operator"]),
    ({"matchExpressions": [{"key": "a"}]},
     ["spec.selector.matchExpressions[0].operator: Required value"]),
])
def test_validate_label_selector(selector, expected):
    assert [str(e) for e in validate_label_selector(selector)] == expected


def test_validate_keys_and_values():
    errors = validate_label_selector({
        "matchLabels": {"bad key": "ok", "good": "bad value!"},
        "matchExpressions": [{"key": "a/b/c", "operator": "In", "values": ["ok", "-no"]},
                             {"key": "", "operator": "Exists"}]}, "spec.template.selector")
    texts = [str(e) for e in errors]
    assert texts[0].startswith('spec.template.selector.matchLabels: Invalid value: "bad key": '
                               "name part must consist")
    assert texts[1].startswith('spec.template.selector.matchLabels: Invalid value: "bad value!": '
                               "a valid label must be")
    assert texts[2].startswith('spec.template.selector.matchExpressions[0].key: Invalid value: '
                               '"a/b/c": a qualified name must consist')
    assert texts[3].startswith('spec.template.selector.matchExpressions[0].values[1]: Invalid '
                               'value: "-no"')
    assert texts[4] == ('spec.template.selector.matchExpressions[1].key: Invalid value: "": '
                        "name part must be non-empty")
    assert len(texts) == 5


def test_validate_shapes():
    assert validate_label_selector(None) == []
    assert [str(e) for e in validate_label_selector("app=web")] == [
        'spec.selector: Invalid value: "app=web": must be an object']
    assert len(validate_label_selector({"matchLabels": ["a"]})) == 1
    assert len(validate_label_selector({"matchExpressions": {"a": 1}})) == 1


def test_check_label_selector():
    assert str(check_label_selector({"matchLabels": {"app": "web"}})) == "app=web"
    with pytest.raises(ValidationError, match='Deployment "web" is invalid: '):
        check_label_selector({"matchExpressions": [{"key": "a", "operator": "In"}]},
                             kind="Deployment", name="web")


# --- properties ------------------------------------------------------------------------------

_name = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?", fullmatch=True)
_key = st.one_of(_name, st.builds(lambda p, n: f"{p}/{n}",
                                  st.from_regex(r"[a-z0-9]([a-z0-9-]{0,5}[a-z0-9])?(\.[a-z]{1,3})?",
                                                fullmatch=True), _name))
_value = st.one_of(st.just(""), _name)
_requirement = st.one_of(
    st.builds(lambda k, op, v: Requirement(k, op, (v,)), _key, st.sampled_from(["=", "==", "!="]),
              _value),
    st.builds(lambda k, op, vs: Requirement(k, op, tuple(sorted(vs))), _key,
              st.sampled_from(["in", "notin"]), st.sets(_value, min_size=1, max_size=4)),
    st.builds(lambda k, op: Requirement(k, op, ()), _key, st.sampled_from(["exists", "!"])),
    st.builds(lambda k, op, n: Requirement(k, op, (str(n),)), _key, st.sampled_from(["gt", "lt"]),
              st.integers(0, 1000)),
)
_selector = st.lists(_requirement, max_size=5).map(
    lambda rs: Selector(tuple(sorted(rs, key=lambda r: r.key))))
_labels = st.dictionaries(_key, _value, max_size=5)


@given(_selector)
def test_round_trip(selector):
    again = parse_selector(str(selector))
    assert again == selector
    assert str(again) == str(selector)


@given(_selector, _labels)
def test_round_trip_preserves_matching(selector, labels):
    assert parse_selector(str(selector)).matches(labels) == selector.matches(labels)


@given(_labels)
def test_set_selector_matches_its_set(labels):
    assert selector_from_set(labels).matches(labels)
    assert parse_selector(format_labels(labels)).matches(labels)


@given(st.text(alphabet="ab=!(),<> in\t", max_size=20))
def test_parse_never_crashes(text):
    try:
        parse_selector(text)
    except LabelSelectorError as e:
        assert e.position is not None and 0 <= e.position <= len(text)
