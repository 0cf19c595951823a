"""Resource quantities: parsing, cpu/memory conversions, canonical forms, Kubernetes' errors."""
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubemu.api.quantity import (ERR_FORMAT, ERR_NUMERIC, ERR_SUFFIX, canonical, cpu_millis,
                                 format_cpu, format_memory, memory_bytes, parse_quantity)


@pytest.mark.parametrize("text, value", [
    ("1", 1), ("0", 0), ("100m", Fraction(1, 10)), ("0.5", Fraction(1, 2)), (".5", Fraction(1, 2)),
    ("1.5", Fraction(3, 2)), ("+2", 2), ("-1", -1),
    ("1n", Fraction(1, 10**9)), ("1u", Fraction(1, 10**6)), ("2k", 2000), ("1M", 10**6),
    ("1G", 10**9), ("1T", 10**12), ("1P", 10**15), ("1E", 10**18),
    ("1Ki", 1024), ("128Mi", 128 * 2**20), ("1.5Gi", 3 * 2**29), ("1Ti", 2**40), ("1Pi", 2**50),
    ("1Ei", 2**60),
    ("1e3", 1000), ("5E-1", Fraction(1, 2)), ("2e+2", 200),
])
def test_parse(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("number, value", [(2, 2), (0.5, Fraction(1, 2)), (0.1, Fraction(1, 10)),
                                           (0, 0)])
def test_yaml_numbers_are_quantities(number, value):
    assert parse_quantity(number) == value


def test_precision_is_rounded_up_to_nano():
    assert parse_quantity("0.1n") == Fraction(1, 10**9)
    assert parse_quantity("1.0000000001") == Fraction(1_000_000_001, 10**9)


@pytest.mark.parametrize("text", ["", "abc", "Mi", "1 Gi", " 1", "1\n", "1,5", "١"])
def test_malformed_gets_kubernetes_regex_message(text):
    with pytest.raises(ValueError) as e:
        parse_quantity(text)
    assert str(e.value) == ("quantities must match the regular expression "
                            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    assert str(e.value) == ERR_FORMAT


@pytest.mark.parametrize("text, message", [
    ("1.2.3", ERR_NUMERIC), (".", ERR_NUMERIC),
    ("1K", ERR_SUFFIX), ("1e", ERR_SUFFIX), ("1Mi5", ERR_SUFFIX), ("1mi", ERR_SUFFIX),
    ("1e99999", ERR_SUFFIX),
])
def test_regex_shaped_but_wrong(text, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(") + "$"):
        parse_quantity(text)


@pytest.mark.parametrize("value", [True, None, [1], float("nan"), float("inf")])
def test_non_quantities(value):
    with pytest.raises(ValueError, match="quantities must match"):
        parse_quantity(value)


@pytest.mark.parametrize("q, millis", [("100m", 100), ("0.5", 500), ("2", 2000), (2, 2000),
                                       (0.25, 250), ("1.0001", 1001), ("1n", 1), ("0", 0),
                                       ("1k", 1_000_000)])
def test_cpu_millis_rounds_up(q, millis):
    assert cpu_millis(q) == millis


@pytest.mark.parametrize("q, n", [("128Mi", 134217728), ("1Gi", 2**30), ("1k", 1000),
                                  ("1.5", 2), (512, 512), ("1e3", 1000), ("100m", 1)])
def test_memory_bytes_rounds_up(q, n):
    assert memory_bytes(q) == n


def test_conversions_take_parsed_values_too():
    assert cpu_millis(parse_quantity("250m")) == 250
    assert memory_bytes(parse_quantity("1Ki")) == 1024


@pytest.mark.parametrize("millis, text", [(100, "100m"), (500, "500m"), (1000, "1"),
                                          (2000, "2"), (1500, "1500m"), (0, "0")])
def test_format_cpu(millis, text):
    assert format_cpu(millis) == text


@pytest.mark.parametrize("n, text", [(128 * 2**20, "128Mi"), (2**30, "1Gi"), (1536 * 2**20, "1536Mi"),
                                     (1024, "1Ki"), (512, "512"), (10**9, "1G"), (1500, "1500"),
                                     (0, "0")])
def test_format_memory(n, text):
    assert format_memory(n) == text


@pytest.mark.parametrize("q, text", [("2000m", "2"), ("1024Mi", "1Gi"), ("0.5", "500m"),
                                     ("1.5Gi", "1536Mi"), ("100Ki", "100Ki"), ("0.5Ki", "512"),
                                     ("1000", "1k"), ("1500", "1500"), ("1e3", "1e3"),
                                     ("0Mi", "0"), (2, "2"), (0.5, "500m")])
def test_canonical_is_quantity_string(q, text):
    assert canonical(q) == text


@given(st.integers(min_value=0, max_value=10**7))
def test_cpu_round_trip(millis):
    assert cpu_millis(format_cpu(millis)) == millis


@given(st.integers(min_value=0, max_value=2**50))
def test_memory_round_trip(n):
    assert memory_bytes(format_memory(n)) == n


@given(st.text(max_size=12))
def test_any_text_parses_or_says_why(text):
    try:
        parse_quantity(text)
    except ValueError as e:
        assert str(e) in (ERR_FORMAT, ERR_NUMERIC, ERR_SUFFIX)
