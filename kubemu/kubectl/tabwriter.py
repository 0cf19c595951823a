"""Go's text/tabwriter, as kubectl configures it, for whitespace-aligned columns.

Text is cells ended by tabs, lines ended by newlines; the text after a line's last tab is not
part of a column (it is never padded). A column is aligned over a block of consecutive lines
that all have a cell in it, so a line without tabs ends every block (describe's sections).

    GET = dict(minwidth=6, padding=3)       kubectl get's printers.GetNewTabWriter
    DESCRIBE = dict(minwidth=0, padding=2)  kubectl describe's tabbedString

`remember_widths` is liggitt/tabwriter's RememberWidths flag, which kubectl get uses: column
widths only grow from one flush to the next, so `get -w` rows line up under the first table.
"""
from __future__ import annotations

GET = {"minwidth": 6, "padding": 3}
DESCRIBE = {"minwidth": 0, "padding": 2}


class TabWriter:
    def __init__(self, minwidth: int, padding: int, remember_widths: bool = False):
        self.minwidth = minwidth
        self.padding = padding
        self.remember_widths = remember_widths
        self._remembered: list[int] = []

    def format(self, text: str) -> str:
        """The aligned text (one flush)."""
        trailing = text.endswith("\n")
        lines = [line.split("\t") for line in (text[:-1] if trailing else text).split("\n")]
        out: list[str] = []
        self._format(lines, [], 0, len(lines), out)
        return "\n".join(out) + ("\n" if trailing else "")

    def reset(self) -> None:
        """Forget remembered widths (a new table with other columns begins)."""
        self._remembered = []

    def _format(self, lines: list[list[str]], widths: list[int], line0: int, line1: int,
                out: list[str]) -> None:
        column = len(widths)
        this = line0
        while this < line1:
            if column >= len(lines[this]) - 1:
                this += 1
                continue
            self._write(lines, widths, line0, this, out)
            line0 = this
            width = self.minwidth
            while this < line1 and column < len(lines[this]) - 1:
                width = max(width, len(lines[this][column]) + self.padding)
                this += 1
            widths.append(self._remember(column, width))
            self._format(lines, widths, line0, this, out)
            widths.pop()
            line0 = this
        self._write(lines, widths, line0, line1, out)

    def _remember(self, column: int, width: int) -> int:
        if not self.remember_widths:
            return width
        if column >= len(self._remembered):
            self._remembered.extend([0] * (column + 1 - len(self._remembered)))
        self._remembered[column] = max(self._remembered[column], width)
        return self._remembered[column]

    @staticmethod
    def _write(lines: list[list[str]], widths: list[int], line0: int, line1: int,
               out: list[str]) -> None:
        for line in lines[line0:line1]:
            out.append("".join(cell.ljust(widths[j]) if j < len(widths) else cell
                               for j, cell in enumerate(line)))


def tabbed(text: str, minwidth: int = 0, padding: int = 2) -> str:
    """One-off formatting (describe's tabbedString by default)."""
    return TabWriter(minwidth, padding).format(text)
