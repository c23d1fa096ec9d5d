"""``io.read_csv``, the one reader of the CSV files the workflow writes and reads back (tables, the agreement
report, the desk's exports, Snakemake's benchmark files): every row written by ``csv.writer`` reads back as it was
written, whatever its text holds (quotes, commas, line breaks, CJK); a row with more or fewer fields than the header
names its file and its line, where ``csv.DictReader`` would pad it with None or keep the rest under None."""

from __future__ import annotations

import csv

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from h2htalk.errors import DataError
from h2htalk.io import read_csv

from .test_properties import SETTINGS

FIELD = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)


def _write(path, header, rows, delimiter=","):
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)


@settings(max_examples=150, **SETTINGS)
@given(data=st.data(), width=st.integers(1, 5), delimiter=st.sampled_from([",", "\t"]))
def test_every_row_written_reads_back_as_it_was(tmp_path_factory, data, width, delimiter):
    header = data.draw(st.lists(FIELD, min_size=width, max_size=width, unique=True), label="header")
    rows = data.draw(st.lists(st.lists(FIELD, min_size=width, max_size=width), max_size=6), label="rows")
    path = tmp_path_factory.mktemp("csv") / "table.csv"
    _write(path, header, rows, delimiter)
    expected = [dict(zip(header, row, strict=True)) for row in rows]  # one empty field is written '""', not blank
    assert read_csv(path, delimiter=delimiter) == expected


def test_a_row_of_the_wrong_width_names_its_file_and_line(tmp_path):
    path = tmp_path / "table2.csv"
    path.write_text('model,S,J\na,1,2\n\n"b\nc",3\nd,4,5\n', encoding="utf-8")  # line 4-5: one quoted field
    with pytest.raises(DataError, match=rf"{path}: line 5: 2 fields, its header has 3"):
        read_csv(path)
    path.write_text("model,S,J\na,1,2,3\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}: line 2: 4 fields, its header has 3"):
        read_csv(path)
    with pytest.raises(DataError, match=rf"{tmp_path / 'none.csv'}: file not found \(the pairs job writes it\)"):
        read_csv(tmp_path / "none.csv", "the pairs job writes it")
    path.write_text("", encoding="utf-8")
    assert read_csv(path) == []
    path.write_text("模型,分数\n甲,1\n", encoding="utf-8")
    assert read_csv(path) == [{"模型": "甲", "分数": "1"}]
    path.write_bytes("\ufeff模型,分数\r\n甲,1\r\n".encode())  # saved with a byte-order mark and CRLF (a spreadsheet)
    assert read_csv(path) == [{"模型": "甲", "分数": "1"}]
    path.write_bytes("模型,分数\n甲,1\n乙,2\n".encode("gbk"))  # another encoding: named, not a UnicodeDecodeError
    with pytest.raises(DataError, match=rf"{path}: line 1: not UTF-8 text"):
        read_csv(path)
    path.write_bytes(b"model,S\na,1\n" + "乙,2\n".encode("gbk"))
    with pytest.raises(DataError, match=rf"{path}: line 3: not UTF-8 text"):
        read_csv(path)
