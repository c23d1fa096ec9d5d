"""Write one table as CSV, Markdown and LaTeX (booktabs) from the same rows."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h2htalk.io import write_text_atomic

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def format_cell(value: Any, digits: int = 2) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


@dataclass
class Table:
    columns: Sequence[str]
    rows: Sequence[Mapping[str, Any]]
    caption: str = ""
    label: str = ""
    digits: int = 2
    # Optional LaTeX cell decoration: (row index, column) -> LaTeX command wrapping the cell, e.g. "\\textbf".
    latex_marks: dict[tuple[int, str], str] = field(default_factory=dict)
    # Rows shown below a rule in Markdown and LaTeX only (totals); the CSV keeps one row per item.
    footer: Sequence[Mapping[str, Any]] = ()
    notes: Sequence[str] = ()

    def cells(self, row: Mapping[str, Any]) -> list[str]:
        return [format_cell(row.get(col), self.digits) for col in self.columns]

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(self.columns)
        for row in self.rows:
            writer.writerow(self.cells(row))
        return buffer.getvalue()

    def to_markdown(self) -> str:
        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.replace("|", r"\|") for c in cells) + " |"

        numeric = [all(_is_number(r.get(c)) for r in self.rows if r.get(c) is not None) for c in self.columns]
        align = ["---:" if n else ":---" for n in numeric]
        out = []
        if self.caption:
            out += [f"**{self.caption}**", ""]
        out += [line(self.columns), "| " + " | ".join(align) + " |"]
        out += [line(self.cells(row)) for row in self.rows]
        out += [line([f"**{c}**" if c else c for c in self.cells(row)]) for row in self.footer]
        if self.notes:
            out += ["", *(f"- {note}" for note in self.notes)]
        return "\n".join(out) + "\n"

    def to_latex(self) -> str:
        numeric = [all(_is_number(r.get(c)) for r in self.rows if r.get(c) is not None) for c in self.columns]
        spec = "".join("r" if n else "l" for n in numeric)
        out = [r"\begin{table}[t]", r"\centering"]
        if self.caption:
            out.append(rf"\caption{{{latex_escape(self.caption)}}}")
        if self.label:
            out.append(rf"\label{{{self.label}}}")
        out += [rf"\begin{{tabular}}{{{spec}}}", r"\toprule"]
        out.append(" & ".join(latex_escape(c) for c in self.columns) + r" \\")
        out.append(r"\midrule")
        for index, row in enumerate(self.rows):
            cells = []
            for col, cell in zip(self.columns, self.cells(row), strict=True):
                text = latex_escape(cell)
                mark = self.latex_marks.get((index, col))
                cells.append(rf"{mark}{{{text}}}" if mark else text)
            out.append(" & ".join(cells) + r" \\")
        if self.footer:
            out.append(r"\midrule")
            out += [" & ".join(latex_escape(c) for c in self.cells(row)) + r" \\" for row in self.footer]
        out += [r"\bottomrule", r"\end{tabular}"]
        if self.notes:
            out.append(r"\par\footnotesize " + " ".join(latex_escape(n) for n in self.notes))
        out.append(r"\end{table}")
        return "\n".join(out) + "\n"

    def write(
        self, csv_path: str | os.PathLike[str], md_path: str | os.PathLike[str], tex_path: str | os.PathLike[str]
    ) -> None:
        write_text_atomic(Path(csv_path), self.to_csv())
        write_text_atomic(Path(md_path), self.to_markdown())
        write_text_atomic(Path(tex_path), self.to_latex())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
