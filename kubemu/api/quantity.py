"""Kubernetes resource quantities (resource.Quantity) for cpu and memory.

A quantity is a number with an optional suffix:

  * decimal SI:  n u m "" k M G T P E   (10^-9 ... 10^18)      "100m", "1.5", "2k"
  * binary SI:   Ki Mi Gi Ti Pi Ei       (2^10 ... 2^60)        "128Mi", "1Gi"
  * exponent:    e<int> / E<int>                                "1e3", "5E-1"

Values are exact Fractions, rounded up (away from zero) to nano precision as Kubernetes does.
YAML may also hand over plain ints and floats ("cpu: 2", "cpu: 0.5"); a float is read by its
shortest decimal spelling so 0.1 means exactly 1/10.

Errors are ValueErrors with Kubernetes' messages (ParseQuantity's ErrFormatWrong, ErrNumeric,
ErrSuffix). `canonical` gives Quantity.String(), the form error messages quote.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Union

QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT = f"quantities must match the regular expression '{QUANTITY_PATTERN}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

_QUANTITY_RE = re.compile(QUANTITY_PATTERN)
_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")
_EXPONENT_RE = re.compile(r"[eE]([-+]?[0-9]+)")

# Suffix -> power of ten.
DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12,
                    "P": 15, "E": 18}
# Suffix -> power of two.
BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXP = {e: s for s, e in DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXP = {e: s for s, e in BINARY_SUFFIXES.items()}

# Kubernetes accepts any int32 exponent; exact arithmetic on 10^(2^31) is not possible, and
# nothing a pod asks for comes near this bound.
MAX_EXPONENT = 1000

NANO = Fraction(1, 10**9)

# How the quantity was written: decides the suffix family of its canonical form.
DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"

QuantityInput = Union[str, int, float, Fraction, Decimal]


def parse_quantity(q: QuantityInput) -> Fraction:
    """The exact value of a quantity (a string, or a number as YAML gives it)."""
    return _parse(q)[0]


def canonical(q: QuantityInput) -> str:
    """Quantity.String(): "2000m" -> "2", "1024Mi" -> "1Gi", "0.5" -> "500m"."""
    value, fmt = _parse(q)
    return _format(value, fmt)


def cpu_millis(q: QuantityInput) -> int:
    """CPU in millicores, rounded up: "100m" -> 100, "0.5" -> 500, "2" -> 2000."""
    return math.ceil(_value(q) * 1000)


def memory_bytes(q: QuantityInput) -> int:
    """Memory in bytes, rounded up: "128Mi" -> 134217728, "1k" -> 1000."""
    return math.ceil(_value(q))


def format_cpu(millis: int) -> str:
    """Canonical CPU: whole cores without a suffix, else millicores ("2", "1500m")."""
    return _format(Fraction(millis, 1000), DECIMAL_SI)


def format_memory(nbytes: int) -> str:
    """Canonical memory: binary suffix when it divides exactly ("128Mi"), else decimal SI
    ("1G", "1500")."""
    if nbytes % 1024 == 0 and abs(nbytes) >= 1024:
        return _format(Fraction(nbytes), BINARY_SI)
    return _format(Fraction(nbytes), DECIMAL_SI)


# --- parsing ----------------------------------------------------------------------------------

def _value(q: QuantityInput) -> Fraction:
    return q if isinstance(q, Fraction) else parse_quantity(q)


def _parse(q: QuantityInput) -> tuple[Fraction, str]:
    if isinstance(q, bool):  # YAML's true/false are ints to Python, never quantities
        raise ValueError(ERR_FORMAT)
    if isinstance(q, Fraction):
        return _round_nano(q), DECIMAL_SI
    if isinstance(q, int):
        return Fraction(q), DECIMAL_SI
    if isinstance(q, (float, Decimal)):
        if not math.isfinite(q):
            raise ValueError(ERR_FORMAT)
        return _round_nano(Fraction(Decimal(repr(q)) if isinstance(q, float) else q)), DECIMAL_SI
    if not isinstance(q, str):
        raise ValueError(ERR_FORMAT)
    return _parse_string(q)


def _parse_string(s: str) -> tuple[Fraction, str]:
    m = _QUANTITY_RE.match(s)
    # `$` also matches before a final newline; a quantity never has one.
    if not m or s.endswith("\n") or not s.isascii():
        raise ValueError(ERR_FORMAT)
    number, suffix = m.groups()
    if not _NUMBER_RE.fullmatch(number):
        raise ValueError(ERR_NUMERIC)
    try:
        value = Fraction(number)
    except ValueError:  # e.g. more digits than Python converts
        raise ValueError(ERR_NUMERIC) from None
    scale, fmt = _suffix(suffix)
    return _round_nano(value * scale), fmt


def _suffix(suffix: str) -> tuple[Fraction, str]:
    """The multiplier a suffix stands for, and the format it implies."""
    if suffix in DECIMAL_SUFFIXES:
        return Fraction(10) ** DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in BINARY_SUFFIXES:
        return Fraction(2 ** BINARY_SUFFIXES[suffix]), BINARY_SI
    m = _EXPONENT_RE.fullmatch(suffix)
    if not m or len(m.group(1)) > 12:
        raise ValueError(ERR_SUFFIX)
    exponent = int(m.group(1))
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(ERR_SUFFIX)
    return Fraction(10) ** exponent, DECIMAL_EXPONENT


def _round_nano(value: Fraction) -> Fraction:
    """Kubernetes keeps at most nano precision, rounding away from zero."""
    nanos = value / NANO
    if nanos.denominator == 1:
        return value
    whole = math.ceil(abs(nanos))
    return Fraction(whole if value > 0 else -whole, 10**9)


# --- formatting -------------------------------------------------------------------------------

def _format(value: Fraction, fmt: str) -> str:
    if value == 0:
        return "0"
    if fmt == BINARY_SI and abs(value) >= 1024 and value.denominator == 1:
        return _format_binary(int(value))
    # Binary quantities below 1Ki or with fractional bytes read better (and exactly) in decimal.
    return _format_decimal(value, DECIMAL_EXPONENT if fmt == DECIMAL_EXPONENT else DECIMAL_SI)


def _format_binary(n: int) -> str:
    exp = 0
    while n % 1024 == 0 and exp < 60:
        n //= 1024
        exp += 10
    return f"{n}{_BINARY_BY_EXP.get(exp, '')}"


def _format_decimal(value: Fraction, fmt: str) -> str:
    """The integer mantissa with the largest power-of-1000 exponent that keeps it exact."""
    n = int(_round_nano(value) / NANO)
    exp = -9
    while n % 1000 == 0 and exp < 18:
        n //= 1000
        exp += 3
    if fmt == DECIMAL_EXPONENT:
        return f"{n}e{exp}" if exp else str(n)
    return f"{n}{_DECIMAL_BY_EXP[exp]}"
