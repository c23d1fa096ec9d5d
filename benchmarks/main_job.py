"""Time the README's main job, cold, as a new user runs it: wall time and the most expensive rules.

    python benchmarks/main_job.py --upstream-dir /path/to/H2HTalk/data [--cores 2] [--keep DIR]

Copies the workflow into an empty folder (no outputs, no caches, no Snakemake state), runs
``snakemake --profile profiles/local`` there (with ``upstream_dir`` set, for machines that cannot reach
GitHub), then runs it again to time a no-op rerun. Prints both wall times, the size of the cold run's terminal
output, the 10 most expensive jobs and the time per rule, from the ``benchmark:`` file every rule writes under
the set's ``benchmarks/`` folder. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from table1_from_scratch import copy_checkout  # the same fresh copy of the workflow

from h2htalk.config import load_config
from h2htalk.layout import Layout, instances_set
from h2htalk.plan.timing import benchmark_seconds as job_seconds  # seconds per job, from its benchmark file

ROOT = Path(__file__).resolve().parents[1]


def rule_of(job: str) -> str:
    """A job's benchmark file is ``{rule}/{wildcards}.tsv`` (``{rule}.tsv`` without wildcards)."""
    return job.split("/", 1)[0]


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream-dir", required=True, help="folder holding the 11 released files")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="copy the run's results/ and paper_figures/ here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        copy_checkout(work)
        command = [
            sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--cores", str(args.cores),
            "--config", f"upstream_dir={Path(args.upstream_dir).resolve()}",
        ]  # fmt: skip
        start = time.perf_counter()
        run = subprocess.run(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.perf_counter() - start
        terminal = run.stdout
        if run.returncode != 0:
            sys.exit(f"the main job failed ({run.returncode}):\n{terminal[-4000:]}")
        start = time.perf_counter()
        again = subprocess.run(
            command, cwd=work, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        rerun = time.perf_counter() - start
        # a no-op rerun runs nothing; if it did, say which jobs
        reran = next((line for line in again.stdout.splitlines() if re.match(r"\d+ jobs: ", line)), "nothing")
        laptop = load_config([ROOT / "config" / "config.yaml", ROOT / "config" / "local.yaml"])
        jobs = job_seconds(work / Layout("results", instances_set(laptop)).path("benchmarks"))
        if args.keep:
            for folder in ("results", "paper_figures"):
                shutil.copytree(work / folder, args.keep / folder, dirs_exist_ok=True)
    rules: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for job, seconds in jobs.items():
        rules[rule_of(job)] += seconds
        counts[rule_of(job)] += 1
    print(f"main job, cold: {minutes(wall)} ({len(jobs)} jobs, {minutes(sum(jobs.values()))} of job time)")
    print(f"no-op rerun: {rerun:.1f} s, ran {reran}")
    size = f"{len(terminal.splitlines())} lines, {len(terminal.encode()) / 1000:.0f} KB"
    print(f"terminal output of the cold run: {size}\n")
    print("| the 10 most expensive jobs | time |\n|---|---|")
    for job, seconds in sorted(jobs.items(), key=lambda item: -item[1])[:10]:
        print(f"| {job} | {minutes(seconds)} |")
    print("\n| rule | jobs | time |\n|---|---|---|")
    for rule, seconds in sorted(rules.items(), key=lambda item: -item[1]):
        print(f"| {rule} | {counts[rule]} | {minutes(seconds)} |")


if __name__ == "__main__":
    main()
