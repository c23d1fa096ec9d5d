"""How long a run's local-model jobs will take on this machine, said before they start.

The machine's llama.cpp rates, as llama-bench names them (pp512: 512 prompt tokens read in one evaluation; tg128:
128 tokens written one at a time; both at no context), are measured in a few seconds with the run's model file
and thread count, then kept in a cache keyed by CPU, threads, flash attention, model and llama.cpp version. The
plan's token counts of each job (``plan.chain``; the prompt tokens a one-slot server evaluates, the answer tokens
it writes) are turned into seconds by the calibration in ``plan.throughput``'s ``cpu`` section: the share of those
rates a job keeps (its requests run at depth, in small evaluations), the answers' length against the plan's
placeholders for the local model, and each job's start.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.hardware import available_cores, cpu_name
from h2htalk.io import write_json_atomic
from h2htalk.layout import Layout
from h2htalk.plan.calls import JobName, PlannedCalls
from h2htalk.plan.chain import plan_calls
from h2htalk.plan.costs import CpuCalibration, load_throughput

PROMPT_PROBE = "周末的计划：早上去博物馆，下午在湖边野餐，晚上回家做饭。"
CONTEXT_TEXT = "我们今天去公园散步，然后喝一杯咖啡，聊聊最近读的书和想去的地方。"


@dataclass(frozen=True)
class Rates:
    pp512: float
    tg128: float
    threads: int
    cached: bool  # read from the cache of an earlier run, not measured now


@dataclass(frozen=True)
class JobEstimate:
    job: str
    prompt_tokens: int  # evaluated by the server
    answer_tokens: float  # expected to be written
    seconds: float


def measure_rates(
    model_file: str | os.PathLike[str], threads: int, flash_attn: bool, depths: Iterable[int] = (0,)
) -> list[tuple[int, float, float]]:
    """(depth, pp512, tg128) after each of ``depths`` tokens of context, as ``llama-bench -d`` measures them."""
    depths = list(depths)
    llm = _llama_cpp().Llama(
        str(model_file), n_threads=threads, n_threads_batch=threads, n_ctx=max(depths) + 1024, logits_all=False,
        flash_attn=flash_attn, verbose=False,
    )  # fmt: skip
    context = llm.tokenize(CONTEXT_TEXT.encode() * (max(depths) // 20 + 1), add_bos=False)[: max(depths)]
    probe = llm.tokenize(PROMPT_PROBE.encode() * 40, add_bos=False)[:512]
    llm.eval(probe[:16])  # warm up
    llm.n_tokens = 0
    rates = []
    for depth in depths:
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
    del llm
    return rates


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except ModuleNotFoundError as exc:
        raise H2HTalkError("measuring llama.cpp's rates needs llama-cpp-python (pip install -e '.[local]')") from exc
    return llama_cpp


def rates_cache_file() -> Path:
    """Where measured rates are kept between runs: the user's cache folder (``XDG_CACHE_HOME``)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "h2htalk" / "llamacpp_rates.json"


def rates_key(model_file: str | os.PathLike[str], threads: int, flash_attn: bool, model: str | None = None) -> str:
    """What the rates depend on: the CPU, the threads, flash attention, the model (its registry name where given,
    since a temporary copy's file name says nothing, else the file's; and the file's size) and llama.cpp."""
    __version__ = _llama_cpp().__version__
    path = Path(model_file)
    model = f"{model or path.name} {path.stat().st_size}"
    return f"{cpu_name()} | {threads} threads | flash_attn {flash_attn} | {model} | llama_cpp {__version__}"


def machine_rates(
    model_file: str | os.PathLike[str], threads: int, flash_attn: bool, cache: Path | None = None,
    model: str | None = None,
) -> Rates:
    """The rates for this setting: from the cache where an earlier run measured them, else measured and kept."""
    cache = cache or rates_cache_file()
    key = rates_key(model_file, threads, flash_attn, model)
    try:
        known = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if key in known:
        return Rates(**{**known[key], "cached": True})
    [(_, pp512, tg128)] = measure_rates(model_file, threads, flash_attn)
    rates = Rates(round(pp512, 1), round(tg128, 1), threads, cached=False)
    write_json_atomic(cache, {**known, key: {k: v for k, v in asdict(rates).items() if k != "cached"}})
    return rates


def model_file_for_rates(spec: dict[str, Any], provisioned: str | os.PathLike[str]) -> tuple[Path, bool]:
    """The model file to measure with: the run's own where it is provisioned already, else a temporary copy
    assembled from the entry's source (the run provisions its own in its first job); True: delete it after."""
    if Path(provisioned).is_file():
        return Path(provisioned), False
    from h2htalk.generation.provision import provision_gguf

    handle, name = tempfile.mkstemp(suffix=".gguf")
    os.close(handle)
    provision_gguf(spec["gguf"], name)
    os.remove(name + ".json")
    return Path(name), True


def estimate_jobs(sessions: Iterable[PlannedCalls], rates: Rates, cpu: CpuCalibration) -> dict[str, JobEstimate]:
    """Seconds of the jobs of each stage, from their llama.cpp sessions with requests to send (the jobs that send
    none are not listed)."""
    totals: dict[str, tuple[float, float, set[JobName]]] = {}
    for calls in sessions:
        tally, step = calls.tally, calls.stage.name.removesuffix(" sample")
        if calls.spec.get("engine") != "llamacpp" or tally.to_send == 0 or calls.job is None:
            continue
        if "judge" in step:
            answers = tally.to_send * cpu.verdict_tokens.get(step, max(cpu.verdict_tokens.values(), default=0.0))
        else:
            answers = tally.completion_tokens_to_send * cpu.answer_length.get(step, 1.0)
        prompt, written, jobs = totals.get(calls.job[0], (0, 0.0, set()))
        totals[calls.job[0]] = (prompt + tally.evaluated_tokens_to_send, written + answers, jobs | {calls.job})
    return {stage: JobEstimate(stage, int(prompt), answers, job_seconds(prompt, answers, rates, cpu, len(jobs)))
            for stage, (prompt, answers, jobs) in totals.items()}  # fmt: skip


def job_seconds(
    prompt_tokens: float, answer_tokens: float, rates: Rates, cpu: CpuCalibration, starts: int = 1
) -> float:
    prompt_s = prompt_tokens / (cpu.prefill_share * rates.pp512)
    return starts * cpu.job_start_s + prompt_s + answer_tokens / (cpu.decode_share * rates.tg128)


def other_jobs_seconds(jobs: int, rates: Rates, cpu: CpuCalibration) -> float:
    """The jobs that start no model (data, scores, tables), scaled by the machine's speed (its pp512)."""
    return jobs * cpu.other_job_s * cpu.reference_pp512 / rates.pp512


def minutes(seconds: float) -> str:
    """Minutes, to a tenth under ten."""
    return f"{seconds / 60:.0f}" if seconds >= 600 else f"{seconds / 60:.1f}"


def estimate_line(
    estimates: Mapping[str, JobEstimate], other_s: float, rates: Rates, models: Mapping[str, Rates] | None = None
) -> str:
    """E.g. "about 9.5 min on this machine: generate ~4.5, study ~2.5, rubric_judge ~1.5, other jobs ~1.0 (...)";
    with several local models (``models``), each one's rates."""
    whole = sum(e.seconds for e in estimates.values()) + other_s
    parts = [f"{job} ~{minutes(e.seconds)}" for job, e in estimates.items()] + [f"other jobs ~{minutes(other_s)}"]
    shown = models if models and len(models) > 1 else {"": rates}
    source = "from the cache of an earlier run" if all(r.cached for r in shown.values()) else "measured now"
    speeds = "; ".join(
        f"{name + ' ' if name else ''}pp512 {r.pp512:.0f}, tg128 {r.tg128:.0f}" for name, r in shown.items()
    )
    return (
        f"Expected time: about {minutes(whole)} min on this machine: {', '.join(parts)} (llama.cpp here: {speeds}"
        f" tokens/s on {rates.threads} thread{'s' * (rates.threads > 1)}, {source})"
    )


@dataclass(frozen=True)
class RunEstimate:
    jobs: dict[str, JobEstimate]
    other_s: float
    rates: Rates  # the first local model's: the machine's speed for the jobs that start none
    models: dict[str, Rates] = field(default_factory=dict)  # each local model's

    @property
    def seconds(self) -> float:
        return sum(e.seconds for e in self.jobs.values()) + self.other_s

    def line(self) -> str:
        return estimate_line(self.jobs, self.other_s, self.rates, self.models)


def estimate_run(
    config: dict[str, Any], results: Layout, registry: Mapping[str, Any], needed: Collection[JobName], other_jobs: int
) -> RunEstimate | None:
    """The expected time of a run on this machine that runs the jobs ``needed`` of the stages that call models, and
    ``other_jobs`` jobs that call none; None when none of them sends a llama.cpp model a request, or the throughput
    table has no ``cpu`` section."""
    cpu = load_throughput(config["plan"]["throughput"]).cpu
    if cpu is None:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        planned = plan_calls(config, results, Path(scratch))
    sessions = [calls for calls in planned.sessions if calls.job in needed and calls.tally.to_send]
    local = sorted({calls.spec["name"] for calls in sessions if calls.spec.get("engine") == "llamacpp"})
    if not local:
        return None
    jobs: dict[str, JobEstimate] = {}
    measured: dict[str, Rates] = {}
    for name in local:
        spec, settings = registry[name], registry[name]["llamacpp"]
        model_file, temporary = model_file_for_rates(spec, results.path("model_file", model=name))
        try:
            threads = min(settings["threads"], available_cores())
            rates = measured[name] = machine_rates(model_file, threads, settings["flash_attn"], model=name)
        finally:
            if temporary:
                model_file.unlink()
        own = [calls for calls in sessions if calls.spec["name"] == name]
        for stage, found in estimate_jobs(own, rates, cpu).items():
            before = jobs.get(stage, JobEstimate(stage, 0, 0.0, 0.0))
            jobs[stage] = JobEstimate(
                stage, before.prompt_tokens + found.prompt_tokens, before.answer_tokens + found.answer_tokens,
                before.seconds + found.seconds,
            )  # fmt: skip
    first = measured[local[0]]  # the other jobs' speed: the machine's, as the first model's rates show it
    return RunEstimate(jobs, other_jobs_seconds(other_jobs, first, cpu), first, measured)


def benchmark_seconds(benchmarks: str | os.PathLike[str], since: float = 0.0) -> dict[str, float]:
    """Seconds of each job (``{rule}/{wildcards}``: its benchmark file under ``benchmarks``) that finished since
    ``since`` (a timestamp; 0: every job)."""
    seconds: dict[str, float] = {}
    for path in sorted(Path(benchmarks).rglob("*.tsv")):
        if path.stat().st_mtime < since:
            continue
        with open(path, encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        seconds[str(path.relative_to(benchmarks).with_suffix(""))] = sum(float(row["s"]) for row in rows)
    return seconds


def job_seconds_since(benchmarks: str | os.PathLike[str], started: float) -> dict[str, float]:
    """Seconds of the jobs of each stage that finished since ``started``, from their benchmark files."""
    by_stage: dict[str, float] = {}
    for job, seconds in benchmark_seconds(benchmarks, started).items():
        stage = job.split("/", 1)[0]
        by_stage[stage] = by_stage.get(stage, 0.0) + seconds
    return by_stage


def actual_line(estimate: RunEstimate, wall_s: float, stage_seconds: Mapping[str, float]) -> str:
    """The run's time beside what was expected, whole and for each estimated job."""
    parts = [
        f"{job} {minutes(stage_seconds.get(job, 0.0))} (expected {minutes(e.seconds)})"
        for job, e in estimate.jobs.items()
    ]
    return (
        f"Took {minutes(wall_s)} min against the expected {minutes(estimate.seconds)}"
        f" ({wall_s / estimate.seconds:.2f}x): {', '.join(parts)}"
    )
