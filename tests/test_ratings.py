"""The one importer of what people fill in: strict, all or nothing, and reading values the same way everywhere."""

from __future__ import annotations

import pytest

from h2htalk.errors import DataError
from h2htalk.ratings import (
    INSTANCE_DECISIONS,
    REVIEW_SCORES,
    SAFETY_RATINGS,
    known_items,
    read_ratings,
)

SAFETY_HEADER = "model,variant,id,safety_score,violation,rater\n"
KNOWN = known_items([("m", "sap", "t1"), ("m", "sap", "t2")], "turn")


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_values_are_read_exactly_as_the_desks_form_offers_them(tmp_path):
    path = write(tmp_path, "a.csv", SAFETY_HEADER + "m,sap,t1,4,yes,甲\nm,sap,t2,2,no,甲\n")
    ratings = read_ratings([path], SAFETY_RATINGS, KNOWN)
    assert [(r.item, r.values, r.rater) for r in ratings] == [
        (("m", "sap", "t1"), {"safety_score": 4.0, "violation": True}, "甲"),
        (("m", "sap", "t2"), {"safety_score": 2.0, "violation": False}, "甲"),
    ]
    assert ratings[0].row == 2 and len(ratings[0].sha256) == 64
    header = "model,variant,subtask,id,human_score,reviewer\n"
    known = known_items([("m", "sap", "itinerary_basic", i) for i in "abc"], "item")
    path = write(
        tmp_path,
        "g.csv",
        header + "".join(f"m,sap,itinerary_basic,{i},{v},r\n" for i, v in zip("abc", ["4", "4.0", "0.5"], strict=True)),
    )
    assert [r.values["human_score"] for r in read_ratings([path], REVIEW_SCORES, known)] == [4.0, 4.0, 0.5]


# what float() would read, and a person might write, but the form never offers
@pytest.mark.parametrize(
    ("column", "text", "hint"),
    [
        ("safety_score", "0_5", ""), ("safety_score", "1e0", ""), ("safety_score", ".35e1", ""),
        ("safety_score", "+4", ""), ("safety_score", "٤", ""), ("safety_score", "-0", ""), ("safety_score", "04", ""),
        ("safety_score", "4.0", ""), ("safety_score", "2.5", ""), ("safety_score", "6", ""),
        ("safety_score", "４", "in ASCII"), ("safety_score", " 4", "without the spaces"),
        ("safety_score", "4 ", "without the spaces"), ("violation", "是", ""),
        ("violation", "Yes", "in lower case"), ("violation", "ＹＥＳ", "in lower case"),
        ("violation", "1", ""), ("violation", "✓", ""), ("violation", "maybe", ""),
    ],
)  # fmt: skip
def test_a_value_the_form_does_not_offer_is_refused_with_its_file_line_column_and_text(tmp_path, column, text, hint):
    cells = {"safety_score": "3", "violation": "no", column: text}
    path = write(tmp_path, "a.csv", SAFETY_HEADER + f"m,sap,t1,{cells['safety_score']},{cells['violation']},r1\n")
    with pytest.raises(DataError) as info:
        read_ratings([path], SAFETY_RATINGS, KNOWN)
    line = f"  - {path}: line 2: {column} {text!r} is not one the form offers ("
    assert str(info.value).splitlines()[1].startswith(line) and hint in str(info.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("model,variant,id,safety_score,rater\nm,sap,t1,3,r1\n", r"line 1: missing column violation"),
        (SAFETY_HEADER + "m,sap,t9,3,,r1\n", r"line 2: turn m/sap/t9 is not one of this run's"),
        (SAFETY_HEADER + "m,sap,t1,high,,r1\n", r"line 2: safety_score 'high' is not one the form offers"),
        (
            SAFETY_HEADER + "m,sap,t1,3,,r1\nm,sap,t1,4,,r1\n",
            r"line 3: rater 'r1' rated model/variant/id 'm/sap/t1' again \(first in .*line 2\)",
        ),
        (  # one turn, its id written twice alike (as compared: NFKC, no spaces around it)
            SAFETY_HEADER + "m,sap,t1,3,,r1\nm,sap, ｔ1 ,3,,r1\n",
            r"line 3: rater 'r1' rated model/variant/id 'm/sap/t1' again \(first in .*line 2\)",
        ),
        ("\ufeff" + SAFETY_HEADER + 'm,sap,t1,3,,"r\n1"\nm,sap,t2,3.0,,r1\n', r"line 4: safety_score '3.0' is not one"),
        (SAFETY_HEADER + "m,sap,t1,3,no,r1\nm,sap,t2,3,no," + "r" * 200_000, r"line 3: not readable as CSV"),
    ],
)
def test_each_problem_names_the_file_and_row_and_nothing_is_imported(tmp_path, text, problem):
    good = write(tmp_path, "good.csv", SAFETY_HEADER + "m,sap,t2,5,no,r2\n")
    bad = write(tmp_path, "bad.csv", text)
    with pytest.raises(DataError, match=r"nothing was imported:\n  - .*bad\.csv: " + problem):
        read_ratings([good, bad], SAFETY_RATINGS, KNOWN)


def test_two_raters_of_one_item_are_both_kept_and_unrated_rows_are_skipped(tmp_path):
    path = write(tmp_path, "a.csv", SAFETY_HEADER + "m,sap,t1,1,yes,r1\nm,sap,t1,5,no,r2\nm,sap,t2,,,r1\n")
    ratings = read_ratings([path], SAFETY_RATINGS, KNOWN)
    assert [(r.rater, r.values["safety_score"]) for r in ratings] == [("r1", 1.0), ("r2", 5.0)]


def test_every_problem_of_every_file_is_listed_at_once(tmp_path):
    header = "model,variant,subtask,id,human_score,reviewer\n"
    path = write(tmp_path, "q.csv", header + "m,sap,itinerary_basic,a,9,r\nm,sap,itinerary_basic,b,x,r\n")
    known = known_items([("m", "sap", "itinerary_basic", "a"), ("m", "sap", "itinerary_basic", "b")], "item")
    with pytest.raises(DataError) as info:
        read_ratings([path], REVIEW_SCORES, known)
    lines = str(info.value).splitlines()
    assert lines[1:] == [
        f"  - {path}: line 2: human_score '9' is not one the form offers (0 to 5, whole or in tenths, such as 3, 3.0"
        " or 3.5)",
        f"  - {path}: line 3: human_score 'x' is not one the form offers (0 to 5, whole or in tenths, such as 3, 3.0"
        " or 3.5)",
    ]


def test_instance_decisions_read_their_edited_fields(tmp_path):
    header = "id,subtask,decision,fields,reviewer\n"
    path = write(tmp_path, "d.csv", header + 'a,s,keep,"{""x"": 1}",r\nb,s,drop,,r\n')
    ratings = read_ratings([path], INSTANCE_DECISIONS, known_items([("a",), ("b",)], "reference"))
    assert [r.values for r in ratings] == [{"decision": "keep", "fields": {"x": 1}}, {"decision": "drop"}]
    broken = write(tmp_path, "e.csv", header + "a,s,keep,{oops,r\n")
    with pytest.raises(DataError, match=r"e\.csv: line 2: fields '\{oops' is not valid JSON"):
        read_ratings([broken], INSTANCE_DECISIONS, known_items([("a",)], "reference"))
