"""The shared table writer (pandas): one cell text for every format, footer and notes, LaTeX escaping."""

from __future__ import annotations

import re

import pandas as pd

from h2htalk.tabular import cell_text, latex_escape, records_frame, write_table


def test_records_frame_keeps_ints_and_missing_values():
    frame = records_frame([{"a": 1, "b": 2.5}, {"a": None}], ["a", "b"])
    assert [type(v) for v in frame["a"]] == [int, type(None)] and frame["b"].tolist()[0] == 2.5
    assert [cell_text(v) for v in (None, float("nan"), True, 3, 2.0, "x")] == ["", "", "yes", "3", "2.00", "x"]
    assert cell_text(1 / 3, "{:.4f}") == "0.3333" and cell_text(0.1, "{}") == "0.1"


def test_write_table_csv_md_tex(tmp_path):
    frame = records_frame(
        [{"name": "a_b", "n": 3, "score": 1 / 3}, {"name": 'x|y, "z"', "n": None, "score": 2.0}],
        ["name", "n", "score"],
    )
    total = records_frame([{"name": "total", "n": 3, "score": None}], ["name", "n", "score"])
    marks = pd.DataFrame([["", "", "first"], ["", "", ""]], columns=frame.columns)
    notes = ["50 % of $x_1$ & more.", "Second note."]
    files = {suffix: tmp_path / f"t.{suffix}" for suffix in ("csv", "md", "tex")}
    write_table(frame, files, caption="Caption #1", label="tab:t", notes=notes, marks=marks, footer=total)
    assert (tmp_path / "t.csv").read_text(encoding="utf-8") == (
        'name,n,score\na_b,3,0.33\n"x|y, ""z""",,2.00\n'  # no footer row in the CSV
    )
    md = (tmp_path / "t.md").read_text(encoding="utf-8").splitlines()
    assert md[0] == "**Caption #1**" and md[1] == ""
    assert re.fullmatch(r"\|:-+\|-+:\|-+:\|", md[3])  # text left, numbers right
    assert md[5].startswith(r"| x\|y, " + '"z" |')  # a pipe in a cell is escaped
    assert [c.strip() for c in md[6].split("|")[1:-1]] == ["**total**", "**3**", ""]
    assert md[-2:] == ["- 50 % of $x_1$ & more.", "- Second note."]
    tex = (tmp_path / "t.tex").read_text(encoding="utf-8").splitlines()
    assert tex[:6] == [
        r"\begin{table}[t]",
        r"\centering",
        r"\caption{Caption \#1}",
        r"\label{tab:t}",
        r"\begin{tabular}{lrr}",
        r"\toprule",
    ]
    assert tex[6:12] == [
        r"name & n & score \\",
        r"\midrule",
        r"a\_b & 3 & \first{0.33} \\",
        r"x|y, " + '"z"' + r" &  & 2.00 \\",
        r"\midrule",
        r"total & 3 &  \\",
    ]
    assert tex[12:] == [
        r"\bottomrule",
        r"\end{tabular}",
        r"\par\footnotesize 50 \% of \$x\_1\$ \& more. Second note.",
        r"\end{table}",
    ]
    assert latex_escape(r"a\b ~ c^d {e}") == r"a\textbackslash b \textasciitilde \space c\textasciicircum d \{e\}"
