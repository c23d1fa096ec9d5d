"""Collect the per-subtask curation reports into one report (JSON for machines, Markdown for people)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from h2htalk.data.anonymise import PII_TYPES
from h2htalk.data.curate import FLAGS
from h2htalk.io import read_json, write_json_atomic, write_text_atomic
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import EARLY
from h2htalk.stages.spec import Done, One
from h2htalk.tabular import markdown_text, records_frame


def combine_reports(reports: Iterable[dict[str, Any]]) -> dict[str, Any]:
    reports = list(reports)
    categories = list(reports[0]["sensitive"]) if reports else []
    totals = {
        "released": sum(r["released"] for r in reports),
        "kept": sum(r["kept"] for r in reports),
        "flags": {f: sum(r["flags"][f] for r in reports) for f in FLAGS},
        "pii": {k: sum(r["pii"][k] for r in reports) for k in PII_TYPES},
        "sensitive": {c: sum(r["sensitive"].get(c, 0) for r in reports) for c in categories},
    }
    return {"totals": totals, "subtasks": reports}


def _count_table(reports: list[dict[str, Any]], section: str, keys: Iterable[str], caption: str) -> str:
    columns = ["subtask", *keys]
    rows = [{"subtask": r["subtask"], **{k: r[section].get(k, 0) for k in columns[1:]}} for r in reports]
    total = {"subtask": "total", **{k: sum(row[k] for row in rows) for k in columns[1:]}}
    return markdown_text(records_frame(rows, columns), caption=caption, footer=records_frame([total], columns))


def render_markdown(combined: dict[str, Any]) -> str:
    reports = combined["subtasks"]
    totals = combined["totals"]
    options = reports[0]["options"] if reports else {}
    parts = [
        "# Curation report",
        "",
        f"Released references: {totals['released']}; kept: {totals['kept']}.",
        f"Excluded from `kept`: items flagged {', '.join(options.get('exclude_flags', [])) or 'nothing'}.",
        f"Identifier handling: {', '.join(f'{k}={v}' for k, v in options.get('anonymise', {}).items())}.",
        "",
        _count_table(reports, "flags", FLAGS, "Items per flag"),
        _count_table(reports, "pii", PII_TYPES, "Personal identifiers found, per type"),
        _count_table(reports, "sensitive", totals["sensitive"], "Safety-lexicon hits, per category"),
        "## Flagged items",
        "",
    ]
    for report in reports:
        for flag, ids in report["flagged_ids"].items():
            if ids and flag != "pii":
                shown = ", ".join(ids[:20]) + (f" … (+{len(ids) - 20})" if len(ids) > 20 else "")
                parts.append(f"- {report['subtask']} / {flag}: {shown}")
    return "\n".join(parts) + "\n"


@stage(
    "curation_report", "combine the curation reports", reads=("subtasks",), priority=EARLY, in_all=lambda config: True,
    inputs={"reports": One("curation", over=("subtask", "subtasks"))},
    outputs={"json": One("curation_report"), "md": One("curation_report_md")},
)  # fmt: skip
def write_curation_report(reports: list[str], json: str, md: str) -> Done:
    """The subtasks' curation ``reports`` combined: for machines into ``json``, for people into ``md``."""
    combined = combine_reports(read_json(p) for p in reports)
    write_json_atomic(json, combined)
    write_text_atomic(md, render_markdown(combined))
    return Done(f"{combined['totals']['released']} released, {combined['totals']['kept']} kept", out=md)
