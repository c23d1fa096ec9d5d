"""How long a run's local-model jobs will take on this machine, said before they start, and what they took.

The machine's llama.cpp rates (pp512 and tg128, ``plan.rates``: measured on the run's own server, or kept from an
earlier measurement or a finished run at about the load the machine has now) turn the plan's token counts of each
job (``plan.chain``; the prompt tokens a one-slot server evaluates, the answer tokens it writes) into seconds by the
calibration in ``plan.throughput``'s ``cpu`` section: the share of those rates a job keeps (its requests run at
depth, in small evaluations), the answers' length against the plan's placeholders for the local model, and each
job's start. Where other processes keep the cores busy the estimate is a range: as they are, and if they stop. A
finished run keeps the rates its jobs ran at (``learn_from_run``), which the next estimate uses. The jobs that start
no model run one Python thread each: they take the share of one core the threads ready to run leave them
(``hardware.one_core_share``), not llama.cpp's rates: ``other_job_s`` each, and the plan's and the scores' work
that grows with the run's requests and answers (``plan.work``).

The workflow says the estimate when its jobs start (``say_expected_time``), and when it ends the time taken beside
it, keeping the rates (``SaidTime.say_taken``).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from h2htalk.hardware import (
    CpuSnapshot,
    available_cores,
    cpu_snapshot,
    one_core_share,
    other_processes_cores,
    other_processes_load,
    runnable_others,
)
from h2htalk.io import read_csv
from h2htalk.layout import Layout
from h2htalk.llm.engines import engine_of
from h2htalk.plan.calls import JobName, PlannedCalls
from h2htalk.plan.chain import plan_calls
from h2htalk.plan.costs import CpuCalibration, load_throughput
from h2htalk.plan.rates import (
    LOAD_TOLERANCE,
    MACHINE,
    Record,
    from_run,
    keep,
    learn,
    measured,
    nearest,
    rates_cache_file,
    rates_key,
    read_cache,
    server_rates,
    write_cache,
)
from h2htalk.plan.work import planned_requests, work_seconds
from h2htalk.stages.steps import unsampled

OTHER_JOBS = "other jobs"  # the job kind of the jobs that start no model
LOAD_SHOWN = 0.25  # cores other processes keep busy from which the estimate says so and gives a range
BUSIEST_SHARE = 0.75  # the range's "if they stop" end assumes at most this share of the cores was taken
LEARNED_FROM_S = 20.0  # a job kind's llama.cpp seconds in a run below which its rates are too noisy to keep
# the other jobs' seconds are all theirs (no server start taken off), so their sum is kept from this many jobs on,
# however few seconds it is
OTHER_JOBS_LEARNED_FROM = 5


@dataclass(frozen=True)
class Rates:
    pp512: float
    tg128: float
    threads: int
    found: str = "measured now"  # how they were found, as the estimate says it
    record: Record | None = None  # the cache's record they are, where they are one


@dataclass(frozen=True)
class JobEstimate:
    job: str
    prompt_tokens: int  # evaluated by the server
    answer_tokens: float  # expected to be written
    seconds: float
    starts: int = 1  # jobs, each starting its server


def rates_of(record: Record, threads: int, source: str) -> Rates:
    return Rates(record.pp512, record.tg128, threads, source, record)


def model_file_for_rates(spec: dict[str, Any], provisioned: str | os.PathLike[str]) -> tuple[Path, bool]:
    """The model file to measure with: the run's own where it is provisioned already, else a temporary copy
    assembled from the entry's source (the run provisions its own in its first job); True: delete it after."""
    if Path(provisioned).is_file():
        return Path(provisioned), False
    from h2htalk.generation.provision import provision_gguf

    handle, name = tempfile.mkstemp(suffix=".gguf")
    os.close(handle)
    provision_gguf(engine_of(spec).model_file_source(spec), name)
    os.remove(name + ".json")
    return Path(name), True


def machine_record(
    spec: dict[str, Any],
    provisioned: str | os.PathLike[str],
    records: list[Record],
    load: float | None,
    runnable: float | None = None,
) -> tuple[Record, str]:
    """The machine's rates for ``spec`` at ``load`` (and ``runnable`` threads of others waiting to run): the cache's
    record nearest in load, else measured now on the run's server; and where they come from, in words."""
    known = nearest(records, MACHINE, load, runnable)
    if known is not None:
        how = "measured" if known.source == "measured" else "from a finished run"
        return known, f"{how} {known.made[:10]}, at a load like now's"
    model_file, temporary = model_file_for_rates(spec, provisioned)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            pp512, tg128, trials = server_rates(spec, model_file, log_path=Path(scratch) / "server.log")
    finally:
        if temporary:
            model_file.unlink()
    return measured(pp512, tg128, load, runnable), f"measured now on the run's server, best of {trials} trials"


def estimate_jobs(
    sessions: Iterable[PlannedCalls], rates: Rates, cpu: CpuCalibration, learned: Mapping[str, Rates] | None = None
) -> dict[str, JobEstimate]:
    """Seconds of the jobs of each stage, from their sessions of an engine timed on this CPU (llama.cpp's) with
    requests to send (the jobs that send none are not listed), at ``rates``, or at a stage's own where an earlier
    run ``learned`` them."""
    totals: dict[str, tuple[float, float, set[JobName]]] = {}
    for calls in sessions:
        tally, step = calls.tally, unsampled(calls.step.name)
        if not engine_of(calls.spec).timed_on_cpu or tally.to_send == 0 or calls.job is None:
            continue
        if calls.step.declared.makes == "verdicts":
            answers = tally.to_send * cpu.verdict_tokens.get(step, max(cpu.verdict_tokens.values(), default=0.0))
        else:
            answers = tally.completion_tokens_to_send * cpu.answer_length.get(step, 1.0)
        prompt, written, jobs = totals.get(calls.job[0], (0, 0.0, set()))
        totals[calls.job[0]] = (prompt + tally.evaluated_tokens_to_send, written + answers, jobs | {calls.job})
    learned = learned or {}
    return {
        stage: JobEstimate(
            stage, int(prompt), answers, job_seconds(prompt, answers, learned.get(stage, rates), cpu, len(jobs)),
            len(jobs),
        )
        for stage, (prompt, answers, jobs) in totals.items()
    }  # fmt: skip


def job_seconds(
    prompt_tokens: float, answer_tokens: float, rates: Rates | Record, cpu: CpuCalibration, starts: int = 1
) -> float:
    prompt_s = prompt_tokens / (cpu.prefill_share * rates.pp512)
    return starts * cpu.job_start_s + prompt_s + answer_tokens / (cpu.decode_share * rates.tg128)


def other_jobs_seconds(
    jobs: int, share: float, cpu: CpuCalibration, learned: Rates | Record | None = None, work_s: float = 0.0
) -> float:
    """The jobs that start no model (data, scores, tables): one Python thread each, ``other_job_s`` on a core of its
    own and their ``work_s`` that grows with the run (``plan.work``), at the ``share`` of one core it can expect; not
    at llama.cpp's rates, which other processes cut far more (a multi-threaded server waits for its slowest thread).
    Where a finished run ``learned`` how fast they went against that, its pp512 over ``reference_pp512`` says it."""
    speed = learned.pp512 / cpu.reference_pp512 if learned is not None else 1.0
    return (jobs * cpu.other_job_s + work_s) / (share * speed)


def other_jobs_rates(cpu: CpuCalibration) -> Rates:
    """The other jobs' speed as the calibration has it, in the rates a finished run's are kept as (no tg128)."""
    return Rates(cpu.reference_pp512, 0.0, 1, "the calibration")


def rate(tokens_per_s: float) -> str:
    """Tokens a second, to a tenth under ten (a busy machine's tg128 runs at a few)."""
    return f"{tokens_per_s:.0f}" if tokens_per_s >= 10 else f"{tokens_per_s:.1f}"


def minutes(seconds: float) -> str:
    """Minutes, to a tenth under ten."""
    return f"{seconds / 60:.0f}" if seconds >= 600 else f"{seconds / 60:.1f}"


@dataclass(frozen=True)
class ModelRates:
    key: str  # the rates cache's key of its setting (plan.rates.rates_key)
    machine: Rates
    learned: dict[str, Rates] = field(default_factory=dict)  # job kind -> the rates its jobs ran at in a finished run
    parts: dict[str, JobEstimate] = field(default_factory=dict)  # its share of each stage's jobs


@dataclass(frozen=True)
class RunEstimate:
    jobs: dict[str, JobEstimate]
    other_s: float
    rates: Rates  # the first local model's: the machine's speed for the jobs that start none
    models: dict[str, ModelRates] = field(default_factory=dict)  # each local model's
    load: float | None = None  # cores other processes kept busy when it was made
    cores: int = 1
    cpu: CpuCalibration | None = None  # the calibration it was made with
    other_jobs: int = 0
    cache: Path | None = None
    quiet_s: float | None = None  # the time at the rates kept from a quiet machine, where every model has them
    share: float = 1.0  # of one core, a one-thread job's (the other jobs') when it was made
    runnable: float | None = None  # threads of other processes waiting to run when it was made
    other_work_s: float = 0.0  # the other jobs' work that grows with the run, on a core of its own (plan.work)

    @property
    def seconds(self) -> float:
        return sum(e.seconds for e in self.jobs.values()) + self.other_s

    @property
    def loaded(self) -> bool:
        return self.load is not None and self.load >= LOAD_SHOWN

    def free_seconds(self) -> float:
        """The time if the other processes stopped: at the rates kept from a quiet machine where the cache has them,
        else the rates scaled by the cores they leave over the cores there are (as if the server's speed were shared
        out by cores; at most ``BUSIEST_SHARE`` of them counted taken); the jobs that start no model a core each."""
        if self.quiet_s is not None:
            return self.quiet_s
        taken = min(self.load or 0.0, BUSIEST_SHARE * self.cores)
        factor = self.cores / (self.cores - taken)
        starts = sum(e.starts for e in self.jobs.values()) * (self.cpu.job_start_s if self.cpu else 0.0)
        return starts + (self.seconds - self.other_s - starts) / factor + self.other_s * self.share

    def expected(self) -> str:
        """The whole time in minutes, a range where other processes keep the cores busy (one value where both ends
        round alike)."""
        low, high = minutes(self.free_seconds()), minutes(self.seconds)
        return f"{low}-{high}" if self.loaded and low != high else high

    def line(self) -> str:
        """E.g. "about 9.5 min on this machine: generate ~4.5, study ~2.5, rubric_judge ~1.5, other jobs ~1.0 (...)";
        with several local models, each one's rates; under load, a range and why."""
        parts = [f"{job} ~{minutes(e.seconds)}" for job, e in self.jobs.items()]
        parts.append(f"{OTHER_JOBS} ~{minutes(self.other_s)}")
        several = len(self.models) > 1
        speeds = "; ".join(
            f"{name + ' ' if several else ''}pp512 {rate(m.machine.pp512)}, tg128 {rate(m.machine.tg128)}"
            + (f" ({m.machine.found})" if several else "")
            for name, m in (self.models.items() or {"": ModelRates("", self.rates)}.items())
        )
        threads = f"{self.rates.threads} thread{'s' * (self.rates.threads > 1)}"
        source = "" if several else f", {self.rates.found}"
        learned = sorted({kind for m in self.models.values() for kind in m.learned})
        kept = f"; {', '.join(learned)} at the rates their jobs ran at in a finished run" if learned else ""
        said = self.expected()
        head = said if said != minutes(self.seconds) else f"about {said}"  # a range, or about one value
        line = (
            f"Expected time: {head} min on this machine: {', '.join(parts)}"
            f" (llama.cpp here: {speeds} tokens/s on {threads}{source}{kept})"
        )
        if self.loaded:
            line += (
                f". Other processes are using about {self.load:.1f} of {self.cores} cores: {minutes(self.seconds)}"
                f" min assumes they go on doing so, {minutes(self.free_seconds())} that they stop"
            )
            if self.quiet_s is not None:
                line += " (at the rates kept from a run or measurement on the quiet machine)"
            if self.share < 1:
                line += "; more threads wait to run than there are cores: a job that starts no model gets about"
                line += f" {self.share:.2f} of one"
        return line


def cache_line(path: Path | None = None) -> str:
    path = path or rates_cache_file()
    return f"Rates kept in {path} (`h2htalk rates` shows them, `h2htalk rates --reset` forgets them)."


def quiet_records(records: Iterable[Record]) -> list[Record]:
    """The records made while other processes kept under ``LOAD_SHOWN`` cores busy: the machine when they stop."""
    return [r for r in records if r.load is not None and r.load < LOAD_SHOWN]


def kinds_rates(
    records: list[Record], kinds: Iterable[str], load: float | None, threads: int, runnable: float | None = None
) -> dict[str, Rates]:
    """The rates each job kind ran at in a finished run at about ``load`` (and ``runnable``), where the cache has
    them."""
    return {
        kind: rates_of(found, threads, "a finished run's jobs")
        for kind in kinds
        if (found := nearest(records, kind, load, runnable)) is not None
    }


def estimate_run(
    stages: Sequence[Any],
    config: dict[str, Any],
    results: Layout,
    registry: Mapping[str, Any],
    needed: Collection[JobName],
    other_jobs: Collection[JobName],
    cache: Path | None = None,
) -> RunEstimate | None:
    """The expected time of a run on this machine that runs the jobs ``needed`` of the ``stages`` that call models, and
    the ``other_jobs`` that call none (``other_job_s`` each, and the work of theirs that grows with the run's
    requests, ``plan.work``); None when none of them sends a request to a model whose engine is timed on
    this CPU (``Engine.timed_on_cpu``: llama.cpp's), or the throughput table has no ``cpu`` section. Rates measured
    now are kept in ``cache`` (default: the user's)."""  # fmt: skip
    cpu = load_throughput(config["plan"]["throughput"], stages).cpu
    if cpu is None:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        planned = plan_calls(stages, config, results, Path(scratch))
    sessions = [calls for calls in planned.sessions if calls.job in needed and calls.tally.to_send]
    requests = planned_requests(planned.sessions)
    work_s = sum(work_seconds(job, requests, cpu, stages) for job in other_jobs)
    local = sorted({calls.spec["name"] for calls in sessions if engine_of(calls.spec).timed_on_cpu})
    if not local:
        return None
    cache = cache or rates_cache_file()
    known = read_cache(cache)
    load = other_processes_load()
    runnable = runnable_others()
    share = one_core_share(runnable, load, available_cores())
    jobs: dict[str, JobEstimate] = {}
    models: dict[str, ModelRates] = {}
    quiet_s: float | None = 0.0
    for name in local:
        spec = registry[name]
        provisioned = results.path("model_file", model=name)
        key = rates_key(spec, provisioned)
        records = known.get(key, [])
        record, source = machine_record(spec, provisioned, records, load, runnable)
        if record not in records:
            known[key] = keep(records, record)
            write_cache(cache, known)
        threads = min(engine_of(spec).threads(spec), available_cores())
        machine = rates_of(record, threads, source)
        own = [calls for calls in sessions if calls.spec["name"] == name]
        kinds = {calls.job[0] for calls in own} | {OTHER_JOBS}
        learned = kinds_rates(records, kinds - {OTHER_JOBS}, load, threads, runnable)
        # the other jobs' speed is kept against the share of a core they had: it holds however many threads wait
        learned |= kinds_rates(records, {OTHER_JOBS}, load, threads)
        parts = estimate_jobs(own, machine, cpu, learned)
        models[name] = ModelRates(key, machine, learned, parts)
        quiet = quiet_records(records)
        if quiet_s is not None and load is not None and load >= LOAD_SHOWN and (calm := nearest(quiet, MACHINE, 0.0)):
            calm_learned = kinds_rates(quiet, kinds, 0.0, threads)
            calm_rates = rates_of(calm, threads, "kept from a quiet machine")
            quiet_s += sum(e.seconds for e in estimate_jobs(own, calm_rates, cpu, calm_learned).values())
            if name == local[0]:
                quiet_s += other_jobs_seconds(len(other_jobs), 1.0, cpu, calm_learned.get(OTHER_JOBS), work_s)
        else:
            quiet_s = None
        for stage, found in parts.items():
            before = jobs.get(stage, JobEstimate(stage, 0, 0.0, 0.0, 0))
            jobs[stage] = JobEstimate(
                stage, before.prompt_tokens + found.prompt_tokens, before.answer_tokens + found.answer_tokens,
                before.seconds + found.seconds, before.starts + found.starts,
            )  # fmt: skip
    first = models[local[0]]  # the cache the other jobs' learned speed is kept in: the first model's
    other_s = other_jobs_seconds(len(other_jobs), share, cpu, first.learned.get(OTHER_JOBS), work_s)
    return RunEstimate(
        jobs, other_s, first.machine, models, load, available_cores(), cpu, len(other_jobs), cache, quiet_s, share,
        runnable, work_s,
    )  # fmt: skip


def benchmark_seconds(benchmarks: str | os.PathLike[str], since: float = 0.0) -> dict[str, float]:
    """Seconds of each job (``{rule}/{wildcards}``: its benchmark file under ``benchmarks``) that finished since
    ``since`` (a timestamp; 0: every job)."""
    seconds: dict[str, float] = {}
    for path in sorted(Path(benchmarks).rglob("*.tsv")):
        if path.stat().st_mtime < since:
            continue
        rows = read_csv(path, delimiter="\t")
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
        f"Took {minutes(wall_s)} min against the expected {estimate.expected()}"
        f" ({wall_s / estimate.seconds:.2f}x): {', '.join(parts)}"
    )


def _learn_kind(
    records: list[Record],
    kind: str,
    seconds_at: Callable[[Rates | Record], float],
    fixed_s: float,
    used: Rates,
    actual_s: float,
    load: float | None,
    runnable: float | None,
    least_s: float = LEARNED_FROM_S,
) -> tuple[list[Record], str | None]:
    """``plan.rates.learn`` for one job kind: its jobs took ``actual_s`` where ``seconds_at(used)`` was expected,
    ``fixed_s`` of it their starts; None where less than ``least_s`` of their time was theirs to tell."""  # fmt: skip
    expected, actual = seconds_at(used) - fixed_s, actual_s - fixed_s
    if actual < least_s or actual <= 0 or expected <= 0:
        return records, None
    factor = expected / actual
    found = from_run(kind, used.pp512 * factor, used.tg128 * factor, load, runnable)
    return learn(records, found, seconds_at, actual_s, used.record)


def learn_from_run(estimate: RunEstimate, stage_seconds: Mapping[str, float], load: float | None) -> dict[str, str]:
    """Keep in the cache the rates this run's jobs ran at, per job kind and for the machine as a whole, made at the
    run's ``load`` and, where that stayed as it was, the threads waiting to run at its start (``plan.rates.learn``: a
    record they disagree with by more than 25 % is replaced). Returns what happened to each kind: "added", "replaced"
    or "kept"."""
    cpu = estimate.cpu
    if cpu is None:
        return {}
    cache = estimate.cache or rates_cache_file()
    known = read_cache(cache)
    said: dict[str, str | None] = {}
    # The threads waiting at the estimate describe the run only where its load stayed what it was then: four busy
    # processes that stop once the estimate is said leave a quiet run, whose records must not read as crowded.
    steady = load is None or estimate.load is None or abs(load - estimate.load) <= LOAD_TOLERANCE
    waiting = estimate.runnable if steady else None
    share = estimate.share if steady else one_core_share(None, load, estimate.cores)  # the other jobs' over the run

    def at(parts: list[JobEstimate]) -> Callable[[Rates | Record], float]:
        return lambda r: sum(job_seconds(p.prompt_tokens, p.answer_tokens, r, cpu, p.starts) for p in parts)

    model_s = 0.0
    for model in estimate.models.values():
        records = known.get(model.key, [])
        shares = {  # this model's share of each stage's time, by its share of the expected time
            stage: stage_seconds[stage] * part.seconds / estimate.jobs[stage].seconds
            for stage, part in model.parts.items()
            if stage in stage_seconds and estimate.jobs[stage].seconds > 0
        }
        model_s += sum(shares.values())
        for stage, actual in shares.items():
            part, used = model.parts[stage], model.learned.get(stage, model.machine)
            fixed = part.starts * cpu.job_start_s
            records, said[stage] = _learn_kind(records, stage, at([part]), fixed, used, actual, load, waiting)
        whole = [model.parts[stage] for stage in shares]
        fixed = sum(p.starts for p in whole) * cpu.job_start_s
        records, said[MACHINE] = _learn_kind(
            records, MACHINE, at(whole), fixed, model.machine, sum(shares.values()), load, waiting
        )
        known[model.key] = records
    first = next(iter(estimate.models.values()), None)
    if first is not None and estimate.other_jobs >= OTHER_JOBS_LEARNED_FROM:
        used = first.learned.get(OTHER_JOBS, other_jobs_rates(cpu))
        other_s = sum(stage_seconds.values()) - model_s
        seconds_at = lambda r: other_jobs_seconds(  # noqa: E731
            estimate.other_jobs, share, cpu, r, estimate.other_work_s
        )
        known[first.key], said[OTHER_JOBS] = _learn_kind(
            known.get(first.key, []), OTHER_JOBS, seconds_at, 0.0, used, other_s, load, waiting, least_s=0.0
        )
    kept = {kind: outcome for kind, outcome in said.items() if outcome is not None}
    if kept:
        write_cache(cache, known)
    return kept


def learned_line(said: Mapping[str, str], load: float | None, cores: int, cache: Path | None = None) -> str:
    """What a finished run kept of its rates for the next estimate."""
    how = {"added": "new", "replaced": "replaced: off by more than 25 %", "kept": "kept: within 25 %"}
    groups = [f"{', '.join(k for k, v in said.items() if v == outcome)} ({words})" for outcome, words in how.items()
              if outcome in said.values()]  # fmt: skip
    during = "" if load is None else f" (other processes used about {load:.1f} of {cores} cores)"
    where = cache or rates_cache_file()
    return f"Rates this run's jobs ran at{during}, for the next estimate: {'; '.join(groups)}; in {where}."


@dataclass(frozen=True)
class SaidTime:
    """A run's expected time as said before its first job: the estimate, the machine's CPU time then (the load other
    processes put on the run is read at its end) and when it was said (the run's time taken counts from then)."""

    estimate: RunEstimate
    cpu: CpuSnapshot
    at: float

    def say_taken(self, benchmarks: str | os.PathLike[str], started: float, log: logging.Logger) -> None:
        """Say in ``log`` the time the run took beside it, each estimated job's from its benchmark files of jobs
        that finished since ``started``, and keep the rates the jobs ran at for the next estimate
        (``learn_from_run``): what was kept, or why nothing was (keeping rates never fails a finished run)."""
        seconds = job_seconds_since(benchmarks, started)
        log.info(actual_line(self.estimate, time.time() - self.at, seconds))
        load = other_processes_cores(self.cpu, cpu_snapshot())
        try:
            said = learn_from_run(self.estimate, seconds, load)
        except Exception as exc:  # keeping rates never fails a finished run
            log.warning(f"The rates this run's jobs ran at were not kept: {exc}")
            return
        if said:
            log.info(learned_line(said, load, self.estimate.cores, self.estimate.cache))


def say_expected_time(estimate: Callable[[], RunEstimate | None], log: logging.Logger) -> SaidTime | None:
    """Say in ``log``, before the first job starts, how long the run will take (what ``estimate`` makes: the run's
    ``estimate_run``) and where the rates are kept; None where there is no estimate, and a warning where making one
    failed: an estimate never stops a run."""
    cpu = cpu_snapshot()  # the run's start: the load other processes put on the run is read at its end
    try:
        made = estimate()
    except Exception as exc:  # an estimate never stops a run
        log.warning(f"No time estimate: {exc}")
        return None
    if made is None:
        return None
    log.info(made.line())
    log.info(cache_line(made.cache))
    return SaidTime(made, cpu, time.time())
