"""How every table the command prints fits the width it is printed at.

One rule, for every table:

* A ``figure`` or ``word`` column is as wide as its widest line (header lines included): a
  number, a header line or a short word is never cut or wrapped. Line breaks written into a cell
  or a header are the only places it breaks.
* A ``text`` column wraps between words; a ``preview`` column stays on one line and ends in an
  ellipsis. Neither is narrower than the longest word of its header.
* Optional columns (``drop`` > 0) are left out, lowest ``drop`` first, until the table's
  natural width fits: fixed columns whole, text columns unwrapped (up to their ``ceiling``),
  previews at their ``floor``. Every column left out is named in a footnote under the table.
* What room is left goes to the text columns, then to the previews, up to their natural width.
* When even the required columns do not fit at their narrowest, the rows are printed as
  ``header value`` lists, one entry per row, wrapped between words: still no line wider than
  the console and no figure cut.

Use it as ``console.print(fit_table(columns, rows, title=..., caption=...))``; the layout is
worked out when Rich renders it, for the width it is given. Cells are Rich markup (escape what
you did not write); a :class:`Note` cell wraps whatever its column's kind.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box as boxes
from rich.box import Box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.constrain import Constrain
from rich.table import Table
from rich.text import Text

__all__ = ["NOT_SHOWN", "Cell", "Column", "Kind", "Note", "fit_table"]

Kind = Literal["figure", "word", "text", "preview"]

NOT_SHOWN = "not shown at this width"
"""The footnote's words, followed by the columns left out."""

_WORD_CAP = 24
"""A text column need not be wider than this for one word: longer words (paths) fold."""
_PREVIEW_FLOOR = 8
_LIST_PREVIEW = 24
"""A preview's length in the list form (it has no column to end at)."""
_LIST_INDENT = 4


@dataclass(frozen=True)
class Column:
    """One column of a table: its header, what its cells are, and whether it may be left out."""

    header: str
    """Plain text; a line break in it is where it breaks (the footnote joins the lines)."""
    kind: Kind = "figure"
    """``figure``: right-aligned, never cut; ``word``: left-aligned, never cut; ``text``: wraps
    between words; ``preview``: one line, cut with an ellipsis."""
    drop: int = 0
    """0: always shown. Otherwise optional: the lowest number is left out first."""
    floor: int | None = None
    """Text and previews: the narrowest it is made (default: a text column's longest word, a
    preview's 8 characters)."""
    ceiling: int | None = None
    """Text and previews: the widest it is made (default: its widest line)."""
    justify: Literal["left", "right"] | None = None
    """Default: figures right, the rest left."""


@dataclass(frozen=True)
class Note:
    """A cell that wraps between words whatever its column's kind (a remark such as
    "… 12 more"); the list form prints it without its column's header."""

    markup: str


Cell = str | Note


def fit_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    *,
    title: str | None = None,
    caption: str | None = None,
    box: Box | None = boxes.SIMPLE_HEAD,
    section_ends: Collection[int] = (),
) -> _FittedTable:
    """The table, fitted when printed. ``section_ends``: indices of the rows a rule (or a
    blank line, in ``SIMPLE_HEAD``) follows. A table without any header shows none."""
    return _FittedTable(list(columns), [list(r) for r in rows], title, caption, box, section_ends)


@dataclass(frozen=True)
class _Extent:
    floor: int
    natural: int
    """The width the drop rule measures."""
    full: int
    """The widest it is given when there is room."""


@dataclass(frozen=True)
class _Layout:
    shown: list[int]
    dropped: list[int]
    widths: list[int] | None
    """Per shown column; None: the list form."""


def _text(cell: Cell) -> Text:
    if isinstance(cell, Note):
        text = Text.from_markup(cell.markup, overflow="fold")
        text.no_wrap = False
    else:
        text = Text.from_markup(cell)
    # Measured as printed: Rich expands a tab (a numbered file line) when it renders.
    text.expand_tabs()
    return text


def _lines(texts: Iterable[str]) -> list[int]:
    return [cell_len(line) for t in texts for line in t.split("\n")]


def _words(texts: Iterable[str]) -> list[int]:
    return [cell_len(word) for t in texts for word in t.split()]


def _extent(column: Column, cells: Sequence[Cell], texts: Sequence[Text]) -> _Extent:
    plain = [t.plain for c, t in zip(cells, texts, strict=True) if not isinstance(c, Note)]
    notes = [t.plain for c, t in zip(cells, texts, strict=True) if isinstance(c, Note)]
    # Header words and a note's words are never broken: the narrowest the column gets.
    unbroken = max(
        [*_words([column.header]), *(min(w, _WORD_CAP) for w in _words(notes))], default=0
    )
    if column.kind in ("figure", "word"):
        width = max([*_lines([column.header, *plain]), unbroken])
        return _Extent(width, width, width)
    widest = max(_lines([column.header, *plain, *notes]), default=0)
    if column.ceiling is not None:
        widest = min(widest, max(column.ceiling, unbroken))
    if column.kind == "text":
        longest = min(max(_words(plain), default=0), _WORD_CAP)
        floor = longest if column.floor is None else column.floor
        floor = max(unbroken, min(floor, widest))
        return _Extent(floor, widest, widest)
    floor = _PREVIEW_FLOOR if column.floor is None else column.floor
    floor = max(unbroken, min(floor, widest))
    return _Extent(floor, floor, widest)


def _overhead(count: int, box: Box | None) -> int:
    # Rich's default padding (one space either side) and, with a box, its edges and one rule
    # between columns: what Table adds to the column widths.
    return 2 * count + (count + 1 if box is not None else 0)


def _layout(
    columns: Sequence[Column], extents: Sequence[_Extent], width: int, box: Box | None
) -> _Layout:
    shown = list(range(len(columns)))
    order = sorted((c.drop, i) for i, c in enumerate(columns) if c.drop > 0)

    def natural() -> int:
        return sum(extents[i].natural for i in shown) + _overhead(len(shown), box)

    while natural() > width and order and len(shown) > 1:  # a table keeps one column
        shown.remove(order.pop(0)[1])
    dropped = [i for i in range(len(columns)) if i not in shown]
    room = width - _overhead(len(shown), box) - sum(extents[i].floor for i in shown)
    if room < 0:
        return _Layout(shown, dropped, None)
    widths = {i: extents[i].floor for i in shown}
    for kind in ("text", "preview"):  # text gives way only once the previews are narrowest
        room = _share(room, [i for i in shown if columns[i].kind == kind], widths, extents)
    return _Layout(shown, dropped, [widths[i] for i in shown])


def _share(
    room: int, flexible: list[int], widths: dict[int, int], extents: Sequence[_Extent]
) -> int:
    """Hand out ``room`` evenly among ``flexible`` columns, none beyond its full width."""
    wanting = [i for i in flexible if widths[i] < extents[i].full]
    while room > 0 and wanting:
        each = max(1, room // len(wanting))
        for i in wanting:
            given = min(each, extents[i].full - widths[i], room)
            widths[i] += given
            room -= given
        wanting = [i for i in wanting if widths[i] < extents[i].full]
    return room


class _FittedTable:
    def __init__(
        self,
        columns: list[Column],
        rows: list[list[Cell]],
        title: str | None,
        caption: str | None,
        box: Box | None,
        section_ends: Collection[int],
    ) -> None:
        self.columns = columns
        self.rows = rows
        self.title = title
        self.caption = caption
        self.box = box
        self.section_ends = section_ends
        # Parsed once: the markup of every cell is measured, then printed.
        self.texts = [[_text(cell) for cell in row] for row in rows]
        self.extents = [
            _extent(c, [r[i] for r in rows], [t[i] for t in self.texts])
            for i, c in enumerate(columns)
        ]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        layout = _layout(self.columns, self.extents, options.max_width, self.box)
        footnote = self._footnote(layout.dropped)
        if layout.widths is None:
            yield from self._listed(console, options.max_width, layout.shown, footnote)
            return
        # The title and the footnote are as wide as the table (as Rich's own would be), but
        # never narrower than a word of theirs: a narrow table does not cut a column's name.
        width = sum(layout.widths) + _overhead(len(layout.shown), self.box)
        if self.title:
            title = Text.from_markup(self.title, style="table.title", justify="left")
            yield Constrain(title, _annotation_width(title, width, options.max_width))
        yield self._table(layout.shown, layout.widths)
        if footnote is not None:
            footnote.stylize("table.caption")
            footnote.justify = "center"
            yield Constrain(footnote, _annotation_width(footnote, width, options.max_width))

    def _footnote(self, dropped: Sequence[int]) -> Text | None:
        caption = Text.from_markup(self.caption) if self.caption else None
        if not dropped:
            return caption
        names = ", ".join(" ".join(self.columns[i].header.split()) for i in dropped)
        note = Text(f"{NOT_SHOWN}: {names} (see --json, or a wider COLUMNS)")
        return note if caption is None else Text("\n").join([caption, note])

    def _table(self, shown: list[int], widths: list[int]) -> Table:
        table = Table(
            box=self.box,
            show_header=any(c.header for c in self.columns),
        )
        for i, width in zip(shown, widths, strict=True):
            c = self.columns[i]
            header = Text(c.header, overflow="fold")
            header.no_wrap = False  # between its words; the floor keeps each word whole
            table.add_column(
                header,
                justify=c.justify or ("right" if c.kind == "figure" else "left"),
                width=width,
                no_wrap=c.kind != "text",
                overflow="ellipsis" if c.kind == "preview" else "fold",
            )
        for n, row in enumerate(self.texts):
            table.add_row(*(row[i] for i in shown), end_section=n in self.section_ends)
        return table

    def _listed(
        self, console: Console, width: int, shown: list[int], footnote: Text | None
    ) -> RenderResult:
        """The list form: per row ``first: header value; header value``, each ``header
        value`` kept on one line where it fits one."""
        if self.title:
            yield Text.from_markup(self.title, style="table.title")
        for row, texts in zip(self.rows, self.texts, strict=True):
            pieces: list[Text] = []
            labelled = False  # the first column's cell leads: "req 25: pos 2; ..."
            for i in shown:
                cell = row[i]
                text = Text(" ").join(texts[i].split("\n"))
                if not text.plain.strip():
                    continue
                if self.columns[i].kind == "preview" and not isinstance(cell, Note):
                    text.truncate(_LIST_PREVIEW, overflow="ellipsis")
                header = " ".join(self.columns[i].header.split())
                bare = isinstance(cell, Note) or not header  # a remark, or a headerless table
                pieces.append(text if bare else Text(f"{header} ") + text)
                labelled = labelled or i == shown[0]
            if pieces:
                yield _entry(console, pieces, width, labelled=labelled)
        if footnote is not None:
            footnote.stylize("table.caption")
            yield footnote


def _annotation_width(text: Text, table: int, console: int) -> int:
    return min(console, max([table, *_words([text.plain])]))


def _entry(console: Console, pieces: list[Text], width: int, *, labelled: bool) -> Text:
    """``pieces`` joined (``first: second; third``) and wrapped to ``width``: a piece moves to
    the next line whole where it fits one, else it wraps between its words; continued lines
    are indented."""
    indent = min(_LIST_INDENT, width // 4)
    lines: list[Text] = [Text()]

    def room() -> int:
        # One column kept for the separator that may end the line.
        return width - 1 - (0 if len(lines) == 1 else indent)

    def add(atom: Text, *, joined: bool) -> None:
        line = lines[-1]
        gap = 1 if joined and line.plain else 0
        if line.cell_len + gap + atom.cell_len <= room():
            line.append(" " * gap)
            line.append_text(atom)
            return
        if line.plain:
            lines.append(Text())
        for part in atom.wrap(console, max(1, room()), justify="default", overflow="fold"):
            if lines[-1].plain:
                lines.append(Text())
            lines[-1].append_text(part.copy())

    for n, piece in enumerate(pieces):
        if n:
            lines[-1].append(":" if n == 1 and labelled else ";")
        if piece.cell_len <= width - 1 - indent:
            add(piece, joined=n > 0)
            continue
        for k, word in enumerate(piece.split(" ")):  # longer than a line: word by word
            add(word, joined=n > 0 or k > 0)
    out = [lines[0], *(Text(" " * indent) + line for line in lines[1:])]
    return Text("\n").join(out)
