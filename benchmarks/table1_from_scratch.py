"""Time the data stage from nothing to Table 1 on the whole release, as a user runs it.

    python benchmarks/table1_from_scratch.py --upstream-dir /path/to/H2HTalk/data [--cores 2]

Copies the workflow into a temporary folder (no outputs, no Snakemake state), runs
``snakemake --profile profiles/local table1`` there, and prints its wall time, then the time of each stage
run on its own through the ``h2htalk`` command (person-name detection, jieba's part-of-speech tagger, is
most of curation; it is also timed switched off). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from h2htalk.subtasks import SUBTASKS

ROOT = Path(__file__).resolve().parents[1]


def copy_checkout(target: Path) -> None:
    shutil.copy2(ROOT / "Snakefile", target / "Snakefile")
    for folder in ("workflow", "config", "profiles", "src", "envs"):
        for link in (path for path in (ROOT / folder).rglob("*") if path.is_symlink()):
            (target / link.relative_to(ROOT)).unlink(missing_ok=True)  # a rerun's copy makes it again
        shutil.copytree(
            ROOT / folder,
            target / folder,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__"),
            dirs_exist_ok=True,  # a rerun in the same folder takes the checkout's changes
        )


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True)
    return time.perf_counter() - start


def timed_all(commands: list[list[str]], cwd: Path) -> float:
    return sum(timed(command, cwd) for command in commands)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream-dir", required=True, help="folder holding the 11 released files")
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    upstream = str(Path(args.upstream_dir).resolve())

    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        copy_checkout(work)
        snakemake = [sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--cores", str(args.cores)]
        table1 = [*snakemake, "table1", "--config", f"upstream_dir={upstream}"]
        rows.append(("snakemake table1, from nothing", timed(table1, work)))
        rows.append(("snakemake table1, nothing to do", timed(table1, work)))

        stage = work / "stages"
        cli = [sys.executable, "-m", "h2htalk"]
        fetch = ["fetch", "--upstream-dir", upstream, "--out-dir", f"{stage}/up"]
        rows.append(
            ("h2htalk fetch (copy + check 11 files)", timed([*cli, *fetch, "--manifest", f"{stage}/m.json"], work))
        )

        def curate_all(out: str, *options: str) -> list[list[str]]:
            return [
                [*cli, "curate", *options, "--subtask", s.key, "--upstream", f"{stage}/up/{s.upstream_file}",
                 "--manifest", f"{stage}/m.json", "--out", f"{out}/{s.key}.jsonl",
                 "--report", f"{out}/{s.key}.report.json"]
                for s in SUBTASKS
            ]  # fmt: skip

        names_off = json.dumps({"data": {"curate": {"anonymise": {"person_name": "ignore"}}}})
        rows.append(("h2htalk curate, all 11 subtasks, 1 process each", timed_all(curate_all(f"{stage}/c"), work)))
        rows.append(
            ("h2htalk curate, names ignored", timed_all(curate_all(f"{stage}/c2", "--config-json", names_off), work))
        )
        reports = sorted(str(p) for p in (stage / "c").glob("*.report.json"))
        table = [*cli, "table1", *reports, "--out", f"{stage}/table1"]
        rows.append(("h2htalk table1", timed(table, work)))

    width = max(len(name) for name, _ in rows)
    print(f"{'step'.ljust(width)}  seconds")
    for name, seconds in rows:
        print(f"{name.ljust(width)}  {seconds:7.2f}")


if __name__ == "__main__":
    main()
