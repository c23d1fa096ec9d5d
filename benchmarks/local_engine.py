"""How close the laptop main job's engine jobs run to the machine's limit, and where the rest of their time goes.

    python benchmarks/local_engine.py [--cores 1] [--flash-attn off] [--concurrency N] [--once] [--keep DIR]

1. The main job's three engine jobs run one after the other through the workflow itself (Snakemake, the laptop
   profile, a job's run summary as target) in a fresh folder, so nothing is cached: ``generate`` (Table 2's
   answers), ``rubric_judge`` (the local model judging Levels I-III) and ``study`` (the studies' answers, then
   their verdicts, on one engine). ``--cores 1`` pins the whole run, server included, to one core: a slower
   machine. ``--flash-attn off`` turns the registry's ``llamacpp.flash_attn`` off through a registry overlay;
   ``--concurrency`` sets ``generation.concurrency`` (requests the client keeps in flight).
2. Right after each job, its floor is measured: the job's requests, rebuilt by the stages' own request building
   against the filled caches (``h2htalk.plan``) and tokenised with the model's chat template, replayed through
   llama.cpp in this process with the server's settings and nothing else, in the order that evaluates the fewest
   tokens (a token trie: every distinct prefix once, each request's new prompt tokens in one evaluation as a
   one-slot server must, its answer's tokens one at a time). Measured, not fitted: a prompt's few new tokens
   evaluate at half the rate of a 512-token batch, and this machine's rates drift by a fifth and more over
   minutes, so a floor measured minutes away from its job says little. Then (unless ``--once``) the job runs
   again, its own command with what it cached moved aside, and its floor is measured again: that second run
   is set against the mean of the floors just before and just after it.
3. After the jobs, the machine's rates the way llama-bench measures them at a context depth (``-d``): pp512 and
   tg128 after 0, 1,024, 2,048 and 4,096 tokens of context, fitted per token as a + b * depth; the fitted floor
   prices the trie's tokens and the decode tokens at their depths with them (every prompt token at pp512's rate:
   below the replay).
4. Per job: the wall time (Snakemake's benchmark file) against both floors; where it went, from the server's
   log: llama.cpp's prompt evaluation, its decoding, the rest of llama.cpp's time per request (sampling), and
   what lies outside it (start-up, HTTP, the server's and the client's Python, reading and writing files).

Nothing is asserted; docs/performance.md quotes its figures.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
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
from h2htalk.llm.calls import ResponseCache, cache_file
from h2htalk.llm.engines.measure import in_process_rates
from h2htalk.plan import calls as plan_sessions
from h2htalk.plan.chain import plan_calls
from h2htalk.stages.table import STAGES

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [ROOT / "config" / "config.yaml", ROOT / "config" / "local.yaml"]
DEPTHS = (0, 1024, 2048, 4096)
# the rules of the main job that run the local model, and the plan's stages whose requests each sends
JOBS = {"generate": ("generate",), "rubric_judge": ("rubric_judge",), "study": ("study.answers", "study.judge")}
JOB_TARGETS = {"generate": "generation_run", "rubric_judge": "judge_run", "study": "study_judge_run"}
SUBCOMMANDS = {"generate": "generate", "rubric_judge": "rubric-judge", "study": "study"}
CACHES = {"generate": ("generation",), "rubric_judge": ("rubric_judge",), "study": ("generation", "study_judge")}
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


def machine_costs(model_file: Path, threads: int, flash_attn: bool) -> tuple[Costs, list[tuple[int, float, float]]]:
    """pp512 and tg128 after each of ``DEPTHS`` tokens of context (as ``llama-bench -d``), fitted per token."""
    rates = in_process_rates(model_file, threads, flash_attn, DEPTHS)
    prompt_points = [(depth + 256, 1 / pp) for depth, pp, _ in rates]
    decode_points = [(depth + 64, 1 / tg) for depth, _, tg in rates]
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


@dataclass(frozen=True)
class Step:
    """One request in the order that evaluates the fewest tokens: what stays in the engine from the request before,
    the prompt tokens it evaluates, the answer tokens it decodes one at a time."""

    sequence: list[int]  # the prompt's tokens, then the answer's
    kept: int  # the prefix the engine still holds from the request before
    prompt_length: int
    decodes: int  # single-token evaluations: the answer's tokens

    @property
    def evaluated(self) -> range:
        return range(self.kept, self.prompt_length)

    @property
    def decoded(self) -> range:
        return range(self.prompt_length, self.prompt_length + self.decodes)


def fewest_steps(requests: list[tuple[list[int], list[int], int]], n_ctx: int) -> list[Step]:
    """The requests (prompt tokens, answer tokens, single-token evaluations) as the fewest evaluations any one-slot
    engine needs: sorted, so each shares with the one before the longest prefix any earlier one shares (a token
    trie, every distinct prefix evaluated once). A request's decoded answer is in the engine too, and a
    conversation's next turn begins with it. At least the prompt's last token is evaluated: its logits give the
    answer's first token."""
    steps, previous = [], []
    for prompt, answer, decodes in sorted(requests):
        filler = answer or prompt[-1:]  # a re-tokenised answer can be shorter than what the server decoded
        sequence = (prompt + (filler * (decodes // len(filler) + 1))[:decodes])[: n_ctx - 1]
        prompt_length = min(len(prompt), len(sequence))
        common = 0
        while common < min(len(sequence), len(previous)) and sequence[common] == previous[common]:
            common += 1
        step = Step(sequence, min(common, prompt_length - 1), prompt_length, len(sequence) - prompt_length)
        steps.append(step)
        previous = sequence[: step.prompt_length + step.decodes]
    return steps


def replay_seconds(model_file: Path, settings: dict[str, Any], steps: list[Step]) -> tuple[float, float]:
    """(prompt s, decode s) of ``steps`` through llama.cpp in this process, with the server's settings and nothing
    else: each request's new prompt tokens in one evaluation (in chunks of n_batch, as the server), its answer's
    tokens one at a time. The floor of a job, measured in the conditions the job met, minutes after it."""
    from llama_cpp import Llama

    threads = min(settings["threads"], available_cores())
    llm = Llama(
        str(model_file), n_threads=threads, n_threads_batch=threads, n_ctx=settings["n_ctx"], logits_all=False,
        flash_attn=settings["flash_attn"], verbose=False,
    )  # fmt: skip
    llm.eval(steps[0].sequence[:16])  # warm up
    prompt_s = decode_s = 0.0
    for step in steps:
        llm.n_tokens = step.kept
        start = time.perf_counter()
        llm.eval(step.sequence[step.kept : step.prompt_length])
        middle = time.perf_counter()
        for position in step.decoded:
            llm.eval(step.sequence[position : position + 1])
        prompt_s, decode_s = prompt_s + middle - start, decode_s + time.perf_counter() - middle
    del llm
    return prompt_s, decode_s


def run_engine_job(folder: Path, cores: int, overlay: Path, target: str) -> None:
    """One of the main job's engine jobs (and what it needs) through the laptop profile, in ``folder``."""
    command = [
        sys.executable, "-m", "snakemake", target, "--snakefile", str(ROOT / "Snakefile"), "--profile",
        str(ROOT / "profiles" / "local"), "--directory", str(folder), "--cores", str(cores),
        "--configfiles", *map(str, CONFIGS), str(overlay),
    ]  # fmt: skip
    subprocess.run(command, check=True, cwd=folder)


def rerun_job(folder: Path, job: str, model: str, config: dict[str, Any]) -> float:
    """``job``'s own command again (as Snakemake ran it, with logs of its own), what it cached moved aside first:
    as cold as the first time, and the same requests (the answers do not change between two runs in the same
    order). Its wall seconds."""
    log = max((folder / ".snakemake" / "log").glob("*.snakemake.log"), key=os.path.getmtime)
    line = next(
        line.removeprefix("Shell command: ")
        for line in log.read_text().splitlines()
        if line.startswith("Shell command: ") and f" {SUBCOMMANDS[job]} " in line
    )
    command = shlex.split(line)
    for flag in ("--log", "--server-log"):
        command[command.index(flag) + 1] += ".again"
    for section in CACHES[job]:
        cache = cache_file(folder / config[section]["cache_dir"], model)
        aside = cache.parent / f"before-{job}-again"
        aside.mkdir(exist_ok=True)
        for suffix in ("", "-wal", "-shm", "-journal"):  # the database and its journal files
            if (path := cache.with_name(cache.name + suffix)).exists():
                path.rename(aside / path.name)
    start = time.perf_counter()
    subprocess.run([sys.executable, *command[1:]], check=True, cwd=folder, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


@dataclass(frozen=True)
class Sent:
    """A request the run sent, and its answer."""

    messages: list[dict[str, str]]
    answer: str
    completion_tokens: int
    cut_off: bool  # stopped at its token limit: its last token was sampled, never evaluated

    @property
    def decodes(self) -> int:
        """The single-token evaluations the server made: each answer token (llama_cpp.server evaluates a token to
        sample the next, the end-of-turn token included, which the count leaves out), less one when cut off."""
        return max(0, self.completion_tokens - self.cut_off)


def sent_requests(config: dict[str, Any], folder: Path, job: str) -> list[Sent]:
    """Every distinct request ``job`` sent, rebuilt by the plan, with its answer."""
    by_stage: dict[str, dict[str, list[dict[str, str]]]] = {}
    original = plan_sessions.PlannedCalls.answers

    def recording(self: plan_sessions.PlannedCalls, requests: list[Any]) -> dict[str, dict[str, Any]]:
        for request in requests:
            by_stage.setdefault(self.stage.name, {})[request.key] = request.messages
        return original(self, requests)

    plan_sessions.PlannedCalls.answers = recording  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as scratch:
            plan_calls(STAGES, config, Layout(str(folder / "results"), instances_set(config)), Path(scratch))
    finally:
        plan_sessions.PlannedCalls.answers = original  # type: ignore[method-assign]
    model = config["models"][0]
    sections = {"generate": "generation", "study.answers": "generation", "rubric_judge": "rubric_judge",
                "study.judge": "study_judge"}  # fmt: skip
    pairs = []
    for stage in JOBS[job]:
        requests = by_stage.get(stage, {})
        store = ResponseCache(folder / config[sections[stage]]["cache_dir"], model, read_only=True)
        records = store.get_many(list(requests))
        store.close()
        pairs += [Sent(m, records[k]["response"], records[k].get("completion_tokens") or 0,
                       records[k].get("finish_reason") == "length")
                  for k, m in requests.items() if k in records]  # fmt: skip
    return pairs


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
    parser.add_argument("--concurrency", type=int, help="requests in flight (generation.concurrency; laptop: 2)")
    parser.add_argument("--once", action="store_true", help="each job once and one floor after it (half the time)")
    parser.add_argument("--keep", type=Path, help="run in this (new) folder and keep it")
    args = parser.parse_args()
    if args.cores < available_cores():
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: args.cores]))  # the server inherits it
    folder = args.keep or Path(tempfile.mkdtemp(prefix="h2htalk-engine-"))
    folder.mkdir(parents=True, exist_ok=True)
    config = load_config(CONFIGS)
    model = config["models"][0]
    spec = load_registry(registry_files(config))[model]
    settings = {**spec["llamacpp"], "flash_attn": args.flash_attn == "on"}
    registry = folder / "engine-overlay.yaml"
    registry.write_text(yaml.safe_dump({model: {"llamacpp": settings}}))
    overlay = folder / "bench.yaml"
    tracked = {  # the run is in another folder: the tracked files it reads, by absolute path
        "model_registry": str(ROOT / "config" / "models.yaml"),
        "paper": {"table2": str(ROOT / "config/paper/table2.csv"), "table3": str(ROOT / "config/paper/table3.csv")},
        "plan": {"prices": str(ROOT / "config/prices.yaml"), "throughput": str(ROOT / "config/throughput.yaml")},
    }
    client = {"generation": {"concurrency": args.concurrency}} if args.concurrency else {}
    overlay.write_text(yaml.safe_dump({**tracked, **client, "model_registry_overlays": [str(registry)]}))
    tree = Layout(str(folder / "results"), instances_set(config))
    model_file = Path(tree.path("model_file", model=model))
    rows = []
    start = time.perf_counter()
    for job, target in JOB_TARGETS.items():
        run_engine_job(folder, args.cores, overlay, Layout("results", instances_set(config)).path(target, model=model))
        cwd = Path.cwd()
        os.chdir(folder)  # the config's paths are the run's
        try:
            run_config = load_config([*CONFIGS, overlay])
            pairs = sent_requests(run_config, folder, job)
        finally:
            os.chdir(cwd)
        tokens = chat_tokens(model_file, pairs)
        steps = fewest_steps(
            [(prompt, answer, r.decodes) for (prompt, answer), r in zip(tokens, pairs, strict=True)],
            settings["n_ctx"],
        )
        floors = [replay_seconds(model_file, settings, steps)]  # right after the job
        again = None
        if not args.once:  # the job again, then its floor again: the second run sits between two floors
            again = rerun_job(folder, job, model, run_config)
            floors.append(replay_seconds(model_file, settings, steps))
        rows.append((job, pairs, tokens, steps, floors, again))
    run_wall = time.perf_counter() - start
    threads = min(settings["threads"], available_cores())
    costs, rates = machine_costs(model_file, threads, settings["flash_attn"])
    in_flight = args.concurrency or config["generation"]["concurrency"]
    print(f"model {model}: {threads} thread(s) on {args.cores} core(s), flash attention {args.flash_attn}, "
          f"generation.concurrency {in_flight}; the jobs, what they need and the floors: {run_wall:.0f} s")  # fmt: skip
    print("machine (llama-bench's pp512 / tg128 at a context depth, tokens/s): " + "; ".join(
        f"d{d} {pp:.1f} / {tg:.1f}" for d, pp, tg in rates))  # fmt: skip
    print(
        "\n| job | requests | prompt tokens sent / evaluated / fewest | decode tokens | wall s: first, again "
        "| floor s (prompt + decode): after the first, after again | wall / floor: first, again "
        "| fitted floor s | llama.cpp prompt / decode / rest s | outside llama.cpp s |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for job, pairs, tokens, steps, floors, again in rows:
        fewest = sum(len(step.evaluated) for step in steps)
        fitted = costs.prompt_seconds(fewest, sum(sum(step.evaluated) for step in steps)) + costs.decode_seconds(
            sum(step.decodes for step in steps), sum(sum(step.decoded) for step in steps)
        )
        served = server_requests(tree, job, model)
        prompt_s, decode_s, total_s = (sum(r[i] for r in served) / 1000 for i in (0, 2, 4))
        wall = job_seconds(tree, job, model)
        totals = [sum(floor) for floor in floors]
        walls, ratios = f"{wall:.1f}", f"{wall / totals[0]:.2f}x"
        if again is not None:  # the second run against the mean of the floors before and after it
            walls, ratios = f"{walls}, {again:.1f}", f"{ratios}, {again / (sum(totals) / 2):.2f}x"
        print(
            f"| {job} | {len(pairs)} | {sum(len(p) for p, _ in tokens)} / {sum(r[1] for r in served)} / {fewest} "
            f"| {sum(r.completion_tokens for r in pairs)} | {walls} "
            f"| {', '.join(f'{sum(f):.1f} ({f[0]:.1f} + {f[1]:.1f})' for f in floors)} | {ratios} "
            f"| {fitted:.1f} | {prompt_s:.1f} / {decode_s:.1f} / {total_s - prompt_s - decode_s:.1f} "
            f"| {wall - total_s:.1f} |"
        )
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
