"""Go-style durations for --timeout flags: `30s`, `2m`, `1h30m`, `500ms`, or plain seconds."""
from __future__ import annotations

import re

import click

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?)(ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string (time.ParseDuration's units ms, s, m, h); a bare
    number is seconds. ValueError otherwise."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f'time: invalid duration "{text}"')
    return total


class Duration(click.ParamType):
    name = "duration"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return parse_duration(value)
        except ValueError as err:
            self.fail(str(err), param, ctx)
