"""Shared rich rendering pieces: sizes, bars, dates, and the one table layout every command uses.

The terminal rules live here so no command can break them: on a narrow terminal a path folds
(at a separator where it can; no character of it is ever dropped, a space at a fold starts the
next line, where it shows) and is shown with `~` for the home folder; sizes and
counts are never cut or wrapped; columns that only decorate (bars, dates, drives) give way
first; a table that still cannot fit is printed one record per block instead.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Literal

import msgspec

from cachedoctor.lazyre import lazy_pattern
from cachedoctor.sizes import format_size

if TYPE_CHECKING:
    from rich.console import Console
    from rich.style import Style

BAR_WIDTH = 20
GAP = 2  # the space rich leaves between two columns (padding 1 on each side, no edge padding)
FOLD_FLOOR = 16  # a path or prose column is not folded narrower than this while others can go
TEXT_FLOOR = 8  # nor an id column, once it has to fold at all

Kind = Literal["text", "number", "path", "prose", "bar"]


class Column(msgspec.Struct, frozen=True):
    """One column of a table. `kind` decides how it may give way on a narrow terminal:
    number and bar cells never wrap; text (ids, names) wraps only as a last resort; path and
    prose fold. `drop` > 0: the column may be left out when the terminal is too narrow, the
    highest `drop` first (0: always shown)."""

    header: str
    kind: Kind = "text"
    drop: int = 0


def path_column(header: str = "path") -> Column:
    return Column(header, "path")


def number_column(header: str, drop: int = 0) -> Column:
    return Column(header, "number", drop)


def bar_width_for(console_width: int) -> int:
    """Bars give way to paths on a narrow terminal."""
    return BAR_WIDTH if console_width >= 140 else 10 if console_width >= 100 else 4


def bar(value: int, largest: int, width: int = BAR_WIDTH) -> str:
    if largest <= 0:
        return ""
    filled = round(width * value / largest)
    return "█" * filled + "·" * (width - filled)


def size(n: int | None) -> str:
    return "-" if n is None else format_size(n)


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    age = time.time() - timestamp
    if age < 0:
        return "in the future"
    for unit, seconds in (("d", 86400), ("h", 3600), ("m", 60)):
        if age >= seconds:
            return f"{int(age // seconds)}{unit} ago"
    return "just now"


def tilde(text: str) -> str:
    """`text` with the home folder written `~` wherever a path in it starts there."""
    home = os.path.expanduser("~").rstrip("/\\")
    if len(home) < 2 or home == "~":
        return text
    pattern = re.escape(home) + r"(?=[/\\]|$|\s|\))"
    return re.sub(r"(?:^|(?<=[\s(]))" + pattern, "~", text)


Row = Sequence[str] | None  # None: a section break


PIPE_WIDTH = 4096  # a pipe's table is not folded to a terminal (cli.base.stdout_console)


def print_table(console: Console | None, columns: Sequence[Column], rows: Sequence[Row]) -> None:
    """Print `rows` under `columns` following the terminal rules (module docstring); `console`
    None: stdout, where a pipe gets the same text as rich would print without rich building
    the console and the table (a third of a small command's time)."""
    from cachedoctor.cli.common import printable, stdout_console

    columns = [Column(printable(c.header), c.kind, c.drop) for c in columns]  # plain text
    cleaned: list[list[str] | None] = []
    for row in rows:
        if row is None:
            cleaned.append(None)
            continue
        cleaned.append([printable(tilde(cell) if col.kind == "path" else cell)
                        for col, cell in zip(columns, row, strict=True)])
    natural = [_widest([c.header, *(r[i] for r in cleaned if r is not None)])
               for i, c in enumerate(columns)]
    shown = list(range(len(columns)))
    if console is None and _plain_pipe(columns, cleaned) and \
            sum(natural) + GAP * len(natural) <= PIPE_WIDTH:
        import sys

        out = _lines(columns, shown, cleaned, natural, header=True,
                     folds=frozenset(i for i in shown if _folds(columns[i], False)))
        sys.stdout.write("".join(line.rstrip(" ") + "\n" for line in out))
        return
    console = console or stdout_console()

    def fits(text_floor: int | None) -> bool:
        least = 0
        for i in shown:
            kind = columns[i].kind
            if kind in ("path", "prose"):
                least += min(natural[i], FOLD_FLOOR)
            elif kind == "text" and text_floor is not None:
                least += min(natural[i], text_floor)
            else:
                least += natural[i]
        return least + GAP * (len(shown) - 1) <= console.width

    while not fits(None) and any(columns[i].drop for i in shown):
        shown.remove(max((i for i in shown if columns[i].drop), key=lambda i: columns[i].drop))
    if fits(None) or fits(TEXT_FLOOR):
        fold_text = not fits(None)
        widths = None if _breaks(columns, cleaned) else _rich_widths(columns, shown, natural,
                                                             console.width, fold_text=fold_text)
        if widths is None:
            _print_rich_table(console, columns, shown, cleaned, fold_text=fold_text)
        else:
            _print_laid_out(console, columns, shown, cleaned, widths, fold_text=fold_text)
    else:
        _print_records(console, columns, shown, cleaned)


def _widest(texts: Sequence[str]) -> int:
    """The columns the widest line of `texts` takes, as rich measures a cell (`splitlines`)."""
    joined = "".join(texts)
    if joined.isascii() and joined.isprintable():  # each one line, a column a character
        return max(map(len, texts), default=0)
    return max((cell_width(line) for text in texts for line in text.splitlines()), default=0)


def cell_width(text: str) -> int:
    """Columns `text` takes on a terminal, as rich counts them; printable ASCII is one column a
    character (cells are `printable` already), so rich's width tables load only for the rest."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def plain_stdout() -> bool:
    """stdout is a pipe or file that rich would print without styling or folding (see
    _RICH_STYLING): a command writes its text there itself, without building a console."""
    import sys

    return not sys.stdout.isatty() and not any(os.environ.get(name) for name in _RICH_STYLING)


def print_text(plain: str, styled: str | None = None) -> None:
    """A line of a command's output: `styled` (rich markup; `plain` when None) at a terminal,
    `plain` as it is into a pipe or file."""
    if plain_stdout():
        import sys

        sys.stdout.write(plain + "\n")
        return
    from cachedoctor.cli.common import stdout_console

    if styled is None:
        stdout_console().print(plain, markup=False, highlight=False)
    else:
        stdout_console().print(styled, highlight=False)


def _plain_pipe(columns: Sequence[Column], rows: list[list[str] | None]) -> bool:
    """stdout is a pipe or file that rich would print plainly (see _RICH_STYLING, _breaks)."""
    return plain_stdout() and not _breaks(columns, rows)


def _breaks(columns: Sequence[Column], rows: list[list[str] | None]) -> bool:
    """The table holds what rich lays out otherwise than `_lines` does: a cell with a tab or a
    line separator (_RICH_BREAKS), a header of more than one line (rich aligns those to the
    bottom)."""
    return any(len(c.header.splitlines()) > 1 or c.header.endswith("\n") for c in columns) or \
        _RICH_BREAKS().search("".join(["".join(row) for row in rows if row is not None])) \
        is not None  # one search of every cell at once: a break is one character


# what makes rich print a pipe differently: a width, forced colour or terminal behaviour; and
# in a cell a tab (expanded) or a line separator `printable` leaves (rich breaks the line)
_RICH_STYLING = ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
_RICH_BREAKS = lazy_pattern("[\t\u2028\u2029]")
_TRAILING_SPACE = lazy_pattern(r"\s+$")


def _folds(column: Column, fold_text: bool) -> bool:
    """The column's cells wrap (paths and prose always, ids only when the table is short of
    room); the rest are never wrapped."""
    return column.kind in ("path", "prose") or (column.kind == "text" and fold_text)


def _rich_widths(columns: Sequence[Column], shown: list[int], natural: list[int], width: int,
                 *, fold_text: bool) -> list[int] | None:
    """The width rich's table gives each shown column's cells, for a console `width` wide, or
    None where rich would also narrow a column that never wraps (then rich lays the table
    out). rich 13-15's `Table._calculate_column_widths` and `_collapse_widths` (rich/table.py)
    for a table without expand, minimum or maximum widths: the natural width plus padding
    (GAP, half of it at either edge), at most `width`; while too wide, the widest wrapping
    columns narrow together towards the next widest (`rich._ratio.ratio_reduce`)."""
    if not shown:
        return None  # every column dropped: rich's empty table
    last = len(shown) - 1
    pads = [(GAP // 2 if k > 0 else 0) + (GAP - GAP // 2 if k < last else 0)
            for k in range(len(shown))]
    sizes = [min(natural[i] + pad, width) or 1 for i, pad in zip(shown, pads, strict=True)]
    wraps = [_folds(columns[i], fold_text) for i in shown]
    excess = sum(sizes) - width
    while any(wraps) and sum(sizes) > 0 and excess > 0:
        widest = max(size for size, can in zip(sizes, wraps, strict=True) if can)
        second = max(size if can and size != widest else 0
                     for size, can in zip(sizes, wraps, strict=True))
        ratios = [int(size == widest and can) for size, can in zip(sizes, wraps, strict=True)]
        if not any(ratios) or widest == second:
            break
        step, left, share = min(excess, widest - second), excess, sum(ratios)
        for k, ratio in enumerate(ratios):  # ratio_reduce: each widest one its share, rounded
            if ratio and share > 0:
                cut = min(step, round(ratio * left / share))
                sizes[k] -= cut
                left -= cut
                share -= ratio
        excess = sum(sizes) - width
    cells = [size - pad for size, pad in zip(sizes, pads, strict=True)]
    if excess > 0 or any(cell < 1 for cell in cells):
        return None  # rich's last resort, squeezing every column, or a column with no room
    if any(not can and cell < natural[i] for i, can, cell in zip(shown, wraps, cells, strict=True)):
        return None
    return cells


def _lines(columns: Sequence[Column], shown: list[int], rows: list[list[str] | None],
           widths: list[int], *, header: bool,
           wrap: Callable[[int, str, int], list[str]] | None = None,
           folds: frozenset[int] = frozenset()) -> list[str]:
    """The lines rich prints for the `shown` columns of a table: the header when asked, then
    every row, cells padded to their column's width (`widths`, one per column, numbers to the
    right), GAP spaces between, a multi-line cell going on in the next lines, sections
    invisible (no box), each line padded to the table's width. A line of a folding column
    (`folds`) with more characters than the column is wide loses trailing whitespace as rich
    trims it (`Text.rstrip_end`); given `wrap`, a cell with such a line, or one wider than its
    column, is handed to it (with its column and width) and its lines are taken as they are."""
    out: list[str] = []
    gap = " " * GAP
    spec = [(i, widths[i], columns[i].kind == "number") for i in shown]
    for row in [[c.header for c in columns]] * header + rows:
        if row is None:
            continue
        cells: list[list[str]] = []
        tall = 0
        for i, width, number in spec:
            cell = row[i]
            if len(cell) <= width and cell.isascii() and "\n" not in cell:  # most cells: one
                # line of one column a character, that fits
                cells.append([cell.rstrip().rjust(width) if number else cell.ljust(width)])
                tall = tall or 1
            else:
                cells.append(_cell_lines(cell, i, width, number, i in folds, wrap))
                tall = max(tall, len(cells[-1]))
        if tall == 1:
            out.append(gap.join([lines[0] for lines in cells]))
            continue
        for k in range(tall):
            out.append(gap.join(lines[k] if k < len(lines) else " " * width
                                for lines, (_, width, _) in zip(cells, spec, strict=True)))
    return out


def _cell_lines(cell: str, column: int, width: int, number: bool, folds: bool,
                wrap: Callable[[int, str, int], list[str]] | None) -> list[str]:
    """One cell's lines as `_lines` lays them out, each padded to `width` as rich pads it."""
    if wrap is not None and folds and cell.isascii() and "\n" not in cell:  # one line, a
        # column a character, wider than its column (`_lines` pads the ones that fit)
        return [line.ljust(width) for line in wrap(column, cell, width)]
    lines = cell.split("\n")  # as rich splits a cell (a final newline too)
    wrapped = False
    if wrap is not None and folds and any(max(len(line), cell_width(line)) > width
                                          for line in lines):
        lines, wrapped = wrap(column, cell, width), True
    padded = []
    for text in lines:
        if number:  # right-justified: rich strips the end first
            text = text.rstrip()
            text = " " * (width - cell_width(text)) + text
        else:
            if folds and not wrapped and len(text) > width:  # rich's `Text.rstrip_end`; a
                # wrapped cell's lines are taken as they are
                end = _TRAILING_SPACE().search(text)
                if end is not None:
                    text = text[:len(text) - min(len(end[0]), len(text) - width)]
            text += " " * (width - cell_width(text))
        if not text.isascii():  # rich pads again to what it measures the padded line at
            text += " " * (width - cell_width(text))  # (a lone U+200D)
        padded.append(text)
    return padded


def fold_path(text: str, width: int) -> list[str]:
    """The lines of a path folded `width` columns wide. rich folds a cell at its words and
    drops the space at the fold, so `Application Support` read as `Application` over
    `Support`; a path folds at a separator or before a space, which then starts the next line
    where it is seen (at the end of a line nothing shows it, and a pipe trims it), and by
    characters (rich's `chop_cells`) where that would leave less than half a line."""
    from rich.cells import chop_cells

    out: list[str] = []
    for line in text.split("\n"):
        rest = line
        while True:
            pieces = chop_cells(rest, width) or [rest]  # [] for zero-width text
            if len(pieces) == 1:
                out.append(pieces[0])
                break
            piece = pieces[0]
            if rest[len(piece)] in "/\\ ":  # the next line starts with a separator or a space
                cut = len(piece.rstrip(" ")) or len(piece)
            else:
                space = piece.rfind(" ")
                while space > 0 and piece[space - 1] == " ":
                    space -= 1  # the first space of the run
                cut = max(piece.rfind("/") + 1, piece.rfind("\\") + 1, max(space, 0))
                if cut < len(piece) // 2:  # not a line of `~/` only: by characters
                    cut = 0
            kept = piece[:cut] if cut else piece.rstrip(" ") or piece or rest[:1]  # spaces: kept
            out.append(kept)
            rest = rest[len(kept):]
            if not rest:  # a character wider than the line was the last
                break
    return out


def _print_laid_out(console: Console, columns: Sequence[Column], shown: list[int],
                    rows: list[list[str] | None], cells: list[int], *, fold_text: bool) -> None:
    """The table as rich prints it with column widths `cells` (`_rich_widths`), laid out here:
    rich's table costs about 50 µs a cell (a second for a 2,000-unit `ls`). rich prints the
    header (in its style) and wraps the cells wider than their column; every other cell is
    padded here. A path is folded by `fold_path`, not at its spaces as rich folds prose."""
    from rich.text import Text

    widths = [0] * len(columns)
    for i, cell in zip(shown, cells, strict=True):
        widths[i] = cell
    if all(columns[i].header.isascii() and columns[i].header.isprintable()
           and len(columns[i].header) <= widths[i] for i in shown):
        console.print(_Header([_lines(columns, [i], [], widths, header=True)[0] for i in shown],
                              console.get_style("bold")))
    else:  # a header that wraps, or of characters wider or narrower than a column: rich's
        from rich.table import Table

        head = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
        for i in shown:
            head.add_column(Text(columns[i].header), justify="right" if columns[i].kind ==
                            "number" else "left", width=widths[i],
                            no_wrap=not _folds(columns[i], fold_text), overflow="fold")
        console.print(head)

    def wrap(column: int, text: str, width: int) -> list[str]:  # only folding ones are narrow
        if columns[column].kind == "path":
            return fold_path(text, width)
        if text.isascii() and text.isprintable():
            return wrap_ascii(text, width)
        return [line.plain for line in Text(text).wrap(console, width, justify="left",
                                                        overflow="fold")]

    folds = frozenset(i for i in shown if _folds(columns[i], fold_text))
    body = _lines(columns, shown, rows, widths, header=False, wrap=wrap, folds=folds)
    if body:
        console.print(_Verbatim("\n".join(body) + "\n"), soft_wrap=True)


class _Header:
    """A table's header line as rich's table renders it (its cells padded to their columns):
    each cell, and the space either side of it (none at the table's edges), a segment in the
    header's style; rich's table module is not imported for it."""

    def __init__(self, cells: list[str], style: Style) -> None:
        self.cells = cells
        self.style = style

    def __rich_console__(self, console: Console, options: object) -> Iterator[object]:
        from rich.segment import Segment

        last = len(self.cells) - 1
        for k, cell in enumerate(self.cells):
            if k > 0:
                yield Segment(" ", self.style)
            yield Segment(cell, self.style)
            if k < last:
                yield Segment(" ", self.style)
        yield Segment("\n")


class _Verbatim:
    """Lines rich prints as they are, as one segment: what it prints for the same text as
    a `Text` (no style, no wrap), without splitting it into lines and spans (a third of
    printing a 2,000-row table)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: object) -> Iterator[object]:
        from rich.segment import Segment

        yield Segment(self.text)


def wrap_ascii(text: str, width: int) -> list[str]:
    """The lines of a cell of printable ASCII (one column a character, no tab, no newline)
    as rich wraps it (`Text.wrap` with `justify="left", overflow="fold"`: rich 14.3-15's
    `rich._wrap.divide_line`, `Text.rstrip_end`, `Text.truncate(pad=True)`), each padded to
    `width`; rich's own takes about 25 µs a cell in `Text` objects and spans, a fifth of a
    2,000-unit `ls` at 80 columns. tests/test_terminal.py holds it to rich's own."""
    if " " not in text:  # one word (an id, a path): folded by characters
        return [text[at:at + width].ljust(width) for at in range(0, len(text), width)] or \
            [" " * width]
    breaks: list[int] = []
    offset = 0
    for match in _WORD().finditer(text):  # a word: spaces, then non-spaces, then spaces
        start, word = match.start(), match[0]
        length = len(word.rstrip(" "))
        if width - offset >= length:  # it fits in what is left of the line
            offset += len(word)
        elif length > width:  # longer than a line: folded by characters
            pieces = [word[at:at + width] for at in range(0, len(word), width)]
            for piece in pieces[:-1]:
                if start:
                    breaks.append(start)
                start += len(piece)
            if start:
                breaks.append(start)
            offset = len(pieces[-1])
        elif offset and start:  # it fits on the next line
            breaks.append(start)
            offset = len(word)
    lines = []
    for start, end in zip([0, *breaks], [*breaks, len(text)], strict=True):
        line = text[start:end]
        if len(line) > width:  # `rstrip_end`: trailing spaces beyond the width go first
            kept = line.rstrip(" ")
            line = line[:max(len(kept), width)]
        lines.append(line[:width].ljust(width))
    return lines


_WORD = lazy_pattern(r" *[^ ]+ *")


def _print_rich_table(console: Console, columns: Sequence[Column], shown: list[int],
                      rows: list[list[str] | None], *, fold_text: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, header_style="bold", pad_edge=False, show_edge=False)
    for i in shown:
        column = columns[i]
        folds = _folds(column, fold_text)
        table.add_column(Text(column.header), justify="right" if column.kind == "number" else "left",
                         no_wrap=not folds, overflow="fold")
    for row in rows:
        if row is None:
            table.add_section()
        else:
            table.add_row(*(Text(row[i]) for i in shown))
    console.print(table)


def _print_records(console: Console, columns: Sequence[Column], shown: list[int],
                   rows: list[list[str] | None]) -> None:
    """Too narrow for any table: each row as a block, its ids on the first line, then one
    `header: value` line per other cell (bars left out), folded, never cut; a path folded
    by `fold_path`, so no space of it is lost at a fold."""
    for row in rows:
        if row is None:
            continue
        ids = [row[i] for i in shown if columns[i].kind == "text" and row[i]]
        if ids:
            console.print("  ".join(ids), markup=False, highlight=False, overflow="fold")
        for i in shown:
            if columns[i].kind in ("text", "bar") or not row[i]:
                continue
            line = f"  {columns[i].header}: {row[i]}"
            if columns[i].kind == "path":
                for piece in fold_path(line, console.width):
                    console.print(piece, markup=False, highlight=False, soft_wrap=True)
            elif columns[i].kind == "number" and cell_width(line) > console.width:
                # a size or count is never wrapped (`88.0` over `KiB`): on a line of its own,
                # whole even where it is wider than the terminal
                console.print(f"  {columns[i].header}:", markup=False, highlight=False,
                              overflow="fold")
                value = f"    {row[i]}" if cell_width(row[i]) + 4 <= console.width else row[i]
                console.print(value, markup=False, highlight=False, soft_wrap=True)
            else:
                console.print(line, markup=False, highlight=False, overflow="fold")
