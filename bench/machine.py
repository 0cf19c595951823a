"""The machine a report was measured on, with how busy it was: the figures of a shared
machine mean little without its load average."""
from __future__ import annotations

import os

from .stats import machine


def machine_with_load() -> dict:
    found = machine()
    found["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]  # the reports build it last
    return found
