"""llama.cpp's rates when its cores are shared, for libgomp's spin settings: why the llamacpp engine starts its
server with ``GOMP_SPINCOUNT=1000``.

    python benchmarks/shared_cores.py [--model-file FILE] [--threads 2] [--repeats 2]

llama-cpp-python's wheels are built with OpenMP; libgomp's threads spin 300,000 times (its default) before they
sleep between the graph's operations. Alone on its cores that costs nothing, but beside a second busy process
each spinning thread takes the core from the one with work. Per setting (libgomp's default, ``GOMP_SPINCOUNT=1000``
as the engine sets it, ``OMP_WAIT_POLICY=passive``) and situation (alone; beside a second llama.cpp doing the
same, as two jobs or two test workers do; beside one busy Python process, as a scoring job or the client is),
pp512 and tg128 at depth 0, measured as ``h2htalk.llm.engines.measure.in_process_rates`` does, in a fresh process each.
The model file defaults to the local model the main job assembled (``results/models/``). Nothing is asserted;
docs/performance.md quotes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "results" / "models" / "qwen2.5-coder-0.5b-instruct-q4km.gguf"
SETTINGS = {
    "libgomp's default": {},
    "GOMP_SPINCOUNT=1000 (the engine's)": {"GOMP_SPINCOUNT": "1000"},
    "OMP_WAIT_POLICY=passive": {"OMP_WAIT_POLICY": "passive"},
}
MEASURE = (
    "import json, sys; from h2htalk.llm.engines.measure import in_process_rates; "
    "(_, pp, tg), = in_process_rates(sys.argv[1], int(sys.argv[2]), True); print(json.dumps([pp, tg]))"
)
BUSY = "while True: pass"


def measure(model_file: Path, threads: int, environment: dict[str, str], beside: str | None) -> tuple[float, float]:
    """pp512 and tg128 of one fresh process with ``environment``, alone or ``beside`` another."""
    env = {key: value for key, value in os.environ.items() if key not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env.update(environment)
    command = [sys.executable, "-c", MEASURE, str(model_file), str(threads)]
    other = None
    if beside == "llama":
        other = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    elif beside == "python":
        other = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    finally:
        if beside == "python" and other:
            other.kill()
        if other:
            other.wait()
    pp, tg = json.loads(result.stdout.strip().splitlines()[-1])
    return pp, tg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-file", type=Path, default=MODEL)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if not args.model_file.exists():
        sys.exit(f"no model file at {args.model_file}: run the main job first, or give --model-file")
    situations = {"alone": None, "beside a second llama.cpp": "llama", "beside a busy Python process": "python"}
    print(
        f"| setting | situation | pp512 | tg128 |  ({args.threads} threads, {os.cpu_count()} cores, median of "
        f"{args.repeats})"
    )
    print("| --- | --- | --: | --: |")
    for setting, environment in SETTINGS.items():
        for situation, beside in situations.items():
            runs = [measure(args.model_file, args.threads, environment, beside) for _ in range(args.repeats)]
            pp, tg = (statistics.median(rates) for rates in zip(*runs, strict=True))
            print(f"| {setting} | {situation} | {pp:.1f} | {tg:.1f} |", flush=True)


if __name__ == "__main__":
    main()
