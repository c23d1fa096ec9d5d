"""Write tables with pandas: CSV (``DataFrame.to_csv``), Markdown (``DataFrame.to_markdown``, tabulate) and
LaTeX (``Styler.to_latex`` with booktabs rules), every file through an atomic write.

A table is a DataFrame of plain values (``records_frame`` keeps ints as ints and missing values as None). Every
format shows a cell the same way (``cell_text``): missing -> empty, float -> ``float_format``, anything else
-> ``str``. Markdown puts the caption above and the notes below the table as a bullet list; LaTeX escapes
cells, headers, caption and notes with pandas' own escaping and puts the notes under the tabular in a
footnotesize paragraph. Footer rows (totals) follow the rows in Markdown (bold) and LaTeX (after a rule),
never in the CSV. ``marks`` wraps single LaTeX cells in a command, e.g. ``\\first{41.00}`` for a top score.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.io import write_text_atomic

if TYPE_CHECKING:  # pandas is imported by the functions that write: a module that declares a stage loads cheaply
    import pandas as pd

FLOAT_FORMAT = "{:.2f}"
Files = Mapping[str, "str | os.PathLike[str]"]  # a table's files by name (csv, md, tex, ...), as its stage declares


def records_frame(records: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """A DataFrame of ``columns`` from dict records, values as they are (object dtype: no int -> float upcast;
    a missing key or None stays None)."""
    import pandas as pd

    return pd.DataFrame([[record.get(c) for c in columns] for record in records], columns=list(columns), dtype=object)


def missing(value: Any) -> bool:
    import pandas as pd

    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def cell_text(value: Any, float_format: str = FLOAT_FORMAT) -> str:
    if missing(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return float_format.format(value)
    return str(value)


def text_frame(frame: pd.DataFrame, float_format: str = FLOAT_FORMAT) -> pd.DataFrame:
    """Every cell as the text all formats show."""
    return frame.astype(object).map(lambda value: cell_text(value, float_format))


def numeric_columns(frame: pd.DataFrame) -> list[bool]:
    """Per column: every present value is a number (right-aligned in Markdown and LaTeX)."""

    def numeric(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    values = frame.astype(object)
    return [all(numeric(v) for v in values[column] if not missing(v)) for column in values.columns]


def csv_text(frame: pd.DataFrame, float_format: str = FLOAT_FORMAT) -> str:
    return text_frame(frame, float_format).to_csv(index=False, lineterminator="\n")


def write_csv(frame: pd.DataFrame, path: str | os.PathLike[str], *, float_format: str = FLOAT_FORMAT) -> None:
    write_text_atomic(Path(path), csv_text(frame, float_format))


def markdown_text(
    frame: pd.DataFrame,
    *,
    caption: str = "",
    notes: Sequence[str] = (),
    footer: pd.DataFrame | None = None,
    float_format: str = FLOAT_FORMAT,
) -> str:
    """``**caption**``, the pipe table (footer rows in bold), then the notes as a bullet list."""
    import pandas as pd

    body = text_frame(frame, float_format)
    if footer is not None and len(footer):
        bold = text_frame(footer.reindex(columns=frame.columns), float_format).map(lambda t: f"**{t}**" if t else t)
        body = pd.concat([body, bold], ignore_index=True)
    body = body.map(lambda t: t.replace("|", r"\|"))
    body.columns = [str(c).replace("|", r"\|") for c in frame.columns]
    align = ["right" if numeric else "left" for numeric in numeric_columns(frame)]
    table = body.to_markdown(index=False, tablefmt="pipe", disable_numparse=True, colalign=align)
    out = [f"**{caption}**", ""] if caption else []
    out.append(table)
    if notes:
        out += ["", *(f"- {note}" for note in notes)]
    return "\n".join(out) + "\n"


def latex_escape(text: str) -> str:
    """``text`` escaped as ``Styler.format(escape="latex")`` escapes a cell (pandas does it: same rules)."""
    import pandas as pd

    styler = pd.DataFrame([[text]]).style.hide(axis="index").hide(axis="columns").format(escape="latex")
    return styler.to_string().removesuffix("\n")


def latex_text(
    frame: pd.DataFrame,
    *,
    caption: str = "",
    label: str = "",
    notes: Sequence[str] = (),
    marks: pd.DataFrame | None = None,
    footer: pd.DataFrame | None = None,
    float_format: str = FLOAT_FORMAT,
) -> str:
    """A booktabs ``table`` environment: escaped cells, ``marks`` (a frame like ``frame`` holding a LaTeX
    command name or "" per cell: "first" makes ``\\first{value}``), footer rows after a rule, notes below."""
    import pandas as pd

    body = text_frame(frame, float_format).reset_index(drop=True)
    rows = len(body)
    if footer is not None and len(footer):
        body = pd.concat([body, text_frame(footer.reindex(columns=frame.columns), float_format)], ignore_index=True)
    styler = body.style.hide(axis="index").format(escape="latex").format_index(escape="latex", axis="columns")
    if marks is not None:
        commands = marks.reset_index(drop=True).reindex(index=body.index, columns=body.columns)
        props = commands.map(lambda command: f"{command}:--rwrap;" if isinstance(command, str) and command else "")
        styler = styler.apply(lambda _: props, axis=None)
    text = styler.to_latex(
        column_format="".join("r" if numeric else "l" for numeric in numeric_columns(frame)),
        position="t",
        position_float="centering",
        hrules=True,
        label=label or None,
        caption=latex_escape(caption) if caption else None,
        environment="table",
    )
    lines = text.splitlines()
    if len(body) > rows:  # a rule between the rows and the footer: the body rows follow the header's \midrule
        at = lines.index(r"\midrule") + 1 + rows
        lines.insert(at, r"\midrule")
    if notes:
        lines.insert(lines.index(r"\end{tabular}") + 1, r"\par\footnotesize " + " ".join(map(latex_escape, notes)))
    return "\n".join(lines) + "\n"


def write_table(
    frame: pd.DataFrame,
    files: Files,
    *,
    caption: str,
    label: str,
    notes: Sequence[str] = (),
    marks: pd.DataFrame | None = None,
    footer: pd.DataFrame | None = None,
    float_format: str = FLOAT_FORMAT,
    csv: bool = True,
) -> None:
    """The table's ``csv`` (unless ``csv`` is False: a table whose CSV holds more, e.g. CIs, writes it itself),
    ``md`` and ``tex`` files (named in ``files``), each atomically."""
    if csv:
        write_csv(frame, files["csv"], float_format=float_format)
    md = markdown_text(frame, caption=caption, notes=notes, footer=footer, float_format=float_format)
    write_text_atomic(files["md"], md)
    tex = latex_text(
        frame, caption=caption, label=label, notes=notes, marks=marks, footer=footer, float_format=float_format
    )
    write_text_atomic(files["tex"], tex)
