"""Go's text/tabwriter semantics, as kubectl's get and describe use them."""
from __future__ import annotations

from kubemu.kubectl.tabwriter import DESCRIBE, GET, TabWriter, tabbed


def test_get_columns_are_padded_by_three_and_the_last_is_not():
    text = TabWriter(**GET).format("NAME\tREADY\tSTATUS\tRESTARTS\tAGE\nweb-1\t1/1\tRunning\t0\t5s\n")
    assert text == ("NAME    READY   STATUS    RESTARTS   AGE\n"
                    "web-1   1/1     Running   0          5s\n")


def test_minimum_width_applies_to_short_columns():
    assert TabWriter(**GET).format("A\tB\nx\ty\n") == "A     B\nx     y\n"


def test_a_line_without_tabs_ends_the_column_block():
    text = tabbed("Name:\tweb\nNamespace:\tdefault\nContainers:\n  c:\n    Image:\tnginx\n")
    assert text == ("Name:       web\n"
                    "Namespace:  default\n"
                    "Containers:\n"
                    "  c:\n"
                    "    Image:  nginx\n")


def test_nested_columns_align_within_their_own_blocks():
    text = tabbed("a\tb\tc\naaaa\tb\n", **DESCRIBE)
    # column 0 spans both lines; column 1 only the first (the second's "b" is its last cell)
    assert text == "a     b  c\naaaa  b\n"


def test_empty_cells_are_padded():
    assert tabbed("x\t\ty\nlong\tz\tw\n") == "x        y\nlong  z  w\n"


def test_remembered_widths_only_grow_across_flushes():
    tw = TabWriter(**GET, remember_widths=True)
    first = tw.format("NAME\tSTATUS\nlong-name\tRunning\n")
    second = tw.format("a\tPending\n")
    assert first.splitlines()[1].index("Running") == second.index("Pending")
    third = tw.format("a-much-longer-name\tX\n")
    assert third == "a-much-longer-name   X\n"
    tw.reset()
    assert tw.format("a\tb\n") == "a     b\n"
