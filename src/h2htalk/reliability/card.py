"""The reliability card: one section per judge, its verdict in words, then the numbers behind it.

The CSV has one row per number (judge, check, task, comparison); the Markdown file says, per judge, whether it
separates a good answer from a bad one, then shows its ladder, its mean score per rung and its agreement with
itself, with people and with its previous run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from h2htalk.cells import RunCells
from h2htalk.io import write_text_atomic
from h2htalk.layout import Layout
from h2htalk.reliability.agreement import Alpha
from h2htalk.reliability.canary import describe
from h2htalk.reliability.content import ContentCheck, content_check, known_answers
from h2htalk.reliability.evidence import ON_LADDER, JudgeEvidence, card_evidence, cascades, ladder_meetings
from h2htalk.reliability.judge_pairs import JudgeVerdicts, compare_judges
from h2htalk.reliability.ladder import (
    MET,
    MISMATCHED,
    MISSED,
    NEEDS,
    ROLE_NAMES,
    RUBRIC,
    RUBRIC_RUNGS,
    SAFE,
    SAFETY,
    UNSAFE,
    Accuracy,
    ladder_pairs,
    pairwise_accuracy,
)
from h2htalk.settings import BootstrapSettings
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import RUBRIC_JUDGE_MODE, STUDY_JUDGE_MODE, judged_cells, ladder_jobs, study_cells
from h2htalk.stages.spec import Cells, Done, Figure, Labels, Paths, Product, Scope, figure_files
from h2htalk.tabular import markdown_text, records_frame, write_csv

COLUMNS = (
    "judge", "model", "check", "task", "comparison", "value", "ci_low", "ci_high", "items", "pairs", "unread", "note",
    "on",
)  # fmt: skip
ALL = "all"
# A ladder accuracy at or above this, with its CI above chance, is a judge that separates good from bad; between
# chance and this it orders the ladder, but often wrongly.
SEPARATES = 0.9
SAME_VALUE_SHARE = 0.9  # a judge that gives this share of its texts one value is all but constant
WHAT_IS_JUDGED = {RUBRIC: "Levels I-III plans", SAFETY: "safety-study replies", NEEDS: "instruction-following replies"}
RUNG_ORDER = (*RUBRIC_RUNGS, SAFE, UNSAFE, MET, MISSED, MISMATCHED)
SETTING = {RUBRIC: "rubric_judge.samples", SAFETY: "study_judge.samples", NEEDS: "study_judge.samples"}
SURFACE = "surface reader"  # the model column of the known-answer sets' surface rows


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


def ladder_words(found: Accuracy) -> str:
    """Whether the judge separates the ladder's better texts from its worse ones, in words."""
    if found.value is None:
        return "It has no ladder here: no pair of texts of known order was judged."
    numbers = f"{percent(found.value)}, 95 % CI [{percent(found.ci_low)}, {percent(found.ci_high)}] over " + (
        f"{found.items} items, {found.pairs} pairs"
    )
    if found.ci_low > 0.5 and found.value >= SEPARATES:
        words = f"It orders the ladder as expected ({numbers}): it separates a good answer from a bad one."
    elif found.ci_low > 0.5:
        words = (
            f"It orders the ladder better than chance but often wrongly ({numbers}): its scores are a rough "
            "signal, not a measurement."
        )
    elif found.ci_high < 0.5:
        words = f"It orders the ladder worse than chance ({numbers}): it prefers the worse answer."
    else:
        words = (
            f"It orders the ladder no better than chance ({numbers}): its scores do not separate a good answer "
            "from a bad one."
        )
    if found.unread:
        words += f" In {found.unread} of the {found.pairs} pairs a verdict could not be read (counted as ties)."
    return words


def sameness_words(ladder: Sequence[dict[str, Any]]) -> str:
    """A judge that gives (nearly) every text the same value cannot order anything: say so, with the value."""
    values = [r["value"] for r in ladder if r["value"] is not None]
    if not values:
        return ""
    common = max(set(values), key=values.count)
    if values.count(common) < SAME_VALUE_SHARE * len(values):
        return ""
    return f"It gives {values.count(common)} of the {len(values)} texts it scored the same value ({common:g})."


def people_alpha(row: dict[str, Any]) -> str:
    """A judge-vs-people alpha of the agreement report, with its CI and what it rests on."""
    if row["value"] is None:
        return f"undefined ({row['items']} items, {row['ratings']} ratings)"
    ci = f" [{row['value_ci_low']:.2f}, {row['value_ci_high']:.2f}]" if row["value_ci_low"] is not None else ""
    return f"{row['value']:.2f}{ci} ({row['items']} items, {row['ratings']} ratings)"


def people_row(evidence: JudgeEvidence, row: dict[str, Any]) -> dict[str, Any]:
    """A judge-vs-people row of the agreement report (paper_figures/agreement.md), as the card shows it."""
    note = "no ratings by people yet" if not row["ratings"] else f"{row['ratings']} ratings"
    if row["ratings"] and row["value"] is None:
        note += ": alpha undefined (no item with both, or no variation)"
    return {"judge": ROLE_NAMES[evidence.role], "model": evidence.model, "check": "agreement with people (alpha)",
            "task": row["scope"], "comparison": f"{row['field']}, {row['level']}", "value": row["value"],
            "ci_low": row["value_ci_low"], "ci_high": row["value_ci_high"], "items": row["items"],
            "note": note}  # fmt: skip


def alpha_row(evidence: JudgeEvidence, check: str, task: str, comparison: str, alpha: Alpha, note: str = "") -> dict:
    return {"judge": ROLE_NAMES[evidence.role], "model": evidence.model, "check": check, "task": task,
            "comparison": comparison, "value": alpha.value, "items": alpha.items,
            "note": note or ("" if alpha.value is not None else alpha.why)}  # fmt: skip


def rung_order(rung: str) -> int:
    """Rungs from best to worst, as the ladders define them."""
    return RUNG_ORDER.index(rung) if rung in RUNG_ORDER else len(RUNG_ORDER)


def ladder_rows(evidence: JudgeEvidence, bootstrap: BootstrapSettings) -> list[dict[str, Any]]:
    """Pairwise accuracy per task (all pairs, then each comparison), over all tasks, and the mean score per rung."""
    pairs = ladder_pairs(evidence.ladder)
    head = {"judge": ROLE_NAMES[evidence.role], "model": evidence.model}
    rows = []
    tasks = list(dict.fromkeys(r["task"] for r in evidence.ladder))
    comparisons = sorted({(p.better["rung"], p.worse["rung"]) for p in pairs}, key=lambda c: tuple(map(rung_order, c)))
    for task in [*tasks, *([ALL] if len(tasks) > 1 else [])]:
        in_task = [p for p in pairs if task in (ALL, p.better["task"])]
        for comparison in [ALL, *(f"{better} > {worse}" for better, worse in comparisons)]:
            chosen = [p for p in in_task if comparison in (ALL, p.comparison)]
            if not chosen:
                continue
            found = pairwise_accuracy(chosen, bootstrap)
            rows.append({**head, "check": "ladder accuracy", "task": task, "comparison": comparison,
                         "value": found.value, "ci_low": found.ci_low, "ci_high": found.ci_high, "items": found.items,
                         "pairs": found.pairs, "unread": found.unread})  # fmt: skip
    for task in tasks:
        for rung in sorted({r["rung"] for r in evidence.ladder if r["task"] == task}, key=rung_order):
            texts = [r for r in evidence.ladder if r["task"] == task and r["rung"] == rung]
            values = [r["value"] for r in texts if r["value"] is not None]
            rows.append({**head, "check": "mean score", "task": task, "comparison": rung,
                         "value": sum(values) / len(values) if values else None, "items": len(texts),
                         "unread": len(texts) - len(values)})  # fmt: skip
    return rows


KNOWN = {SAFETY: "safe rated safe, unsafe flagged", NEEDS: "met judged met, missed judged not met"}
LABELS = {SAFETY: ("safe", "unsafe"), NEEDS: ("met", "missed")}


def known_answer_rows(evidence: JudgeEvidence, bootstrap: BootstrapSettings) -> list[dict[str, Any]]:
    """The judge on its known-answer set (accuracy with its CI over pairs), then what the set's surface gives: the
    surface classifier's and the best single cue's leave-one-pair-out accuracy (``reliability.surface``)."""
    role = evidence.role
    found = known_answers(role, evidence.ladder)
    check = content_check(role, evidence.ladder, bootstrap)
    judged, surface = check.judge, check.surface
    by_label = ", ".join(f"{label} {found['by_label'][label]['correct']}/{found['by_label'][label]['n']}"
                         for label in LABELS[role])  # fmt: skip
    head = {"judge": ROLE_NAMES[role], "task": role, "comparison": KNOWN[role], "items": surface.replies}
    return [
        {**head, "model": evidence.model, "check": "known answers", "value": judged.value, "ci_low": judged.ci_low,
         "ci_high": judged.ci_high, "items": judged.items, "pairs": judged.pairs, "unread": judged.unread,
         "note": f"{by_label}; {100 * bootstrap.confidence:.0f} % CI [{percent(judged.ci_low)}, "
                 f"{percent(judged.ci_high)}] over {judged.pairs} pairs; "
                 + ("reads the content" if check.reads_content else "not shown to read the content")},
        {**head, "model": SURFACE, "check": "known answers, surface classifier", "value": surface.classifier,
         "note": "logistic regression on character 1-2-grams, each pair left out in turn"},
        {**head, "model": SURFACE, "check": "known answers, best single cue", "value": surface.best_cue_accuracy,
         "note": f"{surface.best_cue}, each pair left out in turn"},
    ]  # fmt: skip


def contradiction_row(evidence: JudgeEvidence) -> dict[str, Any]:
    """How many of the safety judge's read verdicts contradict themselves (``SafetyVerdict.contradicts``)."""
    read = [s for record in evidence.ladder for s in record["samples"] if s.get("violation") is not None]
    count = sum(bool(s.get("contradicts")) for s in read)
    return {"judge": ROLE_NAMES[SAFETY], "model": evidence.model, "check": "contradictory verdicts", "task": SAFETY,
            "comparison": "violation beside a safe score, or none beside the lowest", "items": len(read),
            "value": count / len(read) if read else None, "note": f"{count} of {len(read)} read verdicts"}  # fmt: skip


def content_words(check: ContentCheck | None) -> str:
    """What the judge adds to its set's surface, in a sentence (empty for a judge without a known-answer set)."""
    if check is None:
        return ""
    if check.reads_content:
        return f"It reads the content: {check.text()}; the lower end of its CI is above the surface classifier's."
    return (
        f"**It is not shown to read the content**: {check.text()}; the lower end of its CI is not above the surface "
        "classifier's, so its verdicts could come from the surface."
    )


def judge_rows(evidence: JudgeEvidence, bootstrap: BootstrapSettings) -> list[dict[str, Any]]:
    rows = ladder_rows(evidence, bootstrap)
    if evidence.role in KNOWN and evidence.ladder:
        rows += known_answer_rows(evidence, bootstrap)
    if evidence.role == SAFETY and evidence.ladder:
        rows.append(contradiction_row(evidence))
    for task, name, level, alpha in evidence.consistency:
        note = f"{SETTING[evidence.role]} = 1" if alpha.why == "one sample per item" and evidence.samples == 1 else ""
        note = f"one sample per item ({note})" if note else ""
        rows.append(alpha_row(evidence, "self-consistency (alpha)", task, f"{name}, {level}", alpha, note))
    for row in evidence.people or []:
        rows.append(people_row(evidence, row))
    canary = evidence.canary
    if canary is not None:
        rows.append({"judge": ROLE_NAMES[evidence.role], "model": evidence.model, "check": "drift canary (alpha)",
                     "task": ALL, "comparison": "this run vs the previous", "value": canary["alpha"],
                     "items": canary["compared"] or canary["items"], "note": describe(canary)})  # fmt: skip
    return rows


def overall_accuracy(evidence: JudgeEvidence, bootstrap: BootstrapSettings) -> Accuracy:
    return pairwise_accuracy(ladder_pairs(evidence.ladder), bootstrap)


def verdict_words(evidence: JudgeEvidence, bootstrap: BootstrapSettings) -> str:
    """The judge's card in a paragraph: the ladder, then self-consistency, people and the canary."""
    check = content_check(evidence.role, evidence.ladder, bootstrap) if evidence.ladder else None
    parts = [ladder_words(overall_accuracy(evidence, bootstrap)), content_words(check), sameness_words(evidence.ladder)]
    consistency = [(task, name, alpha) for task, name, _, alpha in evidence.consistency]
    if consistency and all(alpha.why == "one sample per item" for *_, alpha in consistency):
        parts.append(
            f"Its self-consistency cannot be measured: it scores each item once ({SETTING[evidence.role]} = "
            f"{evidence.samples})."
        )
    elif consistency:
        shown = "; ".join(f"{task} {name} {alpha.text()}" for task, name, alpha in consistency)
        parts.append(f"Its agreement with its own samples (Krippendorff's alpha): {shown}.")
    rated = [row for row in evidence.people or [] if row["ratings"]]
    if evidence.people is None:
        parts.append("No agreement report was read (agreement.csv, beside this card): agreement with people not shown.")
    elif not rated:
        parts.append(f"People have not rated its {WHAT_IS_JUDGED[evidence.role]} yet: no agreement with people.")
    else:
        shown = "; ".join(f"{row['scope']} {row['field']} {people_alpha(row)}" for row in rated)
        parts.append(f"Its agreement with people's consensus (Krippendorff's alpha): {shown}.")
    if evidence.canary is not None:
        canary = evidence.canary
        flag = "**The judge changed.** " if canary["flagged"] else ""
        parts.append(f"{flag}Drift canary ({canary['items']} texts): {describe(canary)}.")
    return " ".join(part for part in parts if part)


INTRODUCTION = (
    "Does each judge separate a good answer from a bad one? The sanity ladder gives it texts of known order (for "
    "the rubric judge: the reference, four degradations of it and another item's reference; for the studies' "
    "judges: their known-answer sets) and counts the pairs it scores in the expected order (ties and unread "
    "verdicts count half: 50 % is chance). The studies' known-answer sets are minimal pairs (each bad reply its good "
    "twin with one meaning-changing edit); a surface classifier (logistic regression on character 1-2-grams) and the "
    "best single surface cue, each with every pair left out in turn, show what a set gives away without reading the "
    "content. A judge is shown to read the content only where the lower end of its known-answer accuracy's CI is above "
    "the surface classifier's accuracy. "
    "Krippendorff's alpha measures its agreement with its own samples, with people and with its previous run (the "
    "drift canary)."
)


def _ladder_table(rows: Sequence[dict[str, Any]]) -> str:
    shown = [
        {**r, "accuracy": percent(r["value"]), "95 % CI": f"[{percent(r['ci_low'])}, {percent(r['ci_high'])}]"}
        for r in rows
    ]
    columns = ("task", "comparison", "accuracy", "95 % CI", "items", "pairs", "unread")
    return markdown_text(records_frame(shown, columns), caption="Sanity ladder: share of pairs in the expected order")


def _means_table(rows: Sequence[dict[str, Any]]) -> str:
    shown = [{**r, "rung": r["comparison"], "mean score": r["value"], "texts": r["items"]} for r in rows]
    return markdown_text(
        records_frame(shown, ("task", "rung", "mean score", "texts", "unread")), caption="Mean score per rung"
    )


def _agreement_table(rows: Sequence[dict[str, Any]]) -> str:
    columns = ("check", "task", "comparison", "value", "items", "note")
    return markdown_text(records_frame(rows, columns), caption="Agreement and known answers")


def card_markdown(
    evidence: Sequence[JudgeEvidence], rows: Sequence[dict[str, Any]], bootstrap: BootstrapSettings
) -> str:
    out = ["# Judge reliability", "", INTRODUCTION]
    for judge in evidence:
        # a role in cascade mode has two judges: each its own rows (and its known-answer set's surface rows)
        mine = [
            r
            for r in rows
            if r["judge"] == ROLE_NAMES[judge.role] and r["model"] in (judge.model, SURFACE) and not r.get("on")
        ]  # fmt: skip  (its meetings with another judge have their own sections)
        out += ["", f"## The {ROLE_NAMES[judge.role]}: {judge.model} ({WHAT_IS_JUDGED[judge.role]})", ""]
        out += [verdict_words(judge, bootstrap), ""]
        ladder = [r for r in mine if r["check"] == "ladder accuracy"]
        overall = ladder[-1]["task"] if ladder else None  # "all", or the judge's one task
        ladder = [r for r in ladder if r["comparison"] == ALL or r["task"] == overall]
        if ladder:
            out += [_ladder_table(ladder), _means_table([r for r in mine if r["check"] == "mean score"])]
        out.append(_agreement_table([r for r in mine if r["check"] not in ("ladder accuracy", "mean score")]))
    for role, pair, on in dict.fromkeys((r["task"], r["pair"], r["on"]) for r in rows if r["check"] in JUDGE_VS_JUDGE):
        mine = [r for r in rows if (r.get("task"), r.get("pair"), r.get("on")) == (role, pair, on)]
        out += ["", f"## Judge against judge: the {ROLE_NAMES[role]}, {pair} ({on})", ""]
        out += [judge_pair_words(mine), "", _agreement_table(mine)]
    return "\n".join(out).rstrip("\n") + "\n"


JUDGE_VS_JUDGE = ("judge vs judge (alpha)", "judge vs judge (Kendall tau)")


def judge_pair_words(rows: Sequence[dict[str, Any]]) -> str:
    """Two judges of one role in a paragraph: how far their item scores and model rankings agree, and how many
    pairs of models each tells apart."""
    alpha, tau = (next(r for r in rows if r["check"] == check) for check in JUDGE_VS_JUDGE)
    unit = tau["comparison"].removesuffix(" ranking")  # model, or a ladder's rung
    parts = [
        f"On the {tau['items']} items both judged, their item scores agree with Krippendorff's alpha "
        + (f"{alpha['value']:.2f}" if alpha["value"] is not None else f"undefined ({alpha['note']})")
        + f"; their rankings of the {unit}s with Kendall's tau "
        + (f"{tau['value']:.2f} [{tau['ci_low']:.2f}, {tau['ci_high']:.2f}] ({tau['note']})." if tau["ci_low"] is not
           None else ("undefined." if tau["value"] is None else f"{tau['value']:.2f} ({tau['note']})."))
    ]  # fmt: skip
    for row in rows:
        if row["check"] == "separability":
            parts.append(f"{row['model']} tells {row['note']} of {unit}s apart.")
    return " ".join(parts)


def card_rows(
    evidence: Sequence[JudgeEvidence],
    bootstrap: BootstrapSettings,
    pairs: Sequence[tuple[str, JudgeVerdicts, JudgeVerdicts, str]] = (),
) -> list[dict[str, Any]]:
    """Every number of the card: each judge's rows, then judge against judge for ``pairs``: (role, a judge, the
    role's own judge, where they met: the cascade's sample, or the ladder's texts, where the rungs are ranked as the
    models are on the sample)."""
    rows = [row for judge in evidence for row in judge_rows(judge, bootstrap)]
    for role, other, own, on in pairs:
        unit = "rung" if on == ON_LADDER else "model"
        rows += [{"judge": ROLE_NAMES[role], **row} for row in compare_judges(role, other, own, bootstrap, on, unit)]
    return rows


def ladder_files(kind: str) -> Callable[[Scope, Labels], list[str]]:
    """``kind`` (judge_ladder, judge_canary) of every judge model's ladder part, as a stage's file list."""

    def files(scope: Scope, labels: Labels) -> list[str]:
        return [scope.results.path(kind, model=model, part=part) for model, part in ladder_jobs(scope.run)]

    files.__doc__ = f"`{kind}` of every judge model's ladder part"
    return files


@stage(
    "judge_reliability", "the judges' reliability card: ladder, self-consistency, agreement with people, drift canary",
    uses=("studies",),
    reads=(
        "models", "baselines", "rubric_judge.baselines", "subtasks", "variants", "studies.models",
        "rubric_judge.samples", "study_judge.samples", "scoring.bootstrap", "judge_reliability.panel",
        *RUBRIC_JUDGE_MODE, *STUDY_JUDGE_MODE,
    ),
    env="figures", memory_mb=1000, minutes=10, options=("bootstrap",),
    product=Product("table", "Judge card", "how reliable each judge is", main="md", shown=("csv",), first=True),
    in_all=lambda config: config["judge_reliability"]["every_run"],  # else made on request
    inputs={
        "ladders": Paths(ladder_files("judge_ladder")), "canaries": Paths(ladder_files("judge_canary")),
        "judge_samples": Cells("judge_samples", judged_cells), "verdicts": Cells("verdicts", study_cells()),
        "samples": Cells("judge_sample", judged_cells), "study_samples": Cells("judge_sample", study_cells()),
        "agreement": Figure("agreement", ".csv"),
    },
    outputs=figure_files("judge_reliability", md=".md", csv=".csv"),
)  # fmt: skip
def write_card(
    ladders: list[str], canaries: list[str], judge_samples: list[str], verdicts: list[str], samples: list[str],
    study_samples: list[str], agreement: str, config: dict[str, Any], run: RunCells, results: Layout,
    bootstrap: BootstrapSettings, outputs: dict[str, str],
) -> Done:  # fmt: skip
    """The run's card, ``csv`` (every number) and ``md`` (the card): every judge's evidence, the cascades' judges
    met on their samples and every other judge met on the ladders; ``agreement``: the agreement report's CSV."""
    evidence, _ = card_evidence(config, run, results, agreement)
    rows = card_rows(evidence, bootstrap, cascades(config, run, results) + ladder_meetings(evidence, config))
    write_csv(records_frame(rows, COLUMNS), outputs["csv"], float_format="{:.4f}")
    write_text_atomic(outputs["md"], card_markdown(evidence, rows, bootstrap))
    return Done(f"{len(evidence)} judges, {len(rows)} rows")
