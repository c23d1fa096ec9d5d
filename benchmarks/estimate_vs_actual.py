"""The time a run says before it starts against the time it takes: the README's main job from an empty folder.

    python benchmarks/estimate_vs_actual.py --upstream-dir /path/to/H2HTalk/data [--states quiet busy learning]
        [--cores 2] [--limit N] [--subtasks S ...] [--variants V ...] [--until RULE ...] [--out R.json]

Three states of the machine, each in a fresh copy of the workflow with an empty rates cache (its own
``XDG_CACHE_HOME``):

- ``quiet``: nothing else started;
- ``busy``: one busy process at nice 0 beside the run, from before its start to its end;
- ``learning``: two runs sharing one cache; the first's rates are measured under heavy load (four busy processes
  at nice 0, stopped as soon as it prints its estimate), the second starts from another empty folder on the quiet
  machine and reads what the first kept.

For each run: the estimate as the run printed it (a range where other processes held the cores), and, per job kind
and in all, expected minutes, minutes taken (the jobs' benchmark files; in all, the wall time from the estimate to
the run's end, as the run's closing line counts it) and their ratio, beside the machine's 1-minute load average read
every 30 s during the run.
``--limit`` (``instances.limit``), ``--subtasks``, ``--variants`` and ``--until`` (Snakemake's) make a small run to
try the script on. Nothing is
asserted: the machine's load is what is measured, so say which machine and what else ran on it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from table1_from_scratch import copy_checkout  # the same fresh copy of the workflow

from h2htalk.config import load_config
from h2htalk.layout import Layout, instances_set
from h2htalk.plan.timing import OTHER_JOBS, job_seconds_since

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = re.compile(
    r"^Expected time: (?:about )?(?P<whole>[\d.]+(?:-[\d.]+)?) min on this machine: (?P<parts>.*?) \("
)
PART = re.compile(r"(?P<job>[\w ]+?) ~(?P<minutes>[\d.]+)")
KEPT_LINES = ("Expected time:", "Rates kept in", "Took ", "Rates this run's jobs ran at", "No time estimate")


@contextlib.contextmanager
def busy_processes(count: int, nice: int = 0) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` Python processes that keep a core busy each, at ``nice``, stopped when the block ends."""
    started = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=lambda: os.nice(nice))
        for _ in range(count)
    ]
    try:
        yield started
    finally:
        stop(started)


@contextlib.contextmanager
def load_samples(every_s: float = 30.0) -> Iterator[list[float]]:
    """The machine's 1-minute load average, read every ``every_s`` seconds while the block runs (the world it ran in:
    the benchmark's own busy processes and everyone else's work, not only this run's)."""
    samples: list[float] = [os.getloadavg()[0]]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every_s):
            samples.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield samples
    finally:
        done.set()
        sampler.join()


def load_summary(samples: list[float]) -> str:
    return f"{sum(samples) / len(samples):.1f} ({min(samples):.1f}-{max(samples):.1f}, {len(samples)} samples)"


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait()


def run_once(
    work: Path, cache: Path, args: argparse.Namespace, stop_after_estimate: list[subprocess.Popen[bytes]] = ()
) -> dict:
    """One run of the main job in ``work`` with the rates cache under ``cache``: its lines and its numbers."""
    work.mkdir(parents=True)
    copy_checkout(work)
    layers = ["config/config.yaml", "config/local.yaml"]  # the profile's, and a smaller run's where asked for
    smaller = {key: value for key, value in (("subtasks", args.subtasks), ("variants", args.variants)) if value}
    if args.limit:
        smaller["instances"] = {"limit": args.limit}
    if smaller:
        (work / "config" / "smaller.yaml").write_text(json.dumps(smaller), encoding="utf-8")  # JSON is YAML
        layers.append("config/smaller.yaml")
    command = [sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--cores", str(args.cores),
               "--configfiles", *layers, "--config", f"upstream_dir={Path(args.upstream_dir).resolve()}",
               *(["--until", *args.until] if args.until else [])]  # fmt: skip
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started, lines, said = time.time(), [], []
    said_at = started
    with (
        load_samples() as loads,
        subprocess.Popen(
            command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as process,
    ):
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith(KEPT_LINES):
                said.append(line.rstrip())
                print(f"    {line.rstrip()}", flush=True)
            if line.startswith("Expected time:"):
                said_at = time.time()  # the time taken is counted from here, as the run's closing line does
                stop(list(stop_after_estimate))  # the heavy load was for the measurement only
    wall = time.time() - said_at
    if process.returncode != 0:
        sys.exit(f"the run failed ({process.returncode}):\n{''.join(lines[-60:])}")
    with contextlib.chdir(work):  # the run's own configuration: its instance set's results
        config = load_config(layers)
    stages = job_seconds_since(work / Layout("results", instances_set(config)).path("benchmarks"), started)
    expected = next((EXPECTED.match(line) for line in said if EXPECTED.match(line)), None)
    if expected is None:
        sys.exit("the run printed no estimate:\n" + "\n".join(said or lines[-30:]))
    parts = {m["job"].strip(): float(m["minutes"]) for m in PART.finditer(expected["parts"])}
    taken = {job: stages.get(job, 0.0) / 60 for job in parts if job != OTHER_JOBS}
    taken[OTHER_JOBS] = sum(s for job, s in stages.items() if job not in parts) / 60
    return {"said": said, "whole": expected["whole"], "expected": parts, "taken": taken, "wall_min": wall / 60,
            "load_average": loads}  # fmt: skip


def table(state: str, result: dict) -> list[str]:
    rows = []
    for job, expected in result["expected"].items():
        taken = result["taken"].get(job, 0.0)
        rows.append(f"| {state} | {job} | {expected:.1f} | {taken:.1f} | {taken / expected:.2f} | |" if expected else
                    f"| {state} | {job} | {expected:.1f} | {taken:.1f} | - | |")  # fmt: skip
    point = float(result["whole"].split("-")[-1])  # a range's upper end: the estimate as the load was
    rows.append(f"| {state} | **all** ({result['whole']}) | {point:.1f} | {result['wall_min']:.1f} |"
                f" {result['wall_min'] / point:.2f} | {load_summary(result['load_average'])} |")  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream-dir", required=True, help="folder holding the 11 released files")
    parser.add_argument("--states", nargs="+", choices=["quiet", "busy", "learning"],
                        default=["quiet", "busy", "learning"])  # fmt: skip
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--limit", type=int, help="instances.limit: a small run to try the script on")
    parser.add_argument("--subtasks", nargs="+", metavar="SUBTASK", help="only these subtasks: a smaller run")
    parser.add_argument("--variants", nargs="+", choices=["sap", "nosap"], help="only these variants: a smaller run")
    parser.add_argument("--until", nargs="+", metavar="RULE", help="Snakemake's --until: only these rules' part")
    parser.add_argument("--out", type=Path, help="write every run's lines and numbers here (JSON)")
    args = parser.parse_args()
    results: dict[str, dict] = {}
    for state in args.states:
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp) / "cache"
            print(f"{state}:", flush=True)
            if state == "quiet":
                results[state] = run_once(Path(tmp) / "run", cache, args)
            elif state == "busy":
                with busy_processes(1):
                    results[state] = run_once(Path(tmp) / "run", cache, args)
            else:
                with busy_processes(4) as heavy:
                    time.sleep(5)  # the load under way before the run reads it
                    results["learning, first run"] = run_once(Path(tmp) / "first", cache, args, heavy)
                print("  second run:", flush=True)
                results["learning, second run"] = run_once(Path(tmp) / "second", cache, args)
    print(
        "\n| state | job | expected (min) | taken (min) | taken / expected | load average: mean (range) |"
        "\n|---|---|--:|--:|--:|---|"
    )
    for state, result in results.items():
        print("\n".join(table(state, result)))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
