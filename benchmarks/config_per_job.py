"""What a workflow job spends on its configuration: validated again, or read as the Snakefile validated it.

    python benchmarks/config_per_job.py [--config FILE ...] [--runs N]

The configuration (default: the paper study's, ``config/config.yaml``) is validated once and written as the
workflow writes its run's ``results/config.json``. Then, ``--runs`` times each, a fresh interpreter (as every job
is) reads it the way a job's command does (``h2htalk.cli.options.full_config``), in two ways taken in turn:

    validated   without the workflow's digest in the environment: the file is validated again (jsonschema with
                the schema's defaults, and the model names checked against the registry)
    read        with it: the file, unchanged, is read as it is

Prints, for each way, the median time of the configuration read in the process and of the whole process (the
interpreter, the imports of ``h2htalk.cli``, the read). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from h2htalk.config import VALIDATED_DIGEST, load_config, resolved_digest, write_resolved

ROOT = Path(__file__).resolve().parent.parent

JOB = """
import argparse, json, sys, time
from h2htalk.cli.options import full_config
start = time.perf_counter()
full_config(argparse.Namespace(config=[sys.argv[1]]))
print(json.dumps(time.perf_counter() - start))
"""


def one_job(path: Path, env: dict[str, str]) -> tuple[float, float]:
    """The configuration read's seconds and the process's."""
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", JOB, str(path)], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    return json.loads(out), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", default=[], metavar="FILE", help="default: config/config.yaml")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    os.chdir(ROOT)  # the registry's path in the configuration is the checkout's
    config = load_config(args.config or ["config/config.yaml"])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "config.json")
        write_resolved(config, path)
        plain = {key: value for key, value in os.environ.items() if key != VALIDATED_DIGEST}
        ways = {"validated": plain, "read": {**plain, VALIDATED_DIGEST: resolved_digest(config)}}
        times: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
        for _ in range(args.runs):
            for way, env in ways.items():
                times[way].append(one_job(path, env))
    for way, runs in times.items():
        read, process = (statistics.median(values) for values in zip(*runs, strict=True))
        print(f"{way:10s} configuration {read * 1000:7.1f} ms   process {process * 1000:7.1f} ms   ({args.runs} runs)")


if __name__ == "__main__":
    main()
