"""The paper-size run's own cost, through the stand-ins: every stage that starts no model at growing sizes.

    python benchmarks/paper_scale.py --upstream-dir /path/to/H2HTalk/data [--sizes 100 400 all] [--models 3]
        --workdir DIR [--out R.json] [--report-only]

Runs ``paper_rehearsal.py`` on the local profile at each size (``--items-per-subtask``: references reconstructed
per subtask, ``all``: every kept reference), with the first ``--models`` models of the paper config, both variants,
and the judges in full mode and then cascade mode (``--judge-mode both``), each size in its own folder under
``--workdir`` (``--report-only``: the runs already there, reported again). Then, from the ``benchmark:`` file
Snakemake writes for every job (wall seconds ``s``, ``cpu_time`` in seconds, ``max_rss`` in MB; a job the cascade
phase reran holds that run's), for every stage
none of whose jobs starts a model: its jobs, items (the run's instances), wall time, CPU time and peak RSS at each
size; the growth exponent between the two largest sizes (log time ratio over log items ratio: 1 is linear) and the
full size's time against the linear extrapolation from the size before (flagged past 1.25x). Beside them, what the
plan predicts of each stage at the largest size: the local estimate's time for a job that starts no model
(``config/throughput.yaml``'s ``cpu.other_job_s`` each, at its reference pp512), and the plan's GPU-hours of each
model stage (``plan.csv``; the stand-ins measure no GPU, so their jobs' time is shown only beside it). Nothing is
asserted: say what machine ran it and what else ran there.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from h2htalk.config import merge_layers, validate_config
from h2htalk.layout import Layout, instances_set
from h2htalk.plan.costs import load_throughput
from h2htalk.stages.spec import Scope
from h2htalk.stages.table import STAGES

ROOT = Path(__file__).resolve().parents[1]
FLAGGED = 1.25  # a full-size time past this multiple of the linear extrapolation is flagged


def stage_costs(benchmarks: Path) -> dict[str, dict[str, float]]:
    """Per stage (a benchmark file's first folder, or its name): jobs, wall and CPU seconds summed, peak RSS (MB)."""
    stages: dict[str, dict[str, float]] = defaultdict(lambda: {"jobs": 0, "wall_s": 0.0, "cpu_s": 0.0, "rss_mb": 0.0})
    for path in sorted(benchmarks.rglob("*.tsv")):
        stage = path.relative_to(benchmarks).parts[0].removesuffix(".tsv")
        with open(path, encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                cost = stages[stage]
                cost["jobs"] += 1
                cost["wall_s"] += float(row["s"])
                cost["cpu_s"] += _number(row.get("cpu_time"))
                cost["rss_mb"] = max(cost["rss_mb"], _number(row.get("max_rss")))
    return dict(stages)


def _number(value: str | None) -> float:
    """Snakemake writes NA where it could not measure a short job."""
    try:
        return float(value or 0.0)
    except ValueError:
        return 0.0


def model_stages(config: dict[str, Any], tree: Layout) -> set[str]:
    """The stages with a job that starts a model (generation, the judges, the studies, the reconstruction)."""
    scope = Scope(config, tree)
    return {stage.name for stage in STAGES if any(stage.starts(scope, labels) for labels in stage.jobs(scope.run))}


def instance_count(results: Path) -> int:
    """The run's items: the lines of its instance files."""
    return sum(
        sum(1 for line in path.open(encoding="utf-8") if line.strip()) for path in results.glob("instances/*.jsonl")
    )


def planned_gpu_hours(plan_csv: Path) -> dict[str, float]:
    """The plan's GPU-hours per stage, from nothing (every request sent)."""
    hours: dict[str, float] = defaultdict(float)
    if plan_csv.is_file():
        for row in csv.DictReader(plan_csv.open(encoding="utf-8")):
            hours[row["stage"]] += _number(row.get("gpu_hours_from_nothing"))
    return dict(hours)


def growth(small: tuple[int, float], large: tuple[int, float]) -> tuple[float | None, float | None]:
    """The growth exponent from ``small`` to ``large`` (items, seconds) and the large time over the linear
    extrapolation from the small one."""
    (n_small, t_small), (n_large, t_large) = small, large
    if min(n_small, n_large, t_small, t_large) <= 0 or n_large == n_small:
        return None, None
    return math.log(t_large / t_small) / math.log(n_large / n_small), t_large / (t_small * n_large / n_small)


def rehearse(args: argparse.Namespace, size: str, work: Path) -> None:
    command = [
        sys.executable, str(ROOT / "benchmarks" / "paper_rehearsal.py"), "--profile", "local",
        "--models", args.models, "--items-per-subtask", size, "--judge-mode", "both",
        "--upstream-dir", str(args.upstream_dir), "--workdir", str(work), "--out", str(work / "rehearsal.json"),
    ]  # fmt: skip
    print(f"size {size}: {work}", flush=True)
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"the rehearsal at {size} failed ({run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")


def measured(size: str, work: Path) -> dict[str, Any]:
    """What the rehearsal in ``work`` cost, stage by stage."""
    with contextlib.chdir(work):  # the configuration names its files relative to the run's folder
        config = validate_config(merge_layers(["config/config.yaml", "config/rehearsal.yaml"], []))
        cpu = load_throughput(config["plan"]["throughput"]).cpu
    tree = Layout(str(work / "results"), instances_set(config))
    results = work / tree.set_root
    return {
        "size": size,
        "items": instance_count(results),
        "wall_s": json.loads((work / "rehearsal.json").read_text(encoding="utf-8"))["wall_s"],
        "stages": stage_costs(work / tree.path("benchmarks")),
        "model_stages": sorted(model_stages(config, tree)),
        "gpu_hours": planned_gpu_hours(results / "plan.csv"),
        "other_job_s": cpu.other_job_s if cpu else 0.0,
    }


def report(runs: list[dict[str, Any]]) -> None:
    sizes = " | ".join(f"{run['size']}: items, wall s, CPU s, peak MB" for run in runs)
    print(f"\n| stage | {sizes} | growth exponent | last / linear |\n|---|" + "---|" * (len(runs) + 2))
    last, before = runs[-1], runs[-2] if len(runs) > 1 else None
    others = sorted(set().union(*(run["stages"] for run in runs)) - set(last["model_stages"]))
    for stage in others:
        cells = []
        for run in runs:
            cost = run["stages"].get(stage)
            cells.append(f"{run['items']}, {cost['wall_s']:.1f}, {cost['cpu_s']:.1f}, {cost['rss_mb']:.0f}"
                         if cost else "-")  # fmt: skip
        exponent, over = None, None
        if before and stage in before["stages"] and stage in last["stages"]:
            exponent, over = growth((before["items"], before["stages"][stage]["wall_s"]),
                                    (last["items"], last["stages"][stage]["wall_s"]))  # fmt: skip
        flag = " **past 1.25x**" if over is not None and over > FLAGGED else ""
        print(f"| {stage} | {' | '.join(cells)} | {'-' if exponent is None else f'{exponent:.2f}'} |"
              f" {'-' if over is None else f'{over:.2f}'}{flag} |")  # fmt: skip
    print(f"\nAt {last['size']} ({last['items']} items), the plan's prediction beside the jobs' time:")
    print("| stage | jobs | predicted | taken (wall s) |\n|---|--:|---|--:|")
    for stage in others:
        cost = last["stages"].get(stage, {"jobs": 0, "wall_s": 0.0})
        predicted = f"{cost['jobs'] * last['other_job_s']:.0f} s (other_job_s each)"
        print(f"| {stage} | {cost['jobs']:.0f} | {predicted} | {cost['wall_s']:.1f} |")
    for stage in last["model_stages"]:
        cost = last["stages"].get(stage, {"jobs": 0, "wall_s": 0.0})
        print(f"| {stage} (starts models: stand-ins) | {cost['jobs']:.0f} | see below | {cost['wall_s']:.1f} |")
    print("\n| the plan's stage | GPU-hours from nothing (A100, config/throughput.yaml) |\n|---|--:|")
    for stage, hours in sorted(last["gpu_hours"].items()):
        print(f"| {stage} | {hours:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream-dir", required=True, type=Path, help="folder holding the 11 released files")
    parser.add_argument("--sizes", nargs="+", default=["100", "400", "all"], help="references per subtask, or all")
    parser.add_argument("--models", default="3", help="the first N models of the paper config")
    parser.add_argument("--workdir", type=Path, required=True, help="each size's run in a folder of its own here")
    parser.add_argument("--out", type=Path, help="write the measurements here (JSON)")
    parser.add_argument("--report-only", action="store_true", help="report the runs already in --workdir")
    args = parser.parse_args()
    args.upstream_dir = args.upstream_dir.resolve()
    works = {size: args.workdir.resolve() / f"size-{size}" for size in args.sizes}
    if not args.report_only:
        for size, work in works.items():
            rehearse(args, size, work)
    runs = [measured(size, work) for size, work in works.items()]
    report(runs)
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
