"""Rating offline: a rater's open items of one task as a CSV file, and filled-in files back into the store.

The file names each item by its desk number and the hash of what it shows, never by model or variant, so the
rater stays blind offline too. It is read back by the project's one strict importer (``h2htalk.ratings``) with
the task's own value columns, then every rating is checked as the desk checks it (the item current and as
exported, assigned to the rater, not rated by them before, the task's rules); one problem and nothing is
stored. A rating already in the store with the same values is skipped, so a file can be imported again.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from typing import Any

from h2htalk.desk_store.store import ReviewStore, StoredItem
from h2htalk.desk_store.tasks import GATED, NEED, SAFETY, TASKS, Refused, complete_values
from h2htalk.io import write_text_atomic
from h2htalk.ratings import Rating, Sheet, import_error, read_ratings
from h2htalk.sheets import normalise

ITEM_COLUMNS = ("desk_item", "item_hash")
RATER = "rater"


def offline_item(column: str, text: str) -> str:
    """A cell of the item's columns: the desk item's number as the desk writes it (07 is item 7), or its hash."""
    value = normalise(text)
    if column == "desk_item":
        if not (value.isascii() and value.isdigit()):
            raise ValueError("is not a desk item's number")
        return str(int(value))
    return value


def offline_sheet(task: str) -> Sheet:
    """The task's sheet with the desk's item columns in place of the model, variant and id."""
    sheet = TASKS[task].sheet
    return Sheet(f"{sheet.kind} (offline)", ITEM_COLUMNS, sheet.values, RATER, offline_item)


def _dialogue(turns: list[dict[str, str]]) -> str:
    return "\n".join(f"{'用户' if t['role'] == 'user' else '伴侣'}：{t['content']}" for t in turns)


def shown_columns(item: StoredItem) -> dict[str, str]:
    """What the desk shows of an item, as text columns."""
    shown = item.shown
    if item.task == GATED:
        level = shown["level"]
        rules = "\n".join((
            level["level_name"], f"格式：{level['format_rule']}", f"人物：{level['persona_rule']}",
            f"信息利用：{level['use_rule']}",
        ))  # fmt: skip
        return {
            "rubric": shown["rubric"], "level": rules, "system": shown["system"], "task": shown["task"],
            "answer": shown["answer"], "reference": shown["reference"],
        }  # fmt: skip
    if item.task == SAFETY:
        definitions = f"{shown['guide']['score']}\n\n{shown['guide']['violation']}"
        return {
            "definitions": definitions, "system": shown["system"], "conversation": _dialogue(shown["conversation"]),
            "answer": shown["answer"],
        }  # fmt: skip
    if item.task == NEED:
        return {
            "system": shown["system"], "conversation": _dialogue(shown["conversation"]), "answer": shown["answer"],
            "need": shown["need"],
        }  # fmt: skip
    fields = "" if shown["fields"] is None else json.dumps(shown["fields"], ensure_ascii=False)
    return {
        "instruction": shown["instruction"], "task": shown["task"] or "", "reference": shown["reference"],
        "fields_shown": fields,
    }  # fmt: skip


def export_open_items(store: ReviewStore, rater: str, task: str, seed: int, out: str | os.PathLike[str]) -> int:
    """The rater's items of ``task`` not rated yet, in their order, as CSV with empty value columns."""
    items = [store.item(item_id) for item_id, rated in store.queue(rater, task, seed) if not rated]
    rows = [{"desk_item": str(i.id), "item_hash": i.hash, **shown_columns(i)} for i in items if i is not None]
    values = [f.column for f in TASKS[task].sheet.values]
    shown = list(rows[0])[len(ITEM_COLUMNS) :] if rows else []
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[*ITEM_COLUMNS, *shown, *values, RATER], lineterminator="\n")
    writer.writeheader()
    writer.writerows({**row, **dict.fromkeys(values, ""), RATER: rater} for row in rows)
    write_text_atomic(out, buffer.getvalue())
    return len(rows)


def import_ratings(store: ReviewStore, task: str, paths: Sequence[str | os.PathLike[str]]) -> tuple[int, int]:
    """Append the ratings of filled-in offline files of ``task``: (stored, already there)."""

    def check(item: tuple[str, ...]) -> str | None:
        number, item_hash = item
        stored = store.item(int(number))
        if stored is None or stored.task != task:
            return f"desk_item {number} is not an item of the {task} task"
        if not stored.current or stored.hash != item_hash:
            return f"desk_item {number} has changed since it was exported (item_hash): export it again"
        return None

    ratings = read_ratings(paths, offline_sheet(task), check)
    problems: list[str] = []
    pending: list[tuple[Rating, tuple[int, str, str, dict[str, Any]]]] = []
    already = 0
    for rating in ratings:
        item = store.item(int(rating.item[0]))
        try:
            values = complete_values(task, rating.values, item.shown)
        except Refused as exc:
            problems.append(f"{rating.where()}: {exc}")
            continue
        earlier = store.rating(item.id, rating.rater)
        if earlier == json.loads(json.dumps(values)):
            already += 1
        elif earlier is not None:
            problems.append(f"{rating.where()}: {rating.rater} rated desk_item {item.id} before, differently")
        elif not store.is_assigned(item.id, rating.rater):
            problems.append(f"{rating.where()}: desk_item {item.id} is not assigned to rater {rating.rater!r}")
        else:
            pending.append((rating, (item.id, rating.rater, item.hash, values)))
    if problems:
        raise import_error(TASKS[task].sheet.kind, problems)
    via = "import " + ", ".join(os.path.basename(p) for p in paths)
    try:
        return len(store.rate_many([rating for _, rating in pending], via)), already
    except Refused as exc:  # rated at the desk meanwhile: the store's own checks, in the commit's transaction
        raise import_error(TASKS[task].sheet.kind, [f"{pending[exc.index or 0][0].where()}: {exc}"]) from None
