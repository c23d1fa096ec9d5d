"""The plan: what the configured run sends per model and stage, what the caches hold, and what the rest costs."""

from __future__ import annotations

import tempfile
from pathlib import Path

from h2htalk.stages.job import Done, Job


def plan(job: Job) -> Done:
    from h2htalk.io import write_text_atomic
    from h2htalk.plan.chain import plan_calls
    from h2htalk.plan.costs import load_prices, load_throughput
    from h2htalk.plan.report import csv_text, markdown, plan_rows

    config = job.config
    prices, throughput = load_prices(config["plan"]["prices"]), load_throughput(config["plan"]["throughput"])
    with tempfile.TemporaryDirectory(prefix="h2htalk-plan-") as scratch:
        planned = plan_calls(job.config, job.results, Path(scratch))
    rows = plan_rows(planned, prices, throughput)
    report = markdown(rows, planned, prices, throughput)
    write_text_atomic(job.out_path("table"), csv_text(rows))
    write_text_atomic(job.out_path("report"), report)
    print(report)
    requests, left = sum(row.tally.requests for row in rows), sum(row.tally.to_send for row in rows)
    return Done(f"{requests} requests, {left} to send", out=job.output("report"))
