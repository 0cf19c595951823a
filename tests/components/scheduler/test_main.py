"""The scheduler's command line: percentageOfNodesToScore's flag and its bounds."""
from __future__ import annotations

import pytest

from components.scheduler.__main__ import main


@pytest.mark.parametrize("flags, expected", [([], 0), (["--percentage-of-nodes-to-score", "30"], 30)])
def test_the_percentage_reaches_the_scheduler_adaptive_by_default(flags, expected, monkeypatch):
    made = {}

    class Recorded:
        def __init__(self, endpoint, **kwargs):
            made.update(kwargs)

        async def run(self):
            return 0

    monkeypatch.setattr("components.scheduler.__main__.Scheduler", Recorded)
    assert main(["--api", "ipc:///x", *flags]) == 0
    assert made["percentage_of_nodes_to_score"] == expected


@pytest.mark.parametrize("value", ["-1", "101"])
def test_a_percentage_out_of_range_is_one_clear_error(value, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--api", "ipc:///x", "--percentage-of-nodes-to-score", value])
    assert exit_.value.code == 2
    assert "--percentage-of-nodes-to-score must be between 0 and 100" in capsys.readouterr().err
