"""The scheduler's command line: percentageOfNodesToScore's flag and its bounds."""
from __future__ import annotations

import pytest

from components.scheduler.__main__ import build_parser, main


def test_percentage_of_nodes_to_score_defaults_to_adaptive():
    assert build_parser().parse_args(["--api", "ipc:///x"]).percentage_of_nodes_to_score == 0
    assert build_parser().parse_args(["--api", "ipc:///x", "--percentage-of-nodes-to-score", "30"]) \
        .percentage_of_nodes_to_score == 30


@pytest.mark.parametrize("value", ["-1", "101"])
def test_a_percentage_out_of_range_is_one_clear_error(value, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--api", "ipc:///x", "--percentage-of-nodes-to-score", value])
    assert exit_.value.code == 2
    assert "--percentage-of-nodes-to-score must be between 0 and 100" in capsys.readouterr().err
