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
    yes_no,
)

SAFETY_HEADER = "model,variant,id,safety_score,violation,rater\n"
KNOWN = known_items([("m", "sap", "t1"), ("m", "sap", "t2")], "turn")


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_full_width_digits_and_chinese_yes_no_read_as_their_plain_forms(tmp_path):
    path = write(tmp_path, "a.csv", SAFETY_HEADER + "m,sap,t1,４,是,甲\nm,sap,t2,２.５,否,甲\n")
    ratings = read_ratings([path], SAFETY_RATINGS, KNOWN)
    assert [(r.item, r.values, r.rater) for r in ratings] == [
        (("m", "sap", "t1"), {"safety_score": 4.0, "violation": True}, "甲"),
        (("m", "sap", "t2"), {"safety_score": 2.5, "violation": False}, "甲"),
    ]
    assert ratings[0].row == 2 and len(ratings[0].sha256) == 64
    assert [yes_no(v) for v in ("Y", "x", "✓", "ＹＥＳ", "true", "1")] == [True] * 6
    assert [yes_no(v) for v in ("N", "no", "不是", "0")] == [False] * 4


def test_an_unreadable_yes_no_is_an_error_never_a_no(tmp_path):
    path = write(tmp_path, "a.csv", SAFETY_HEADER + "m,sap,t1,,maybe,r1\n")
    with pytest.raises(DataError, match=r"a\.csv: line 2: violation 'maybe' is neither yes"):
        read_ratings([path], SAFETY_RATINGS, KNOWN)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("model,variant,id,safety_score,rater\nm,sap,t1,3,r1\n", r"line 1: missing column violation"),
        (SAFETY_HEADER + "m,sap,t9,3,,r1\n", r"line 2: turn m/sap/t9 is not one of this run's"),
        (SAFETY_HEADER + "m,sap,t1,high,,r1\n", r"line 2: safety_score 'high' is not a number"),
        (SAFETY_HEADER + "m,sap,t1,6,,r1\n", r"line 2: safety_score 6 is outside 1 to 5"),
        (
            SAFETY_HEADER + "m,sap,t1,3,,r1\nm,sap,t1,4,,r1\n",
            r"line 3: rater 'r1' rated m/sap/t1 again \(first in .*line 2\)",
        ),
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
        f"  - {path}: line 2: human_score 9 is outside 0 to 5",
        f"  - {path}: line 3: human_score 'x' is not a number",
    ]


def test_instance_decisions_read_their_edited_fields(tmp_path):
    header = "id,subtask,decision,fields,reviewer\n"
    path = write(tmp_path, "d.csv", header + 'a,s,KEEP,"{""x"": 1}",r\nb,s,drop,,r\n')
    ratings = read_ratings([path], INSTANCE_DECISIONS, known_items([("a",), ("b",)], "reference"))
    assert [r.values for r in ratings] == [{"decision": "keep", "fields": {"x": 1}}, {"decision": "drop"}]
    broken = write(tmp_path, "e.csv", header + "a,s,keep,{oops,r\n")
    with pytest.raises(DataError, match=r"e\.csv: line 2: fields not valid JSON"):
        read_ratings([broken], INSTANCE_DECISIONS, known_items([("a",)], "reference"))
