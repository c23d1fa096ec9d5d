"""The paper's dry run on a cluster: its job list, what it submits, and how long ``snakemake -n`` takes.

    python benchmarks/dry_run.py --upstream-dir /path/to/H2HTalk/data [--jobs FILE] [--links FILE] [--repeat 3]

Copies the workflow into an empty folder (no outputs, no Snakemake state) and runs
``snakemake --profile profiles/slurm -n`` there: ``--repeat`` times to time it (each run's wall and CPU seconds,
the seconds its main thread waited for a core, and the machine's load average before it), then once more in this
process to read each job Snakemake plans. It also times ``scontrol show config``: the SLURM plugin runs it when
Snakemake imports it, and where SLURM's commands are installed but no controller answers, it waits about 9 s for it
before any snakemake command starts. ``--jobs`` writes the job list, one sorted row per job: rule, wildcards,
whether it is submitted to SLURM or runs where Snakemake runs (a local rule), partition, GPUs, GPU type, CPUs per
GPU, threads, memory (MB) and runtime (minutes); ``--links``, which job needs which. Two checkouts' lists compare
with ``diff``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from table1_from_scratch import copy_checkout  # the same fresh copy of the workflow

COLUMNS = (
    "rule", "wildcards", "runs", "partition", "gpus", "gpu_model", "cpus_per_gpu", "threads", "mem_mb", "runtime",
)  # fmt: skip


def dry_run_args(upstream_dir: Path) -> list[str]:
    return ["--profile", "profiles/slurm", "-n", "--config", f"upstream_dir={upstream_dir.resolve()}"]


@dataclass
class Timed:
    wall: float  # seconds
    cpu: float  # user and system seconds, its child processes included
    queued: float  # seconds its main thread was ready to run but waited for a core (Linux's schedstat)
    load: float  # the 1-minute load average before it


def timed_runs(work: Path, args: list[str], repeat: int) -> list[Timed]:
    """Each run's times. On a busy machine the wall time less the time queued for a core is about what it takes on
    an idle one (the command's other waits, on subprocesses and files, stay in)."""
    env = {**os.environ, "PYTHONPATH": str(work / "src")}
    return [timed_run([sys.executable, "-m", "snakemake", *args], work, env) for _ in range(repeat)]


def timed_run(command: list[str], work: Path, env: dict[str, str]) -> Timed:
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        queued = 0.0
        while process.poll() is None:  # read until it ends: the last reading misses at most one interval
            with contextlib.suppress(OSError, IndexError, ValueError):
                queued = int(Path(f"/proc/{process.pid}/schedstat").read_text().split()[1]) / 1e9
            time.sleep(0.02)
        wall = time.perf_counter() - start
        if process.returncode != 0:
            errors.seek(0)
            sys.exit(f"the dry run failed:\n{errors.read().decode()[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(wall, cpu, queued, load)


def scontrol_seconds() -> str:
    """How long ``scontrol show config`` takes here (the SLURM plugin's wait at import), or that it is not here."""
    if shutil.which("scontrol") is None:
        return "scontrol: not installed (the SLURM plugin asks no controller)"
    start = time.perf_counter()
    answered = subprocess.run(["scontrol", "show", "config"], capture_output=True, timeout=60).returncode == 0
    took = time.perf_counter() - start
    return f"scontrol show config: {took:.2f} s ({'a controller answered' if answered else 'no controller answered'})"


def planned_jobs(work: Path, args: list[str]) -> tuple[list[dict[str, str]], list[str]]:
    """The jobs of a dry run in ``work``, as the cluster run would place them, and the links between them: one line
    ``job -> job that needs it`` each (read in this process)."""
    from snakemake import cli
    from snakemake.executors import dryrun

    rows: list[dict[str, str]] = []
    links: list[str] = []
    printjob = dryrun.Executor.printjob

    def record(executor, job) -> None:  # every job the dry run plans passes here once
        printjob(executor, job)
        for one in job.jobs if job.is_group() else [job]:
            rows.append(job_row(one, executor.workflow))
            links.extend(
                f"{job_name(needed)} -> {job_name(one)}" for needed in executor.workflow.dag.job_dependencies(one)
            )

    sys.path.insert(0, str(work / "src"))
    dryrun.Executor.printjob = record
    cwd = Path.cwd()
    os.chdir(work)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            cli.main([*args, "--quiet", "all"])
    finally:
        os.chdir(cwd)
        dryrun.Executor.printjob = printjob
    return sorted(rows, key=lambda row: [row[column] for column in COLUMNS]), sorted(links)


def job_name(job) -> str:
    return " ".join([job.rule.name, *(f"{key}={value}" for key, value in sorted(job.wildcards_dict.items()))])


def job_row(job, workflow) -> dict[str, str]:
    # A dry run executes locally, so Snakemake's own is_local is true for every job; this is its test for a cluster
    # run: a job is submitted unless its rule is a local rule or runs no command.
    local = job.rule.group is None and (job.rule.name in workflow._localrules or job.rule.norun)
    resources = job.resources
    wildcards = ",".join(f"{key}={value}" for key, value in sorted(job.wildcards_dict.items()))
    row = {
        "rule": job.rule.name,
        "wildcards": wildcards or "-",
        "runs": "local" if local else "submitted",
        "partition": resources.get("slurm_partition") or "-",
        "gpus": resources.get("gpu", 0),
        "gpu_model": resources.get("gpu_model") or "-",
        "cpus_per_gpu": resources.get("cpus_per_gpu", "-"),
        "threads": job.threads,
        "mem_mb": resources.get("mem_mb"),
        "runtime": resources.get("runtime"),
    }
    return {key: str(value) for key, value in row.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream-dir", type=Path, required=True, help="folder holding the 11 released files")
    parser.add_argument("--jobs", type=Path, help="write the job list here (tab-separated, sorted)")
    parser.add_argument("--links", type=Path, help="write the links between the jobs here (sorted)")
    parser.add_argument("--repeat", type=int, default=3, help="timed dry runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        copy_checkout(work)
        run_args = dry_run_args(args.upstream_dir)
        timed_runs(work, run_args, 1)  # compiles the copy's modules; not counted
        runs = timed_runs(work, run_args, args.repeat)
        rows, links = planned_jobs(work, run_args)
    print(scontrol_seconds())
    for number, run in enumerate(runs, 1):
        print(
            f"dry run {number}: {run.wall:.2f} s wall, {run.cpu:.2f} s CPU, {run.queued:.2f} s waiting for a core: "
            f"{run.wall - run.queued:.2f} s without that wait (load average before: {run.load:.2f})"
        )
    submitted = Counter(row["rule"] for row in rows if row["runs"] == "submitted")
    count = sum(submitted.values())
    print(f"{len(rows)} jobs, {count} submitted to SLURM, {len(rows) - count} local")
    print("submitted: " + ", ".join(f"{rule} {count}" for rule, count in sorted(submitted.items())))
    if args.jobs:
        lines = ["\t".join(COLUMNS)] + ["\t".join(row[column] for column in COLUMNS) for row in rows]
        args.jobs.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"job list: {args.jobs}")
    if args.links:
        args.links.write_text("\n".join(links) + "\n", encoding="utf-8")
        print(f"{len(links)} links between the jobs: {args.links}")


if __name__ == "__main__":
    main()
