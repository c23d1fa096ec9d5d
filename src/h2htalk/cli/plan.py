"""The plan command: what the configured run sends, what the caches hold, and what the rest costs."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from h2htalk.cli.options import REGISTRY_READS, add_command, add_results, load_config
from h2htalk.progress import summary

PLAN_READS = (
    *REGISTRY_READS, "models", "baselines", "subtasks", "variants", "generation", "rubric_judge", "study_judge",
    "instances", "studies", "review.store", "plan",
)  # fmt: skip


def register(sub: Any) -> None:
    p = add_command(
        sub, "plan", cmd_plan,
        "count what the configured run sends per model and stage, what the caches hold, and the tokens, GPU-hours"
        " and API cost of the rest (results/plan.md, results/plan.csv)",
        reads=PLAN_READS,
    )  # fmt: skip
    add_results(p)


def cmd_plan(args: argparse.Namespace) -> int:
    from h2htalk.io import write_text_atomic
    from h2htalk.plan.chain import plan_calls
    from h2htalk.plan.costs import load_prices, load_throughput
    from h2htalk.plan.report import csv_text, markdown, plan_rows

    config = load_config(args)
    prices, throughput = load_prices(config["plan"]["prices"]), load_throughput(config["plan"]["throughput"])
    with tempfile.TemporaryDirectory(prefix="h2htalk-plan-") as scratch:
        planned = plan_calls(config, args.results, Path(scratch))
    rows = plan_rows(planned, prices, throughput)
    report = markdown(rows, planned, prices, throughput)
    write_text_atomic(Path(args.results.path("plan")), csv_text(rows))
    write_text_atomic(Path(args.results.path("plan_md")), report)
    print(report)
    requests, left = sum(row.tally.requests for row in rows), sum(row.tally.to_send for row in rows)
    summary(f"{requests} requests, {left} to send", out=args.results.path("plan_md"))
    return 0
