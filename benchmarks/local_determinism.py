"""Does the local engine give a prompt the same answer whatever was sent before it? And what would it cost?

    python benchmarks/local_determinism.py --results DIR [--model-file results/models/X.gguf]
        [--ways a,b,c,d1,d2] [--threads N]

The laptop's 66 generation requests (the demo instances of the 11 subtasks in both variants, rendered by the
prompts stage, with the laptop's sampling: greedy, seeded, each subtask's max_new_tokens; config/config.yaml
+ config/local.yaml) go straight to the engine, with no answer cache, in several ways, each against a fresh
llama.cpp server started with the project's own command:

    a   the workflow's order (the generate stage's: requests sharing a prefix next to each other), 1 in flight
    b   a seeded shuffle, 1 in flight
    c   the workflow's order, 2 in flight (the laptop's generation.concurrency)
    d1  the workflow's order, 1 in flight, on a server that evaluates prompts one token at a time (n_ubatch 1)
    d2  the same server, shuffled

Why the order matters: llama_cpp.server keeps the tokens of the request before in its KV cache and evaluates
only the part of a new prompt after the prefix the two share, in micro-batches cut from there; it takes one
request at a time, so a second one in flight only waits. llama.cpp's CPU matrix products give a token
slightly different numbers depending on the micro-batch it is evaluated in (its size and the token's place
in it), so a prompt's numbers depend on where its shared prefix with the request before ended. Greedy
decoding turns a small difference into another token where two candidates are close, and the answer goes
its own way from there. A server that evaluates every prompt token alone (d) leaves no micro-batch to
depend on, at the price of evaluating prompts at the speed of decoding.

Each way's results go to ``DIR/{way}.json`` and its server's log to ``DIR/server-{way}.log``; a way already
there is read, not run again, so ways can run in separate processes (two at once with ``--threads 1`` keep to
two cores) and a run that stopped resumes. ``--threads`` changes the server's thread count (the registry's by
default), which leaves llama.cpp's numbers as they are; one thread avoids the stalls two threads suffer at
every synchronisation on a machine busy with other work. Prints, for each way, its wall time, the server's CPU
time (user + system, from the kernel's accounting of the finished server: the figure to compare on a shared
machine), the prompt tokens the server evaluated (what its prefix reuse did not save) and the tokens
generated; for each pair of ways, how many of the 66 answers differ, in how many the first different token is
among the first ``EARLY_TOKENS``, and the median position of the first different token. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h2htalk.config import load_registry, merge_layers, validate_config
from h2htalk.generation.generate import PromptFile, first_requests, load_jobs
from h2htalk.generation.provision import provision_gguf
from h2htalk.hardware import available_cores
from h2htalk.instances.sources import demo_instances
from h2htalk.llm.calls import prefix_order
from h2htalk.llm.client import ChatClient, ChatRequest, ChatResult, RetryPolicy
from h2htalk.llm.engines import Endpoint, ServeOptions
from h2htalk.llm.engines.llamacpp import LlamaCpp
from h2htalk.prompts.render import write_prompts
from h2htalk.settings import VARIANTS, GenerationSettings
from h2htalk.subtasks import SUBTASK_KEYS

ROOT = Path(__file__).resolve().parents[1]
SHUFFLE_SEED = 20250101
EARLY_TOKENS = 10
# one token at a time, a 2,800-token prompt takes minutes on two busy cores: no request may time out and be
# sent again, which would measure the retry
TIMEOUT_S = 3600.0
EVALUATED = re.compile(r"prompt eval time =\s+[\d.]+ ms /\s+(\d+) tokens")  # the server's log, one line a request


@dataclass(frozen=True)
class Way:
    key: str
    description: str
    shuffled: bool
    concurrency: int
    server_args: tuple[str, ...] = ()


ONE_TOKEN_AT_A_TIME = ("--n_ubatch", "1")
WAYS = {
    way.key: way
    for way in (
        Way("a", "workflow order, 1 in flight", False, 1),
        Way("b", "shuffled, 1 in flight", True, 1),
        Way("c", "workflow order, 2 in flight (the laptop's)", False, 2),
        Way("d1", "n_ubatch 1: workflow order, 1 in flight", False, 1, ONE_TOKEN_AT_A_TIME),
        Way("d2", "n_ubatch 1: shuffled, 1 in flight", True, 1, ONE_TOKEN_AT_A_TIME),
    )
}


def laptop_requests(spec: dict[str, Any], settings: GenerationSettings, work: Path) -> list[ChatRequest]:
    """The generate stage's requests for the laptop's demo prompts, in the order it sends them."""
    files = []
    for variant in VARIANTS:
        for subtask in SUBTASK_KEYS:
            prompts = work / "prompts" / variant / f"{subtask}.jsonl"
            write_prompts(demo_instances(subtask), variant, prompts)
            files.append(PromptFile(variant, subtask, prompts, work / "out" / variant / f"{subtask}.jsonl"))
    requests = [request for job in load_jobs(spec, files, settings) for request in first_requests(spec, job)]
    return sorted(requests, key=prefix_order)


class TunedLlamaCpp(LlamaCpp):
    """The project's llama.cpp engine (its command, key, start and stop), with ``server_args`` added."""

    def __init__(self, server_args: tuple[str, ...]) -> None:
        self.server_args = server_args

    def command(self, spec: dict[str, Any], port: int, options: ServeOptions) -> list[str]:
        return [*super().command(spec, port, options), *self.server_args]


@contextlib.contextmanager
def fresh_server(spec: dict[str, Any], model_file: Path, server_args: tuple[str, ...], log: Path) -> Iterator[Endpoint]:
    """A fresh server of the project's llama.cpp engine, ``server_args`` added to its command."""
    with TunedLlamaCpp(server_args).endpoint(spec, ServeOptions(str(model_file), log)) as endpoint:
        yield endpoint


async def send(endpoint: Endpoint, requests: list[ChatRequest], concurrency: int) -> list[ChatResult]:
    chat = ChatClient(
        endpoint.base_url,
        endpoint.model,
        api_key=endpoint.api_key,
        concurrency=concurrency,
        timeout_s=TIMEOUT_S,
        retry=RetryPolicy(max_retries=2, backoff_base_s=1.0, backoff_max_s=10.0),
    )
    results: list[ChatResult] = []
    try:
        await chat.run(requests, results.append)
    finally:
        await chat.close()
    return results


def run_way(way: Way, spec: dict[str, Any], model_file: Path, requests: list[ChatRequest], log: Path) -> dict:
    """Send every request the way ``way`` says to a fresh server; its answers (by request key) and costs."""
    order = list(requests)
    if way.shuffled:
        random.Random(SHUFFLE_SEED).shuffle(order)
    before = os.times()
    with fresh_server(spec, model_file, way.server_args, log) as endpoint:
        start = time.perf_counter()
        results = asyncio.run(send(endpoint, order, way.concurrency))
        wall = time.perf_counter() - start
    after = os.times()  # the server has exited and been waited for: its CPU time is in the children's
    failed = [result.item_id for result in results if result.failure]
    if failed:
        print(f"  way {way.key}: {len(failed)} requests failed: {', '.join(failed[:5])}")
    return {
        "threads": spec["llamacpp"]["threads"],
        "wall_s": wall,
        "server_cpu_s": after.children_user - before.children_user + after.children_system - before.children_system,
        "prompt_tokens_evaluated": sum(int(n) for n in EVALUATED.findall(log.read_text(errors="replace"))),
        "answers": {r.key: {"id": r.item_id, "response": r.response, "tokens": r.completion_tokens} for r in results},
    }


def first_difference(a: list[int], b: list[int]) -> int:
    """Index of the first token where two answers part (the shorter one's length when one extends the other)."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def report(
    ways: list[Way], outcomes: dict[str, dict], requests: list[ChatRequest], tokenize: Callable[[str], list[int]]
) -> None:
    print("| way | how | threads | wall time | server CPU time | prompt tokens evaluated | tokens generated |")
    print("|---|---|---|---|---|---|---|")
    for way in ways:
        outcome = outcomes[way.key]
        generated = sum(answer["tokens"] or 0 for answer in outcome["answers"].values())
        print(
            f"| {way.key} | {way.description} | {outcome['threads']} | {outcome['wall_s']:.0f} s"
            f" | {outcome['server_cpu_s']:.0f} s | {outcome['prompt_tokens_evaluated']} | {generated} |"
        )
    print(f"\n| ways | answers that differ | first difference within {EARLY_TOKENS} tokens | median token of it |")
    print("|---|---|---|---|")
    for first, second in itertools.combinations(ways, 2):
        one, other = outcomes[first.key]["answers"], outcomes[second.key]["answers"]
        parted = [
            first_difference(tokenize(one[r.key]["response"]), tokenize(other[r.key]["response"]))
            for r in requests
            if one[r.key]["response"] != other[r.key]["response"]
        ]
        median = f"{statistics.median(parted):.0f}" if parted else "-"
        early = sum(index < EARLY_TOKENS for index in parted)
        print(f"| {first.key} / {second.key} | {len(parted)} of {len(requests)} | {early} | {median} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True, help="folder of each way's results ({way}.json)")
    parser.add_argument("--model-file", type=Path, help="the GGUF file (provisioned into a temp folder if absent)")
    parser.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, of {', '.join(WAYS)}")
    parser.add_argument("--threads", type=int, help="the server's threads (default: the registry's)")
    args = parser.parse_args()
    ways = [WAYS[key] for key in args.ways.split(",")]
    config = validate_config(merge_layers([ROOT / "config" / "config.yaml", ROOT / "config" / "local.yaml"], []))
    name = config["models"][0]
    spec = load_registry(ROOT / config["model_registry"])[name]
    threads = min(args.threads or spec["llamacpp"]["threads"], available_cores())
    spec = {**spec, "llamacpp": {**spec["llamacpp"], "threads": threads}}
    settings = GenerationSettings.from_config(config)
    args.results.mkdir(parents=True, exist_ok=True)
    outcomes = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        requests = laptop_requests(spec, settings, work)
        model_file = args.model_file
        if model_file is None or not model_file.exists():
            model_file = work / "model.gguf"
            provision_gguf(spec["gguf"], model_file)
        for way in ways:
            saved = args.results / f"{way.key}.json"
            if not saved.exists():
                print(f"way {way.key}: {way.description}, {threads} threads ...", flush=True)
                log = args.results / f"server-{way.key}.log"
                log.unlink(missing_ok=True)  # a stopped run's log would add its prompt tokens
                outcome = run_way(way, spec, model_file, requests, log)
                saved.write_text(json.dumps(outcome, ensure_ascii=False, indent=1), encoding="utf-8")
            outcomes[way.key] = json.loads(saved.read_text(encoding="utf-8"))
        from llama_cpp import Llama

        vocabulary = Llama(str(model_file), vocab_only=True, verbose=False)
    print(f"\nmodel {name}, {len(requests)} requests, a fresh server per way\n")
    report(ways, outcomes, requests, lambda text: vocabulary.tokenize(text.encode(), add_bos=False, special=True))


if __name__ == "__main__":
    main()
