"""Local generation throughput at concurrency 1 against the configured concurrency, same prompts, one run.

    python benchmarks/generation_concurrency.py [--model-file results/models/X.gguf] [--concurrency 4]

Starts one llama.cpp server with the default local model (the registry's laptop default), renders the demo
instances of every subtask (sap variant), and generates them twice on a fresh cache each time: once with one
request in flight, once with ``--concurrency`` in flight. Prints completion tokens per second and requests per
second for both and their ratio. Nothing is asserted; the figures go into the issue note.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from h2htalk.config import default_config, load_registry
from h2htalk.generation.generate import PromptFile, generate_model
from h2htalk.generation.provision import provision_gguf
from h2htalk.instances.sources import demo_instances
from h2htalk.io import read_jsonl
from h2htalk.llm.calls import EngineOptions
from h2htalk.llm.engines import open_endpoint
from h2htalk.prompts.render import write_prompts
from h2htalk.settings import GenerationSettings
from h2htalk.subtasks import SUBTASK_KEYS

ROOT = Path(__file__).resolve().parents[1]
MODEL = "qwen2.5-coder-0.5b-instruct-q4km"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-file", type=Path, help="the GGUF file (provisioned into a temp folder if absent)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()
    spec = load_registry(ROOT / "config" / "models.yaml")[MODEL]

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_file = args.model_file
        if model_file is None or not model_file.exists():
            model_file = work / "model.gguf"
            provision_gguf(spec["gguf"], model_file)
        prompts = {}
        for subtask in SUBTASK_KEYS:
            prompts[subtask] = work / "prompts" / "sap" / f"{subtask}.jsonl"
            write_prompts(demo_instances(subtask), "sap", prompts[subtask])
        rows = []
        with open_endpoint(spec, model_file=str(model_file), log_path=work / "server.log") as endpoint:
            for concurrency in (1, args.concurrency):
                generation = {
                    "concurrency": concurrency,
                    "timeout_s": 600,
                    "retries": 0,
                    "max_new_tokens": dict.fromkeys(SUBTASK_KEYS, args.max_tokens),
                    "cache_dir": str(work / f"cache{concurrency}"),
                }
                settings = GenerationSettings.from_config(default_config({"generation": generation}))
                out = work / f"out{concurrency}"
                files = [PromptFile.read(prompts[s], out / "sap" / f"{s}.jsonl") for s in SUBTASK_KEYS]
                engines = EngineOptions(settings.client, settings.seed, endpoint=endpoint)
                start = time.perf_counter()
                summary = generate_model(spec, files, settings, engines)
                seconds = time.perf_counter() - start
                tokens = sum(r["completion_tokens"] or 0 for p in out.rglob("*.jsonl") for r in read_jsonl(p))
                rows.append((concurrency, summary["sent"], tokens, seconds))

    print(f"model: {MODEL}, {rows[0][1]} requests (demo instances, sap), max {args.max_tokens} new tokens")
    print(f"{'concurrency':>11} {'requests':>9} {'tokens':>7} {'seconds':>8} {'tokens/s':>9} {'requests/s':>11}")
    for concurrency, sent, tokens, seconds in rows:
        print(
            f"{concurrency:>11} {sent:>9} {tokens:>7} {seconds:>8.1f} {tokens / seconds:>9.1f} {sent / seconds:>11.2f}"
        )
    base, other = rows[0], rows[1]
    print(f"tokens/s ratio (concurrency {other[0]} / 1): {(other[2] / other[3]) / (base[2] / base[3]):.2f}x")


if __name__ == "__main__":
    main()
