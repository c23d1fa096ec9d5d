"""The paper-size run's own cost, through the stand-ins: every stage that starts no model at growing sizes.

    python benchmarks/paper_scale.py --upstream-dir /path/to/H2HTalk/data [--sizes 100 400 all] [--models 3]
        --workdir DIR [--out R.json] [--report-only]

Runs ``paper_rehearsal.py`` on the local profile at each size (``--items-per-subtask``: references reconstructed
per subtask, ``all``: every kept reference), with the first ``--models`` models of the paper config, both variants,
and the judges in full mode and then cascade mode (``--judge-mode both``), each size in its own folder under
``--workdir`` (``--report-only``: the runs already there, reported again). While a size runs, the machine's load
average and the memory of the rehearsal's whole process tree (Snakemake, its jobs, the stand-ins) are sampled.
Then, from the ``benchmark:`` file Snakemake writes for every job (wall seconds ``s``, ``cpu_time`` in seconds,
``max_rss`` in MB), for every stage none of whose jobs starts a model, in each judge mode (full mode's files as the
rehearsal kept them, ``full-mode-benchmarks/``; cascade mode's: the jobs its phase ran again): its jobs, items
(the run's instances), wall time, CPU time and peak RSS at each size; the growth exponent between the two largest
sizes (log CPU-time ratio over log items ratio: 1 is linear; CPU time, since wall time on a shared machine is
mostly other processes' turn) and the full size's CPU time against the linear extrapolation from the size before
(flagged past 1.25x). Beside them, what the plan predicts of each stage at the largest size: the local estimate's
time for its jobs that start no model on a core of their own (this checkout's ``config/throughput.yaml``:
``cpu.other_job_s`` each, and the work that grows with the run's requests, ``h2htalk.plan.work``, counted from the
run's plan), against their CPU time, and the plan's GPU-hours of each model stage (``plan.csv``; the stand-ins
measure no GPU, so their jobs' time is shown only beside it). Nothing is asserted: say what machine ran it and what
else ran there.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import psutil

from h2htalk.config import merge_layers, validate_config
from h2htalk.layout import Layout, instances_set
from h2htalk.plan.calls import JobName, job_name
from h2htalk.plan.costs import CpuCalibration, load_throughput
from h2htalk.plan.work import work_seconds
from h2htalk.stages.spec import Scope
from h2htalk.stages.table import STAGES

ROOT = Path(__file__).resolve().parents[1]
FLAGGED = 1.25  # a full-size time past this multiple of the linear extrapolation is flagged
FULL_MODE_BENCHMARKS = "full-mode-benchmarks"  # paper_rehearsal.py's copy of the benchmark files after full mode
# the plan report's names of the steps before it named them as h2htalk.stages.steps does (a rehearsal's older plan)
EARLIER_STEP_NAMES = {
    "generate studies": "study.answers", "reconstruct": "reconstruct_instances", "rubric judge": "rubric_judge",
    "study judge": "study.judge", "judge ladder": "judge_ladder",
}  # fmt: skip


def stage_costs(benchmarks: Path, since: Path | None = None) -> dict[str, dict[str, float]]:
    """Per stage (a benchmark file's first folder, or its name): jobs, wall and CPU seconds summed, peak RSS (MB).
    With ``since`` (an earlier copy of the folder), only the jobs that ran again after it."""
    stages: dict[str, dict[str, float]] = defaultdict(lambda: {"jobs": 0, "wall_s": 0.0, "cpu_s": 0.0, "rss_mb": 0.0})
    for path in sorted(benchmarks.rglob("*.tsv")):
        relative = path.relative_to(benchmarks)
        earlier = since / relative if since else None
        if earlier is not None and earlier.is_file() and earlier.read_bytes() == path.read_bytes():
            continue
        stage = relative.parts[0].removesuffix(".tsv")
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


def plan_file(results: Path) -> Path:
    """The run's plan: ``plan.csv``, else the one the rehearsal made before the run (``plan-before.csv``)."""
    latest = results / "plan.csv"
    return latest if latest.is_file() else results / "plan-before.csv"


def planned_requests(plan_csv: Path) -> dict[tuple[str, str], int]:
    """The run's requests by step and model, cached or not, as its plan counted them."""
    requests: dict[tuple[str, str], int] = defaultdict(int)
    if plan_csv.is_file():
        for row in csv.DictReader(plan_csv.open(encoding="utf-8")):
            requests[EARLIER_STEP_NAMES.get(row["stage"], row["stage"]), row["model"]] += int(row["requests"])
    return dict(requests)


def benchmarked_jobs(benchmarks: Path) -> dict[str, list[JobName]]:
    """Each stage's jobs that wrote a benchmark file (``{stage}/{label values, in the stage's order}.tsv``)."""
    declared = {stage.name: stage for stage in STAGES}
    jobs: dict[str, list[JobName]] = defaultdict(list)
    for path in sorted(benchmarks.rglob("*.tsv")):
        stage, *values = path.relative_to(benchmarks).with_suffix("").parts
        if stage in declared:
            jobs[stage].append(job_name(stage, dict(zip(declared[stage].labels, values, strict=False))))
    return dict(jobs)


def predicted_seconds(jobs: list[JobName], requests: dict[tuple[str, str], int], cpu: CpuCalibration) -> float:
    """The local estimate's seconds of ``jobs`` (of a stage that starts no model) on a core of their own."""
    return sum(cpu.other_job_s + work_seconds(job, requests, cpu, STAGES) for job in jobs)


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


class Sampler(threading.Thread):
    """The machine's 1-minute load average and the RSS of a process and its descendants, every ``every`` s."""

    def __init__(self, pid: int, every: float = 10.0) -> None:
        super().__init__(daemon=True)
        self.pid, self.every, self.loads, self.rss_mb = pid, every, [], 0.0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.loads.append(os.getloadavg()[0])
            self.rss_mb = max(self.rss_mb, tree_rss_mb(self.pid))

    def summary(self) -> dict[str, float | None]:
        loads = self.loads or [os.getloadavg()[0]]
        return {"load_mean": round(statistics.fmean(loads), 1), "load_min": round(min(loads), 1),
                "load_max": round(max(loads), 1), "tree_rss_peak_mb": round(self.rss_mb)}  # fmt: skip


def tree_rss_mb(pid: int) -> float:
    """RSS of a process and every process below it (MB); one that ended meanwhile counts 0."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            total += process.memory_info().rss
    return total / 2**20


def stage_growth(
    before: dict[str, Any] | None, last: dict[str, Any], key: str, stage: str, measure: str
) -> tuple[float | None, float | None]:
    """``growth`` of one stage's ``measure`` (cpu_s, wall_s) from the run ``before`` to the ``last`` one."""
    if before is None or stage not in before[key] or stage not in last[key]:
        return None, None
    return growth(*((run["items"], run[key][stage][measure]) for run in (before, last)))


def rehearse(args: argparse.Namespace, size: str, work: Path) -> None:
    command = [
        sys.executable, str(ROOT / "benchmarks" / "paper_rehearsal.py"), "--profile", "local",
        "--models", args.models, "--items-per-subtask", size, "--judge-mode", "both",
        "--upstream-dir", str(args.upstream_dir), "--workdir", str(work), "--out", str(work / "rehearsal.json"),
    ]  # fmt: skip
    print(f"size {size}: {work}", flush=True)
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "paper-scale.log", "w", encoding="utf-8") as log:
        run = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True)
        sampler = Sampler(run.pid)
        sampler.start()
        returncode = run.wait()
        sampler.done.set()
    machine = {**sampler.summary(), "cpus": os.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30)}
    (work / "machine.json").write_text(json.dumps(machine), encoding="utf-8")
    if returncode != 0:
        sys.exit(f"the rehearsal at {size} failed ({returncode}): see {work / 'paper-scale.log'}")


def measured(size: str, work: Path) -> dict[str, Any]:
    """What the rehearsal in ``work`` cost, stage by stage."""
    with contextlib.chdir(work):  # the configuration names its files relative to the run's folder
        config = validate_config(merge_layers(["config/config.yaml", "config/rehearsal.yaml"], []))
    # this checkout's calibration, on an older run too
    cpu = load_throughput(ROOT / "config" / "throughput.yaml", STAGES).cpu
    tree = Layout(str(work / "results"), instances_set(config))
    results, benchmarks = work / tree.set_root, work / tree.path("benchmarks")
    full_mode, machine, done = work / FULL_MODE_BENCHMARKS, work / "machine.json", work / "rehearsal.json"
    requests = planned_requests(plan_file(results))
    jobs = benchmarked_jobs(full_mode if full_mode.is_dir() else benchmarks)
    return {
        "size": size,
        "items": instance_count(results),
        "wall_s": json.loads(done.read_text(encoding="utf-8"))["wall_s"] if done.is_file() else None,
        "stages": stage_costs(full_mode if full_mode.is_dir() else benchmarks),
        "cascade_stages": stage_costs(benchmarks, since=full_mode) if full_mode.is_dir() else {},
        "machine": json.loads(machine.read_text(encoding="utf-8")) if machine.is_file() else {},
        "model_stages": sorted(model_stages(config, tree)),
        "gpu_hours": planned_gpu_hours(plan_file(results)),
        "predicted_s": {stage: predicted_seconds(found, requests, cpu) for stage, found in jobs.items()} if cpu else {},
    }


def report(runs: list[dict[str, Any]]) -> None:
    for run in runs:
        machine = run["machine"]
        seen = (f", load average {machine['load_mean']} ({machine['load_min']}-{machine['load_max']}) on"
                f" {machine['cpus']} CPUs; the run's processes together at most {machine['tree_rss_peak_mb']} MB"
                if machine else "")  # fmt: skip
        took = "unfinished (its jobs that finished)" if run["wall_s"] is None else f"{run['wall_s'] / 60:.1f} min"
        print(f"size {run['size']}: {run['items']} items, {took}{seen}")
    sizes = " | ".join(f"{run['size']}: jobs, wall s, CPU s, peak MB" for run in runs)
    print(f"\n| stage | mode | {sizes} | growth (CPU) | growth (wall) | last CPU / linear |\n|---|---|"
          + "---|" * (len(runs) + 3))  # fmt: skip
    last, before = runs[-1], runs[-2] if len(runs) > 1 else None
    others = sorted(set().union(*(run["stages"] for run in runs)) - set(last["model_stages"]))
    for stage in others:
        for mode, key in (("full", "stages"), ("cascade", "cascade_stages")):
            if not any(stage in run[key] for run in runs):
                continue
            cells = []
            for run in runs:
                cost = run[key].get(stage)
                cells.append(f"{cost['jobs']:.0f}, {cost['wall_s']:.1f}, {cost['cpu_s']:.1f}, {cost['rss_mb']:.0f}"
                             if cost else "-")  # fmt: skip
            exponent, over = stage_growth(before, last, key, stage, "cpu_s")
            wall_exponent, _ = stage_growth(before, last, key, stage, "wall_s")
            flag = " **past 1.25x**" if over is not None and over > FLAGGED else ""
            print(f"| {stage} | {mode} | {' | '.join(cells)} | {_shown(exponent)} | {_shown(wall_exponent)} |"
                  f" {_shown(over)}{flag} |")  # fmt: skip
    print(f"\nAt {last['size']} ({last['items']} items), the plan's prediction beside the jobs' time:")
    print("| stage | jobs | predicted s, a core of its own | CPU s | CPU / predicted | wall s |")
    print("|---|--:|--:|--:|--:|--:|")
    for stage in (stage for stage in others if stage in last["stages"]):  # an unfinished run: the jobs it ran
        cost, predicted = last["stages"][stage], last["predicted_s"].get(stage)
        ratio = cost["cpu_s"] / predicted if predicted else None
        print(f"| {stage} | {cost['jobs']:.0f} | {_shown(predicted, 1)} | {cost['cpu_s']:.1f} | {_shown(ratio)} |"
              f" {cost['wall_s']:.1f} |")  # fmt: skip
    for stage in (stage for stage in last["model_stages"] if stage in last["stages"]):
        cost = last["stages"][stage]
        print(f"| {stage} (starts models: stand-ins) | {cost['jobs']:.0f} | see below | {cost['cpu_s']:.1f} | - |"
              f" {cost['wall_s']:.1f} |")  # fmt: skip
    print("\n| the plan's stage | GPU-hours from nothing (A100, config/throughput.yaml) |\n|---|--:|")
    for stage, hours in sorted(last["gpu_hours"].items()):
        print(f"| {stage} | {hours:.1f} |")


def _shown(value: float | None, places: int = 2) -> str:
    return "-" if value is None else f"{value:.{places}f}"


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
