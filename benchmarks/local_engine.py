"""How close the laptop main job's engine jobs run to the machine's limit, and where the rest of their time goes.

    python benchmarks/local_engine.py [--cores 1] [--flash-attn off] [--keep DIR]

1. The main job's three engine jobs run through the workflow itself (Snakemake, the laptop profile, their run
   summaries as targets) in a fresh folder, so nothing is cached: ``generate`` (Table 2's answers),
   ``rubric_judge`` (the local model judging Levels I-III) and ``study`` (the studies' answers, then their
   verdicts, on one engine).
   ``--cores 1`` pins the whole run, server included, to one core: a slower machine. ``--flash-attn off`` turns
   the registry's ``llamacpp.flash_attn`` off through a registry overlay (the server as it was before).
2. The machine's rates, measured after the jobs with the server's threads and flash-attention setting the way
   llama-bench measures them at a context depth (``-d``): pp512 (a 512-token prompt) and tg128 (128 tokens
   decoded one at a time) after 0, 1,024, 2,048 and 4,096 tokens of context. A token's cost grows with the tokens
   before it (attention reads them all), so the time per token is fitted as a + b * depth.
3. Each job's requests, rebuilt by the stages' own request building against the filled caches (``h2htalk.plan``)
   and tokenised with the model's chat template; the fewest prompt tokens any engine must evaluate are every
   distinct prefix once (the size of the token trie), each at its depth; the decode tokens are the answers'
   counts, each at its depth.
4. Per job: the floor (the trie's tokens and the decode tokens, each at its depth's time) against the job's wall
   time (Snakemake's benchmark file), beside the floor at depth 0 (pp512/tg128 alone: what this benchmark used
   to compare with); and where the wall time went, from the server's log: llama.cpp's prompt evaluation,
   its decoding, the rest of llama.cpp's time per request (sampling), and what lies outside it (start-up,
   HTTP, the server's and the client's Python, reading and writing files).

Nothing is asserted; the figures go into the README and the issue notes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from h2htalk.config import load_config, load_registry, registry_files
from h2htalk.hardware import available_cores
from h2htalk.layout import Layout, instances_set
from h2htalk.llm.calls import ResponseCache
from h2htalk.plan import calls as plan_sessions
from h2htalk.plan.chain import plan_calls

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [ROOT / "config" / "config.yaml", ROOT / "config" / "local.yaml"]
DEPTHS = (0, 1024, 2048, 4096)
# the rules of the main job that run the local model, and the plan's stages whose requests each sends
JOBS = {"generate": ("generate",), "rubric_judge": ("rubric judge",), "study": ("generate studies", "study judge")}
SERVER_LOGS = {"generate": "generations", "rubric_judge": "judge_samples", "study": "studies"}
PER_REQUEST = re.compile(
    r"prompt eval time =\s+([\d.]+) ms /\s+(\d+) tokens.*?\n\S+\s+eval time =\s+([\d.]+) ms /\s+(\d+) runs.*?\n"
    r"\S+\s+total time =\s+([\d.]+) ms",
)


@dataclass(frozen=True)
class Costs:
    """Seconds per token at a context depth: a + b * depth, for prompt evaluation and for decoding."""

    prompt: tuple[float, float]
    decode: tuple[float, float]

    def prompt_seconds(self, count: int, depth_sum: int) -> float:
        return count * self.prompt[0] + depth_sum * self.prompt[1]

    def decode_seconds(self, count: int, depth_sum: int) -> float:
        return count * self.decode[0] + depth_sum * self.decode[1]

    def at_depth_zero(self) -> Costs:
        return Costs((self.prompt[0], 0.0), (self.decode[0], 0.0))


def machine_costs(model_file: Path, threads: int, flash_attn: bool) -> tuple[Costs, list[tuple[int, float, float]]]:
    """pp512 and tg128 after each of ``DEPTHS`` tokens of context (as ``llama-bench -d``), fitted per token."""
    from llama_cpp import Llama

    llm = Llama(
        str(model_file), n_threads=threads, n_threads_batch=threads, n_ctx=DEPTHS[-1] + 1024, logits_all=False,
        flash_attn=flash_attn, verbose=False,
    )  # fmt: skip
    text = "我们今天去公园散步，然后喝一杯咖啡，聊聊最近读的书和想去的地方。".encode()
    context = (llm.tokenize(text * 400, add_bos=False))[: DEPTHS[-1]]
    probe = llm.tokenize("周末的计划：早上去博物馆，下午在湖边野餐。".encode() * 60, add_bos=False)[:512]
    llm.eval(context[:16])  # warm up
    llm.n_tokens = 0
    rates, prompt_points, decode_points = [], [], []
    for depth in DEPTHS:
        llm.n_tokens = min(llm.n_tokens, depth)
        llm.eval(context[llm.n_tokens : depth])
        start = time.perf_counter()
        llm.eval(probe)
        pp = len(probe) / (time.perf_counter() - start)
        llm.n_tokens = depth
        llm.eval(probe[:1])
        start = time.perf_counter()
        for _ in range(128):
            llm.eval([llm.sample(temp=0.0)])
        tg = 128 / (time.perf_counter() - start)
        llm.n_tokens = depth
        rates.append((depth, pp, tg))
        prompt_points.append((depth + len(probe) / 2, 1 / pp))
        decode_points.append((depth + 64, 1 / tg))
    del llm
    return Costs(_line(prompt_points), _line(decode_points)), rates


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through ``points``."""
    slope, intercept = np.polyfit([x for x, _ in points], [y for _, y in points], 1)
    return float(intercept), float(slope)


def chat_tokens(model_file: Path, sent: list[Sent]) -> list[tuple[list[int], list[int]]]:
    """Each request's prompt as the server sees it (the model's chat template, tokenised) and its answer's tokens."""
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    llm = Llama(str(model_file), vocab_only=True, verbose=False)
    eos = llm.detokenize([llm.token_eos()]).decode()
    formatter = Jinja2ChatFormatter(llm.metadata["tokenizer.chat_template"], eos_token=eos, bos_token="")
    return [
        (llm.tokenize(formatter(messages=r.messages).prompt.encode(), add_bos=False, special=True),
         llm.tokenize(r.answer.encode(), add_bos=False))
        for r in sent
    ]  # fmt: skip


def trie_tokens(requests: list[tuple[list[int], list[int]]]) -> tuple[int, int]:
    """(tokens, sum of their depths) of the fewest prompt tokens a server must evaluate: every distinct prefix of the
    prompts once. A request's answer is in the trie too: the server decoded it, and a conversation's next turn
    begins with it (sorted neighbours share the longest prefix any earlier sequence shares)."""
    count, depths, previous = 0, 0, []
    for sequence, prompt_length in sorted((prompt + answer, len(prompt)) for prompt, answer in requests):
        common = 0
        while common < min(len(sequence), len(previous)) and sequence[common] == previous[common]:
            common += 1
        evaluated = range(common, max(common, prompt_length))
        count += len(evaluated)
        depths += sum(evaluated)
        previous = sequence
    return count, depths


def run_engine_jobs(folder: Path, cores: int, overlay: Path, tree: Layout, model: str) -> None:
    """The main job's engine jobs (and what they need) through the laptop profile, in ``folder``."""
    targets = [tree.path(kind, model=model) for kind in ("generation_run", "judge_run", "study_judge_run")]
    command = [
        sys.executable, "-m", "snakemake", *targets, "--snakefile", str(ROOT / "Snakefile"), "--profile",
        str(ROOT / "profiles" / "local"), "--directory", str(folder), "--cores", str(cores),
        "--configfiles", *map(str, CONFIGS), str(overlay),
    ]  # fmt: skip
    subprocess.run(command, check=True, cwd=folder)


@dataclass(frozen=True)
class Sent:
    """A request the run sent, and its answer."""

    messages: list[dict[str, str]]
    answer: str
    completion_tokens: int


def sent_requests(config: dict[str, Any], folder: Path) -> dict[str, list[Sent]]:
    """Per job, every distinct request the run sent, rebuilt by the plan, with its answer."""
    by_stage: dict[str, dict[str, list[dict[str, str]]]] = {}
    original = plan_sessions.PlannedCalls.answers

    def recording(self: plan_sessions.PlannedCalls, requests: list[Any]) -> dict[str, dict[str, Any]]:
        for request in requests:
            by_stage.setdefault(self.stage.name, {})[request.key] = request.messages
        return original(self, requests)

    plan_sessions.PlannedCalls.answers = recording  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as scratch:
            plan_calls(config, Layout(str(folder / "results"), instances_set(config)), Path(scratch))
    finally:
        plan_sessions.PlannedCalls.answers = original  # type: ignore[method-assign]
    model = config["models"][0]
    sections = {"generate": "generation", "generate studies": "generation", "rubric judge": "rubric_judge",
                "study judge": "study_judge"}  # fmt: skip
    jobs = {}
    for job, stages in JOBS.items():
        pairs = []
        for stage in stages:
            requests = by_stage.get(stage, {})
            store = ResponseCache(folder / config[sections[stage]]["cache_dir"], model, read_only=True)
            records = store.get_many(list(requests))
            store.close()
            pairs += [Sent(m, records[k]["response"], records[k].get("completion_tokens") or 0)
                      for k, m in requests.items() if k in records]  # fmt: skip
        jobs[job] = pairs
    return jobs


def job_seconds(tree: Layout, job: str, model: str) -> float:
    table = Path(tree.path("benchmarks"), job, f"{model}.tsv").read_text().splitlines()
    return float(table[1].split("\t")[0])


def server_requests(tree: Layout, job: str, model: str) -> list[tuple[float, int, float, int, float]]:
    """Per request, llama.cpp's own timings: (prompt ms, prompt tokens evaluated, decode ms, decode runs, total ms)."""
    text = Path(tree.path("logs"), SERVER_LOGS[job], f"{model}.server.log").read_text(errors="replace")
    return [(float(a), int(b), float(c), int(d), float(e)) for a, b, c, d, e in PER_REQUEST.findall(text)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=min(2, available_cores()), help="cores the run is pinned to")
    parser.add_argument("--flash-attn", choices=("on", "off"), default="on")
    parser.add_argument("--keep", type=Path, help="run in this (new) folder and keep it")
    args = parser.parse_args()
    if args.cores < available_cores():
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: args.cores]))  # the server inherits it
    folder = args.keep or Path(tempfile.mkdtemp(prefix="h2htalk-engine-"))
    folder.mkdir(parents=True, exist_ok=True)
    config = load_config(CONFIGS)
    model = config["models"][0]
    spec = load_registry(registry_files(config))[model]
    flash_attn = args.flash_attn == "on"
    registry = folder / "engine-overlay.yaml"
    registry.write_text(yaml.safe_dump({model: {"llamacpp": {**spec["llamacpp"], "flash_attn": flash_attn}}}))
    overlay = folder / "bench.yaml"
    tracked = {  # the run is in another folder: the tracked files it reads, by absolute path
        "model_registry": str(ROOT / "config" / "models.yaml"),
        "paper": {"table2": str(ROOT / "config/paper/table2.csv"), "table3": str(ROOT / "config/paper/table3.csv")},
        "plan": {"prices": str(ROOT / "config/prices.yaml"), "throughput": str(ROOT / "config/throughput.yaml")},
    }
    overlay.write_text(yaml.safe_dump({**tracked, "model_registry_overlays": [str(registry)]}))
    start = time.perf_counter()
    run_engine_jobs(folder, args.cores, overlay, Layout("results", instances_set(config)), model)
    run_wall = time.perf_counter() - start
    os.chdir(folder)  # the config's paths are the run's
    run_config = load_config([*CONFIGS, overlay])
    requests = sent_requests(run_config, folder)
    tree = Layout(str(folder / "results"), instances_set(run_config))
    model_file = Path(tree.path("model_file", model=model))
    threads = min(spec["llamacpp"]["threads"], available_cores())
    costs, rates = machine_costs(model_file, threads, flash_attn)
    print(f"model {model}: {threads} thread(s) on {args.cores} core(s), flash attention {args.flash_attn}; "
          f"engine jobs and what they need: {run_wall:.0f} s")  # fmt: skip
    print("machine (llama-bench's pp512 / tg128 at a context depth, tokens/s): " + "; ".join(
        f"d{d} {pp:.1f} / {tg:.1f}" for d, pp, tg in rates))  # fmt: skip
    print(
        "\n| job | requests | prompt tokens sent / evaluated / fewest | decode tokens | wall s | floor s (prompt + "
        "decode) | wall / floor | floor at depth 0 s | llama.cpp prompt / decode / rest s | outside llama.cpp s |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for job, pairs in requests.items():
        tokens = chat_tokens(model_file, pairs)
        fewest, depth_sum = trie_tokens(tokens)
        decode = sum(r.completion_tokens for r in pairs)
        decode_depths = sum(
            sum(range(len(prompt), len(prompt) + r.completion_tokens))
            for (prompt, _), r in zip(tokens, pairs, strict=True)
        )
        floor_prompt = costs.prompt_seconds(fewest, depth_sum)
        floor_decode = costs.decode_seconds(decode, decode_depths)
        floor = floor_prompt + floor_decode
        flat = costs.at_depth_zero()
        floor_zero = flat.prompt_seconds(fewest, 0) + flat.decode_seconds(decode, 0)
        served = server_requests(tree, job, model)
        prompt_s, decode_s, total_s = (sum(r[i] for r in served) / 1000 for i in (0, 2, 4))
        wall = job_seconds(tree, job, model)
        print(
            f"| {job} | {len(pairs)} | {sum(len(p) for p, _ in tokens)} / {sum(r[1] for r in served)} / {fewest} "
            f"| {decode} "
            f"| {wall:.1f} | {floor:.1f} ({floor_prompt:.1f} + {floor_decode:.1f}) | {wall / floor:.2f}x "
            f"| {floor_zero:.1f} | {prompt_s:.1f} / {decode_s:.1f} / {total_s - prompt_s - decode_s:.1f} "
            f"| {wall - total_s:.1f} |"
        )
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
