"""The plan report: per model and stage, the requests, what the caches hold, the tokens, GPU-hours and API cost
of what is left to send (results/plan.csv, one row per job; results/plan.md, one row per stage and model)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from h2htalk.judge.precision import ASSUMED
from h2htalk.llm.engines import engine_of
from h2htalk.plan.calls import PlannedCalls, Tally
from h2htalk.plan.chain import PlannedRun
from h2htalk.plan.costs import PriceTable, Throughput
from h2htalk.settings import CASCADE_MODE, FULL_MODE
from h2htalk.stages.steps import Step, unsampled


@dataclass(frozen=True)
class Bill:
    """GPU-hours and API cost of some requests (None: not known, or not that kind of model)."""

    gpu_hours: float | None
    cost_direct: float | None  # at the direct price
    cost_batch: float | None  # through the Batch API where the stage and the endpoint allow it
    gpu_cost: float | None  # the GPU-hours at the price table's rate for the throughput table's GPU

    def total(self, batched: bool) -> float | None:
        """API cost and GPU cost; None where a part is not known (GPU-hours without a rate, say)."""
        api = self.cost_batch if batched else self.cost_direct
        gpus = self.gpu_cost if self.gpu_hours else 0.0
        return None if api is None or gpus is None else api + gpus


@dataclass
class Row:
    stage: str
    model: str
    for_model: str
    engine: str
    batch: str  # on (configured, and the endpoint has a Batch API), available (not configured), or "" (none)
    tally: Tally
    jobs: int
    left: Bill  # what is left to send
    whole: Bill  # a run from nothing

    @property
    def cost_configured(self) -> float | None:
        return self.left.cost_batch if self.batch == "on" else self.left.cost_direct


def plan_rows(planned: PlannedRun, prices: PriceTable, throughput: Throughput) -> list[Row]:
    rows = [_row(calls, prices, throughput) for calls in planned.sessions]
    return [row for row in rows if row.tally.requests]


def _row(calls: PlannedCalls, prices: PriceTable, throughput: Throughput) -> Row:
    spec, step, tally = calls.spec, calls.step, calls.tally
    engine = engine_of(spec)
    can_batch = step.declared.batchable and engine.batch_limits(spec) is not None  # a cascade's sample too
    price = prices.models.get(spec["name"])
    priced = engine.provider(spec) is not None  # a paid API (an unknown price: None); else no money, maybe GPUs

    def bill(prompt: int, prefill: int, completion: int, jobs: int) -> Bill:
        hours = throughput.gpu_hours(spec, prefill, completion, jobs)
        return Bill(
            hours,
            price.cost(prompt, completion, False) if price and priced else 0.0 if not priced else None,
            price.cost(prompt, completion, can_batch) if price and priced else 0.0 if not priced else None,
            prices.gpu_cost(throughput.gpu, hours),
        )

    jobs = 1 if tally.to_send else 0
    return Row(
        stage=step.name,
        model=spec["name"],
        for_model=step.for_model,
        engine=spec["engine"],
        batch=("on" if step.batch else "available") if can_batch else "",
        tally=tally,
        jobs=jobs,
        left=bill(tally.prompt_tokens_to_send, tally.prefill_tokens_to_send, tally.completion_tokens_to_send, jobs),
        whole=bill(tally.prompt_tokens, tally.prefill_tokens, tally.completion_tokens, 1),
    )


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _total(bills: Iterable[Bill]) -> Bill:
    bills = list(bills)
    return Bill(*(_sum(getattr(b, f.name) for b in bills) for f in fields(Bill)))


def merged(rows: list[Row], stage: str, model: str) -> Row:
    """One row for every job of a stage that calls one model (``stage`` "total": every row)."""
    group = [r for r in rows if stage == "total" or (r.stage == stage and r.model == model)]
    tally = Tally(**{f.name: sum(getattr(r.tally, f.name) for r in group) for f in fields(Tally)})
    first = group[0]
    batch = first.batch if stage != "total" else ""
    return Row(
        stage, model, ", ".join(sorted({r.for_model for r in group})), first.engine, batch, tally,
        sum(r.jobs for r in group), _total(r.left for r in group), _total(r.whole for r in group),
    )  # fmt: skip


def by_stage_and_model(rows: list[Row], steps: list[str]) -> list[Row]:
    """One row per step and model, in the order of ``steps``."""
    keys = dict.fromkeys((r.stage, r.model) for r in sorted(rows, key=lambda r: steps.index(r.stage)))
    return [merged(rows, stage, model) for stage, model in keys]


BILL = tuple(f.name for f in fields(Bill))
CSV_COLUMNS = (
    "stage", "model", "for_model", "engine", "batch", "requests", "cached", "to_send", "jobs",
    *(f.name for f in fields(Tally) if f.name not in ("requests", "cached")),
    *BILL, "cost_configured", *(f"{name}_from_nothing" for name in BILL),
)  # fmt: skip


def csv_text(rows: list[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        values: dict[str, Any] = {k: v for k, v in asdict(row).items() if k not in ("tally", "left", "whole")}
        values.update(asdict(row.tally), to_send=row.tally.to_send, cost_configured=row.cost_configured)
        values.update(asdict(row.left), **{f"{k}_from_nothing": v for k, v in asdict(row.whole).items()})
        writer.writerow({k: _plain(values[k]) for k in CSV_COLUMNS})
    return buffer.getvalue()


def _plain(value: Any) -> Any:
    return "" if value is None else round(value, 4) if isinstance(value, float) else value


def _millions(tokens: int) -> str:
    return f"{tokens / 1e6:,.2f} M" if tokens >= 10_000 else f"{tokens:,}"


def _money(value: float | None) -> str:
    return "?" if value is None else f"{value:,.2f}" if value else "—"


def _hours(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


def markdown(rows: list[Row], planned: PlannedRun, prices: PriceTable, throughput: Throughput) -> str:
    total, cur = merged(rows, "total", ""), prices.currency
    lines = [
        "# The plan: what this configuration sends, and what it costs",
        "",
        *_notes(planned, prices, throughput),
        "",
        "What is left to send (the caches hold the rest):",
        "",
        f"| stage | model | batch | requests | cached | to send | prompt tokens | completion tokens | GPU-hours "
        f"| {cur}, direct | {cur}, Batch API |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in [*by_stage_and_model(rows, list(planned.steps)), total]:
        t = row.tally
        name = "**total**" if row.stage == "total" else row.stage
        lines.append(
            f"| {name} | {row.model} | {row.batch} | {t.requests:,} | {t.cached:,} | {t.to_send:,} "
            f"| {_millions(t.prompt_tokens_to_send)} | {_millions(t.completion_tokens_to_send)} "
            f"| {_hours(row.left.gpu_hours)} | {_money(row.left.cost_direct)} | {_money(row.left.cost_batch)} |"
        )
    batched = ", ".join(stage for stage in planned.steps if any(r.stage == stage and r.batch == "on" for r in rows))
    whole, configured = total.whole, _sum(r.cost_configured for r in rows)
    lines += [
        "",
        f"As configured (through the Batch API: {batched or 'nothing'}): {_money(configured)}"
        f" {cur} for the APIs and {_hours(total.left.gpu_hours)} GPU-hours, for what is left.",
        f"A run from nothing: {total.tally.requests:,} requests, {_millions(total.tally.prompt_tokens)} prompt and"
        f" {_millions(total.tally.completion_tokens)} completion tokens, {_hours(whole.gpu_hours)} GPU-hours,"
        f" {_money(whole.cost_direct)} {cur} direct or {_money(whole.cost_batch)} {cur} with the Batch API;"
        f" {_gpu_rate(prices, throughput)}, the GPU-hours cost {_money(whole.gpu_cost)} {cur}: in all"
        f" {_money(whole.total(False))} {cur} direct, {_money(whole.total(True))} {cur} with the Batch API.",
    ]
    unpriced = sorted({r.model for r in rows if r.left.cost_direct is None})
    if unpriced:
        lines.append(f"Not in the price table, so not priced: {', '.join(unpriced)}.")
    return "\n".join(lines) + "\n"


def _gpu_rate(prices: PriceTable, throughput: Throughput) -> str:
    rate = prices.gpu_hours.get(throughput.gpu)
    if rate is None:
        return f"{throughput.gpu} has no GPU-hour price in `{prices.path}` (gpu_hours), so its hours are not priced"
    return f"at {rate:,.2f} {prices.currency} a GPU-hour ({throughput.gpu}, `{prices.path}`)"


def judge_modes(
    by_mode: dict[str, list[Row]], steps: Mapping[str, Step], prices: PriceTable, throughput: Throughput
) -> list[str]:
    """The judges of a run from nothing in each mode (rubric_judge.mode, study_judge.mode): per judge (a step of
    ``steps`` that makes verdicts, its cascade sample with it) and model, the requests, tokens, GPU-hours, API cost
    (direct and through the Batch API), the GPU-hours' cost and the total; what cascade mode costs of full mode's,
    and the GPU-hour price at which both cost the same."""
    currency = prices.currency
    lines = [
        "",
        "## The judges in full and cascade mode (a run from nothing)",
        "",
        "Full: the role's model judges every item. Cascade: `cheap_model` judges every item, the role's model a"
        " seeded sample of `sample_per_cell` items of each cell (`rubric_judge.mode`, `study_judge.mode`;"
        " docs/cascade.md). GPU-hours are priced " + _gpu_rate(prices, throughput) + ".",
        "",
        f"| judge | mode | model | requests | prompt tokens | completion tokens | GPU-hours | {currency}, direct "
        f"| {currency}, Batch API | GPU-hours, {currency} | total, direct | total, Batch API |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    totals = {}
    for mode, rows in by_mode.items():
        judging = [r for r in rows if steps[r.stage].makes == "verdicts"]
        title = {r.stage: steps[r.stage].title or unsampled(r.stage) for r in judging}  # a sample: its step's
        keys = dict.fromkeys((title[r.stage], r.model) for r in judging)
        for role, model in keys:
            group = merged([r for r in judging if title[r.stage] == role and r.model == model], "total", "")
            lines.append(_judge_line(role, mode, model, group))
        totals[mode] = merged(judging, "total", "") if judging else None
        if totals[mode] is not None:
            lines.append(_judge_line("**all judging**", mode, "", totals[mode]))
    full, cascade = totals.get(FULL_MODE), totals.get(CASCADE_MODE)
    if full and cascade and full.whole.cost_direct:
        share = cascade.whole.cost_direct / full.whole.cost_direct
        batch = cascade.whole.cost_batch / full.whole.cost_batch if full.whole.cost_batch else None
        added = (cascade.whole.gpu_hours or 0.0) - (full.whole.gpu_hours or 0.0)
        lines += [
            "",
            f"Cascade mode: {share:.0%} of full mode's direct cost for the judges"
            + (f" ({batch:.0%} with the Batch API)" if batch is not None else "")
            + f", and {added:,.1f} GPU-hours more (the cheap judge's)"
            + _total_share(full.whole, cascade.whole)
            + ".",
            _break_even(full.whole, cascade.whole, currency),
        ]
    return lines


def _total_share(full: Bill, cascade: Bill) -> str:
    """What cascade mode's whole bill (API and GPUs) is of full mode's, direct and with the Batch API."""
    totals = [(cascade.total(batched), full.total(batched)) for batched in (False, True)]
    if any(mine is None or not theirs for mine, theirs in totals):
        return ""
    (direct, full_direct), (batch, full_batch) = totals
    return (
        f"; with the GPU-hours priced, {direct / full_direct:.0%} of full mode's whole bill direct and"
        f" {batch / full_batch:.0%} with the Batch API"
    )


def _break_even(full: Bill, cascade: Bill, currency: str) -> str:
    """The GPU-hour price at which both modes' judging costs the same, direct and through the Batch API."""
    added = (cascade.gpu_hours or 0.0) - (full.gpu_hours or 0.0)
    if added <= 0 or full.cost_direct is None or cascade.cost_direct is None:
        return "The two modes' judging has no GPU-hour price at which it costs the same."
    direct = (full.cost_direct - cascade.cost_direct) / added
    saved_batch = (full.cost_batch or 0.0) - (cascade.cost_batch or 0.0)
    return (
        f"Both modes cost the same at a GPU-hour price of {direct:,.2f} {currency} against the direct API and"
        f" {saved_batch / added:,.2f} {currency} against the Batch API: above it, full mode costs less."
    )


def auto_sample_lines(sizes: list[dict[str, Any]], correlation: float, sd: float) -> list[str]:
    """How the plan sized the rubric judge's auto samples (``sample_per_cell: auto``): per subtask, the items sampled
    a cell (least to most), and how many cells a cached pilot sized and how many the assumed correlation."""
    if not sizes:
        return []
    first, by_subtask = sizes[0], {}
    for size in sizes:
        by_subtask.setdefault(size["cell"].split("/", 1)[1], []).append(size)
    assumed = sum(size["spread"] == ASSUMED for size in sizes)
    parts = [
        f"{subtask} ({_span([s['items'] for s in group])} items a cell) {_span([s['size'] for s in group])}"
        for subtask, group in by_subtask.items()
    ]
    return [
        "",
        f"The rubric judge's sample is sized per cell (`sample_per_cell: auto`) for a 95 % half-width of"
        f" {first['target_half_width']:g} on the judge reading (0-100): {'; '.join(parts)} items sampled a cell."
        f" {len(sizes) - assumed} of {len(sizes)} cells are sized by their pilot's cached verdicts, {assumed} by the"
        f" assumed correlation {correlation:g} of the judges' scores and spread {sd:g} of the role's judge's"
        " (`rubric_judge.assumed_correlation`, `assumed_sd`: no pilot is cached for them).",
    ]


def _span(values: list[int]) -> str:
    low, high = min(values), max(values)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def _judge_line(role: str, mode: str, model: str, row: Row) -> str:
    t, bill = row.tally, row.whole
    return (
        f"| {role} | {mode} | {model} | {t.requests:,} | {_millions(t.prompt_tokens)} | "
        f"{_millions(t.completion_tokens)} | {_hours(bill.gpu_hours)} | {_money(bill.cost_direct)} "
        f"| {_money(bill.cost_batch)} | {_money(bill.gpu_cost) if bill.gpu_hours else '—'} "
        f"| {_money(bill.total(False))} | {_money(bill.total(True))} |"
    )


def _notes(planned: PlannedRun, prices: PriceTable, throughput: Throughput) -> list[str]:
    notes = [
        f"Prices: `{prices.path}` ({prices.currency}, as of {prices.date}); GPU-hours: `{throughput.path}` "
        f"({throughput.gpu}), the vLLM models' tokens to send at its rates plus each job's start-up.",
        "Tokens are estimated from the characters of the run's own requests (`h2htalk.llm.tokens`); the answers "
        "to come are planned as long as the released references of their subtask, a reasoning model's whole "
        "thinking budget on top, and a judge's or a voter's at its max_new_tokens (an upper bound).",
    ]
    if planned.reconstructed is not None:
        cached, references = planned.reconstructed
        if cached < references:
            notes.append(
                f"Instances: {references - cached:,} of {references:,} references are not reconstructed yet: they "
                "are planned with a demo instance's inputs, and every vote as keep (the most the benchmark can be)."
            )
        else:
            notes.append(f"Instances: all {references:,} references' reconstructions are in the cache.")
    return notes
