"""The time a run's local-model jobs are expected to take: the one-slot server's prompt tokens, the estimate's
arithmetic, the load other processes put on the cores, the rates cache (records per load, replaced by what a
finished run's jobs ran at) and the closing line."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from h2htalk.config import load_config, load_registry, registry_files
from h2htalk.errors import ConfigError
from h2htalk.hardware import cpu_snapshot
from h2htalk.layout import Layout, instances_set
from h2htalk.llm.client import ChatRequest
from h2htalk.llm.engines import Engine
from h2htalk.llm.tokens import MESSAGE_OVERHEAD, prompt_tokens, text_tokens
from h2htalk.plan.calls import JobName, Placeholder, PlannedCalls, PlannedStep, job_name, shared_with
from h2htalk.plan.costs import load_throughput
from h2htalk.plan.rates import MACHINE, Record, rates_cache_file, rates_key, read_cache, write_cache
from h2htalk.plan.timing import (
    OTHER_JOBS,
    CpuCalibration,
    ModelRates,
    Rates,
    RunEstimate,
    SaidTime,
    actual_line,
    cache_line,
    estimate_jobs,
    estimate_run,
    job_seconds_since,
    kinds_rates,
    learn_from_run,
    learned_line,
    minutes,
    say_expected_time,
)
from h2htalk.plan.work import work_seconds
from h2htalk.stages.spec import Scope
from h2htalk.stages.steps import declared_steps
from h2htalk.stages.table import STAGES
from h2htalk.stages.workflow import Rules

from .conftest import REPO_ROOT
from .test_engines import registered
from .test_stages import snakemake_job

PERSONA = "你是小林，一位温和的朋友，记得对方说过的每一件事。" * 4
CPU = CpuCalibration(
    prefill_share=0.5, decode_share=0.25, job_start_s=10.0, answer_length={"generate": 2.0},
    verdict_tokens={"study.judge": 30.0, "rubric_judge": 30.0, "judge_ladder": 30.0},
    other_job_s=1.0, reference_pp512=200.0,
)  # fmt: skip
RATES = Rates(pp512=100.0, tg128=20.0, threads=2, found="measured now")
STEPS = declared_steps(STAGES)


def message(role: str, content: str) -> dict[str, str]:
    return {"role": role, "content": content}


def test_a_one_slot_server_reads_only_what_follows_what_it_kept_of_the_request_before():
    before = [message("system", PERSONA), message("user", "今天我们去了海边，风很大。你还记得吗？")]
    again = [message("system", PERSONA), message("user", "今天我们去了海边，然后吃了晚饭。")]
    persona = text_tokens(PERSONA) + MESSAGE_OVERHEAD
    assert shared_with(before, again) == persona + text_tokens("今天我们去了海边，")
    assert shared_with(before, before[:1]) == persona  # a shorter request: all of it is kept
    assert shared_with([], again) == 0  # a server's first request
    assert shared_with([message("user", PERSONA)], again) == 0  # the same text under another role: other tokens
    assert shared_with([message("system", "别的设定"), *before[1:]], again) == 0  # the first message differs

    step = PlannedStep("generate", "m", False, lambda spec, request: Placeholder("好的", 5), STEPS["generate"])
    calls = PlannedCalls({"name": "m", "engine": "llamacpp"}, "/nonexistent", step, None)  # no cache: no client
    requests = [ChatRequest(key, key, messages) for key, messages in (("a", before), ("b", again), ("b", again))]
    calls.answers(requests[:2])
    calls.answers(requests[2:])  # the same request again: asked once, counted once
    whole = prompt_tokens(before) + prompt_tokens(again)
    assert calls.tally.requests == 2
    assert calls.tally.evaluated_tokens_to_send == whole - shared_with(before, again)
    assert calls.tally.evaluated_tokens_to_send < calls.tally.prefill_tokens_to_send  # token-level, not by message


def test_requests_are_counted_in_the_order_the_client_sends_them():
    """The client sends a batch sorted so that requests sharing a beginning follow each other; the plan counts a
    one-slot server's evaluations in that order, whatever order the stage built them in."""
    first = [message("system", PERSONA), message("user", "我们去海边吧。")]
    other = [message("system", PERSONA), message("user", "明天下雨怎么办？")]
    longer = [*first, message("assistant", "好呀，几点出发？"), message("user", "早上八点。")]
    step = PlannedStep("generate", "m", False, lambda spec, request: Placeholder("好的", 5), STEPS["generate"])
    calls = PlannedCalls({"name": "m", "engine": "llamacpp"}, "/nonexistent", step, None)
    calls.answers([ChatRequest(k, k, m) for k, m in (("a", first), ("b", other), ("c", longer))])
    persona = text_tokens(PERSONA) + MESSAGE_OVERHEAD
    sent = sorted([first, other, longer], key=lambda m: [x["content"] for x in m])
    assert [m[1]["content"] for m in sent] == ["我们去海边吧。", "我们去海边吧。", "明天下雨怎么办？"]
    expected = prompt_tokens(first) + prompt_tokens(longer) - shared_with(first, longer)
    expected += prompt_tokens(other) - persona
    assert calls.tally.evaluated_tokens_to_send == expected
    as_built = prompt_tokens(first) + prompt_tokens(other) + prompt_tokens(longer) - 2 * persona  # each after another
    assert expected < as_built


def planned_session(
    job: str, step: str, engine: str, to_send: int, evaluated: int, completion: int, model: str = "m"
) -> PlannedCalls:
    step = PlannedStep(step, model, False, lambda spec, request: Placeholder("", 0), STEPS[step])
    calls = PlannedCalls({"name": model, "engine": engine}, "/nonexistent", step, None)
    calls.job = job_name(job, {"model": model})
    calls.tally.requests = to_send
    calls.tally.evaluated_tokens_to_send = evaluated
    calls.tally.completion_tokens_to_send = completion
    return calls


def test_each_job_is_expected_to_take_its_tokens_at_the_machines_rates_as_calibrated():
    sessions = [
        planned_session("generate", "generate", "llamacpp", 10, 5_000, 1_000),
        planned_session("study", "study.answers", "llamacpp", 4, 1_000, 200),
        planned_session("study", "study.judge", "llamacpp", 4, 2_000, 1_024),  # the same job: one start
        planned_session("rubric_judge", "rubric_judge.sample", "llamacpp", 3, 500, 768),
        planned_session("rubric_judge", "rubric_judge", "llamacpp", 0, 0, 0),  # all cached: nothing to send
        planned_session("judge_ladder", "judge_ladder", "llamacpp", 2, 100, 512),
        planned_session("judge_ladder", "judge_ladder", "llamacpp", 2, 100, 512, model="n"),  # another job
        planned_session("generate", "generate", "api", 10, 5_000, 1_000),  # not on this machine
    ]
    jobs = estimate_jobs(sessions, RATES, CPU)
    assert set(jobs) == {"generate", "study", "rubric_judge", "judge_ladder"}
    # prompt at 0.5 x 100 tokens/s, answers at 0.25 x 20: generate's answers twice the plan's, a verdict 30 tokens
    assert jobs["generate"].seconds == pytest.approx(10 + 5_000 / 50 + 2_000 / 5)
    assert jobs["study"].prompt_tokens == 3_000
    assert jobs["study"].answer_tokens == pytest.approx(200 + 4 * 30)  # no factor for the studies: 1
    assert jobs["study"].seconds == pytest.approx(10 + 3_000 / 50 + 320 / 5)
    assert jobs["rubric_judge"].seconds == pytest.approx(10 + 500 / 50 + 90 / 5)
    assert jobs["judge_ladder"].seconds == pytest.approx(2 * (10 + 100 / 50 + 60 / 5))  # two jobs, two starts
    faster = estimate_jobs(sessions, Rates(200.0, 40.0, 2), CPU)
    assert faster["generate"].seconds - 10 == pytest.approx((jobs["generate"].seconds - 10) / 2)


def test_a_kept_record_of_a_stage_times_every_step_of_its_jobs(tmp_path):
    """The cache keeps rates per job kind, the stage's name, which every step of its jobs shares: a user's records
    read as they were when the steps inside a stage were named by its parts."""
    path = tmp_path / "llamacpp_rates.json"
    write_cache(path, {"AMD EPYC | 2 threads": [record("study", 50.0, 10.0, 0.1)]})
    learned = kinds_rates(read_cache(path)["AMD EPYC | 2 threads"], {"study"}, 0.1, 2)
    sessions = [planned_session("study", "study.answers", "llamacpp", 4, 1_000, 200),
                planned_session("study", "study.judge", "llamacpp", 4, 2_000, 1_024)]  # fmt: skip
    at_machine, at_kept = estimate_jobs(sessions, RATES, CPU), estimate_jobs(sessions, RATES, CPU, learned)
    assert at_kept["study"].seconds - 10 == pytest.approx(2 * (at_machine["study"].seconds - 10))


class TimedHere(Engine):
    """An engine of no shipped name whose server runs on this machine's CPU."""

    name = "timed-here"
    schema: ClassVar[dict[str, Any]] = {"then": {}}
    timed_on_cpu = True


class MeasuredHere(TimedHere):
    """One that measures its rates on this CPU (as llama.cpp's does through the server a job starts)."""

    name = "measured-here"
    measured: ClassVar[list[str]] = []

    def rates_setting(self, spec: dict[str, Any], model_file: Any = None) -> str:
        return f"{spec['name']} at {spec['speed']}"

    def measure_rates(self, spec: dict[str, Any], model_file: Any, log_path: Any = None, *more: Any) -> Any:
        self.measured.append(str(model_file))
        return 60.0 * spec["speed"], 5.0 * spec["speed"], 2


def test_the_rates_of_an_engine_timed_on_this_cpu_are_what_it_measures_kept_under_what_it_says_they_depend_on(tmp_path):
    """The rates are the engine's to measure and to key, whatever its name: the plan asks by capability."""
    from h2htalk.hardware import cpu_name
    from h2htalk.llm.engines import EngineError
    from h2htalk.plan.timing import machine_record

    spec = {"name": "m", "engine": "measured-here", "speed": 2}
    model_file = tmp_path / "m.gguf"
    model_file.write_bytes(b"weights")
    with registered(MeasuredHere()) as engine:
        assert rates_key(spec) == f"{cpu_name()} | m at 2" != rates_key({**spec, "speed": 3})
        record, source = machine_record(spec, model_file, [], load=0.1)
        assert (record.pp512, record.tg128, record.load) == (120.0, 10.0, 0.1) and engine.measured == [str(model_file)]
        assert source == "measured now on the run's server, best of 2 trials"
    with registered(TimedHere()), pytest.raises(EngineError, match="engine timed-here measures no rates on this CPU"):
        rates_key({"name": "m", "engine": "timed-here"})


def test_the_jobs_timed_are_those_of_an_engine_on_this_cpu_whatever_its_name():
    with registered(TimedHere()):
        jobs = estimate_jobs([planned_session("generate", "generate", "timed-here", 10, 5_000, 1_000)], RATES, CPU)
    assert jobs["generate"].seconds == pytest.approx(10 + 5_000 / 50 + 2_000 / 5)  # as llama.cpp's own


def test_the_closing_line_sets_each_jobs_time_beside_what_was_expected(tmp_path):
    jobs = estimate_jobs([planned_session("generate", "generate", "llamacpp", 10, 5_000, 1_000)], RATES, CPU)
    estimate = RunEstimate(jobs, other_s=60.0, rates=RATES)
    assert estimate.seconds == pytest.approx(510 + 60)
    line = estimate.line()
    assert line.startswith("Expected time: about 9.5 min on this machine: generate ~8.5, other jobs ~1.0")
    assert "pp512 100, tg128 20 tokens/s on 2 threads, measured now" in line
    large = Rates(50.0, 10.0, 2, "measured 2026-12-01, at a load like now's")
    two = RunEstimate(jobs, 60.0, RATES, {"small": ModelRates("a", RATES), "large": ModelRates("b", large)})
    # each local model's rates: a judge panel's larger model runs at its own speed
    speeds = (
        "small pp512 100, tg128 20 (measured now); large pp512 50, tg128 10 (measured 2026-12-01, at a load like"
        " now's) tokens/s on 2 threads"
    )
    assert f"(llama.cpp here: {speeds})" in two.line()
    started = time.time() - 5
    for name, seconds in (("generate/m/sap", 300.5), ("generate/m/nosap", 200.0), ("score/a", 7.0)):
        path = tmp_path / f"{name}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:00\t1\n", encoding="utf-8")
    old = tmp_path / "generate" / "earlier.tsv"
    old.write_text("s\n999\n", encoding="utf-8")
    os.utime(old, (started - 100, started - 100))  # a job of an earlier run: not this run's time
    seconds = job_seconds_since(tmp_path, started)
    assert seconds == {"generate": pytest.approx(500.5), "score": pytest.approx(7.0)}
    closing = actual_line(estimate, 600.0, seconds)
    assert closing == "Took 10 min against the expected 9.5 (1.05x): generate 8.3 (expected 8.5)"


def said_in(caplog: pytest.LogCaptureFixture, log: logging.Logger) -> list[tuple[int, str]]:
    return [(record.levelno, record.getMessage()) for record in caplog.records if record.name == log.name]


def test_a_finished_run_says_its_time_beside_the_time_said_and_keeps_the_rates_its_jobs_ran_at(tmp_path, caplog):
    log = logging.getLogger("h2htalk.test.taken")
    caplog.set_level(logging.INFO, logger=log.name)
    jobs = estimate_jobs([planned_session("generate", "generate", "llamacpp", 10, 5_000, 1_000)], RATES, CPU)
    cache = tmp_path / "rates.json"
    models = {"m": ModelRates("AMD EPYC | 2 threads | m", RATES, parts=jobs)}
    estimate = RunEstimate(jobs, 60.0, RATES, models, cores=2, cpu=CPU, cache=cache)
    benchmarks = tmp_path / "benchmarks"
    (benchmarks / "generate").mkdir(parents=True)
    (benchmarks / "generate" / "m.tsv").write_text("s\th:m:s\tmax_rss\n500.0\t0:08:20\t1\n", encoding="utf-8")
    said = SaidTime(estimate, cpu_snapshot(), time.time() - 600.0)  # said ten minutes ago
    said.say_taken(benchmarks, started=time.time() - 700.0, log=log)
    (took_level, took), (kept_level, kept) = said_in(caplog, log)
    assert took_level == kept_level == logging.INFO
    assert took == "Took 10 min against the expected 9.5 (1.05x): generate 8.3 (expected 8.5)"
    during = r"( \(other processes used about \d+\.\d of 2 cores\))?"  # the load, where /proc/stat tells it
    kinds = rf"generate, machine \(new\); in {re.escape(str(cache))}\."
    assert re.fullmatch(rf"Rates this run's jobs ran at{during}, for the next estimate: {kinds}", kept), kept
    assert [r.kind for r in read_cache(cache)["AMD EPYC | 2 threads | m"]] == ["generate", MACHINE]

    caplog.clear()  # a cache that cannot be written: the run still ends, and says so
    unwritable = SaidTime(RunEstimate(jobs, 60.0, RATES, models, cores=2, cpu=CPU, cache=cache / "rates.json"),
                          cpu_snapshot(), time.time())  # fmt: skip
    unwritable.say_taken(benchmarks, started=time.time() - 700.0, log=log)
    (_, took), (level, warning) = said_in(caplog, log)
    assert took.startswith("Took 0.0 min against the expected 9.5")
    assert level == logging.WARNING and warning.startswith("The rates this run's jobs ran at were not kept: ")


def test_rates_are_kept_per_cpu_server_setting_model_and_llama_cpp(tmp_path, monkeypatch):
    pytest.importorskip("llama_cpp")
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    spec = {
        "name": "qwen", "engine": "llamacpp", "llamacpp": {"threads": 1, "flash_attn": True, "n_ctx": 4096},
        "gguf": {"sha256": "ab"},
    }  # fmt: skip
    key = rates_key(spec)
    assert "GOMP_SPINCOUNT 1000" in key  # the engine's spin count: the server's, not libgomp's default
    for section, setting, value in (("llamacpp", "flash_attn", False), ("llamacpp", "n_ctx", 8192),
                                    ("gguf", "sha256", "cd")):  # fmt: skip
        assert rates_key({**spec, section: {**spec[section], setting: value}}) != key, setting
    monkeypatch.setenv("GOMP_SPINCOUNT", "0")  # the user's own, which the server gets
    assert rates_key(spec) != key
    model = tmp_path / "model.gguf"  # an entry without a checksum: known by its provisioned file's size
    model.write_bytes(b"x" * 10)
    unpinned = {**spec, "gguf": {}}
    assert rates_key(unpinned, model) != rates_key({**spec, "name": "other", "gguf": {}}, model)
    model.write_bytes(b"x" * 11)
    assert rates_key(unpinned, model) != rates_key(unpinned, tmp_path / "absent.gguf")


def record(kind: str, pp512: float, tg128: float, load: float | None, made: str = "2026-12-01T00:00:00+00:00"):
    return Record(kind, pp512, tg128, load, 2, made, "measured" if kind == MACHINE else "run")


def test_a_record_is_used_at_about_the_load_it_was_made_at_and_replaced_by_one_made_at_the_same():
    from h2htalk.plan.rates import keep, nearest

    quiet, busy = record(MACHINE, 170.0, 48.0, 0.1), record(MACHINE, 90.0, 20.0, 1.2, "2026-12-01T01:00:00+00:00")
    records = [quiet, busy, record("generate", 150.0, 40.0, 0.2)]
    assert nearest(records, MACHINE, 0.0) == quiet and nearest(records, MACHINE, 1.0) == busy
    assert nearest(records, MACHINE, 0.65) is None  # over half a core from both: a state of the machine not seen
    assert nearest(records, "study", 0.1) is None
    assert nearest(records, MACHINE, None) == busy  # the load not known: the newest of any
    later = record(MACHINE, 160.0, 45.0, 0.3, made="2026-12-02T00:00:00+00:00")
    assert keep(records, later) == [busy, records[2], later]  # in place of the quiet one
    many = records
    for day in range(2, 9):  # one kind at ever other loads: the oldest go
        many = keep(many, record(MACHINE, 100.0, 30.0, 0.6 * day, made=f"2026-12-0{day}T00:00:00+00:00"))
    assert len([r for r in many if r.kind == MACHINE]) == 4 and records[2] in many


def test_past_the_cores_there_are_a_record_is_used_where_about_as_many_threads_wait_to_run_as_when_it_was_made():
    """Both cores read busy under a load of 4 and of 38; the threads waiting to run tell the two apart."""
    from dataclasses import replace

    from h2htalk.plan.rates import from_run, keep, nearest

    four = replace(record(MACHINE, 40.0, 8.0, 2.0), runnable=4.0)
    many = replace(record(MACHINE, 5.0, 1.0, 2.0, "2026-12-01T01:00:00+00:00"), runnable=38.0)
    records = [four, many]
    assert nearest(records, MACHINE, 2.0, 4.5) == four and nearest(records, MACHINE, 2.0, 30.0) == many
    assert nearest(records, MACHINE, 2.0, 12.0) is None  # a share of a core over 1.5x off both: not seen
    assert nearest(records, MACHINE, 2.0) == many  # not known now: by load, the newest
    quiet = replace(record(MACHINE, 170.0, 48.0, 0.1), runnable=0.0)
    assert quiet.near(0.3, 1.0)  # one thread beside it on two cores: a core each, as with none
    assert keep(records, replace(many, pp512=6.0, made="2026-12-02T00:00:00+00:00"))[0] == four  # the load-38 one goes
    assert from_run("generate", 50.0, 9.0, 2.0, runnable=3.964).runnable == 3.96  # kept with the record
    assert "2.0 of 2 cores, 38.0 threads of theirs ready to run)" in many.describe()


def test_a_finished_run_replaces_a_record_that_puts_its_time_more_than_a_quarter_off():
    from h2htalk.plan.rates import learn

    before = record("generate", 100.0, 20.0, 0.2)
    found = record("generate", 60.0, 12.0, 0.3)
    seconds_at = lambda r: 6_000 / r.pp512  # noqa: E731 - the time the rates put the run's jobs at
    assert learn([before], found, seconds_at, actual_s=72.0) == ([before], "kept")  # 60 against 72: 17 % off
    assert learn([before], found, seconds_at, actual_s=100.0) == ([found], "replaced")  # 60 against 100: 40 %
    assert learn([before], record("generate", 60.0, 12.0, 1.5), seconds_at, 100.0)[1] == "added"  # another load
    assert learn([], found, seconds_at, 100.0) == ([found], "added")


def test_a_record_measured_at_a_moments_load_the_run_did_not_keep_to_is_replaced_by_what_the_run_achieved():
    """Measured while four busy processes held both cores, which stopped once the estimate was said: the run's own
    load (1.0) is not that record's (2.0), yet it is the record the estimate used and the run shows it wrong."""
    from h2htalk.plan.rates import learn

    heavy, quiet = record(MACHINE, 30.0, 2.5, 2.0), record(MACHINE, 170.0, 48.0, 0.1)
    found = record(MACHINE, 95.0, 21.0, 1.0, made="2026-12-02T00:00:00+00:00")
    seconds_at = lambda r: 9_500 / r.pp512  # noqa: E731
    assert learn([quiet, heavy], found, seconds_at, actual_s=100.0, used=heavy) == ([quiet, found], "replaced")
    assert learn([quiet, heavy], found, seconds_at, 100.0) == ([quiet, heavy, found], "added")  # nearest in load
    near = record(MACHINE, 100.0, 22.0, 2.0)  # within a quarter of the run's time: it stays, as it was
    assert learn([near], found, seconds_at, 100.0, used=near) == ([near], "kept")
    # a record of another kind, or one no longer in the cache, is not the one to judge
    assert learn([heavy], record("generate", 95.0, 21.0, 1.0), seconds_at, 100.0, used=heavy)[1] == "added"
    assert learn([quiet], found, seconds_at, 100.0, used=heavy) == ([quiet, found], "added")


def test_the_rates_are_the_best_of_a_few_trials_within_a_time_budget():
    from h2htalk.llm.engines.measure import best_of_trials

    trials = iter([(90.0, 30.0), (160.0, 20.0), (120.0, 45.0), (500.0, 99.0)])
    now = [0.0]

    def trial():  # each takes 8 s
        now[0] += 8.0
        return next(trials)

    assert best_of_trials(trial, most=3, least=2, budget_s=20.0, clock=lambda: now[0]) == (160.0, 45.0, 3)
    trials, now[0] = iter([(50.0, 3.0), (40.0, 2.5), (60.0, 4.0)]), 0.0
    slow = lambda: (now.__setitem__(0, now[0] + 60.0), next(trials))[1]  # noqa: E731 - a busy machine: 60 s each
    assert best_of_trials(slow, most=3, least=2, budget_s=20.0, clock=lambda: now[0]) == (50.0, 3.0, 2)


def test_the_cores_other_processes_keep_busy_are_the_busy_time_less_this_process_and_its_children():
    from h2htalk.hardware import CpuSnapshot, cpu_snapshot, other_processes_cores

    before = CpuSnapshot(at=100.0, busy_s=50.0, own_s=5.0)
    assert other_processes_cores(before, CpuSnapshot(110.0, 66.0, 9.0)) == pytest.approx(1.2)  # (16 - 4) / 10
    assert other_processes_cores(before, CpuSnapshot(110.0, 66.0, 9.0), own_running_s=6.0) == pytest.approx(0.6)
    assert other_processes_cores(before, CpuSnapshot(110.0, 52.0, 9.0)) == 0.0  # never below none
    assert other_processes_cores(before, CpuSnapshot(110.0, None, 9.0)) is None  # /proc/stat not readable
    if not Path("/proc/stat").is_file():
        return
    start = cpu_snapshot()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # this process busy: its time is in the cores' busy time, and its own
        pass
    end = cpu_snapshot()
    tick = 1 / os.sysconf("SC_CLK_TCK")  # os.times and /proc/stat count whole clock ticks: each snapshot rounds down
    assert end.own_s - start.own_s >= 0.3 - 2 * tick
    assert end.busy_s - start.busy_s >= 0.9 * (end.own_s - start.own_s)


def test_where_other_processes_hold_the_cores_the_estimate_says_so_and_gives_a_range():
    jobs = estimate_jobs([planned_session("generate", "generate", "llamacpp", 10, 5_000, 1_000)], RATES, CPU)
    quiet = RunEstimate(jobs, 60.0, RATES, load=0.1, cores=2, cpu=CPU)
    assert quiet.line().startswith("Expected time: about 9.5 min on this machine")
    assert "other processes" not in quiet.line().lower()
    busy = RunEstimate(jobs, 60.0, RATES, load=1.6, cores=2, cpu=CPU, share=0.25)
    # as they are: 570 s; if they stop, llama.cpp's share of the cores is all of them: 1.5 of 2 counted taken (the
    # most that is), so 4x the rates: 10 s to start + 500 / 4; the other jobs, at a quarter of a core, get a whole one
    assert busy.free_seconds() == pytest.approx(10 + 125 + 15)
    assert busy.line().startswith("Expected time: 2.5-9.5 min on this machine: generate ~8.5, other jobs ~1.0")
    assert busy.line().endswith(
        "Other processes are using about 1.6 of 2 cores: 9.5 min assumes they go on doing so, 2.5 that they stop;"
        " more threads wait to run than there are cores: a job that starts no model gets about 0.25 of one"
    )
    assert "(llama.cpp here: pp512 37, tg128 2.3 tokens/s" in RunEstimate(jobs, 60.0, Rates(37.4, 2.3, 2)).line()
    half = RunEstimate(jobs, 60.0, RATES, load=1.0, cores=2, cpu=CPU, share=0.5)
    assert "a job that starts no model" not in RunEstimate(jobs, 60.0, RATES, load=1.6, cores=2, cpu=CPU).line()
    assert half.free_seconds() == pytest.approx(10 + 250 + 30)
    assert actual_line(half, 300.0, {"generate": 240.0}).startswith("Took 5.0 min against the expected 4.8-9.5 (0.53x)")
    alike = RunEstimate(jobs, 60.0, RATES, load=1.6, cores=2, cpu=CPU, quiet_s=568.0)  # 9.47 min if they stop
    assert alike.line().startswith("Expected time: about 9.5 min on this machine")  # not "9.5-9.5"
    assert "9.5 min assumes they go on doing so, 9.5 that they stop" in alike.line()
    assert actual_line(alike, 600.0, {}).startswith("Took 10 min against the expected 9.5 (1.05x)")


def test_the_rates_command_shows_the_cache_and_forgets_it(tmp_path, monkeypatch, capsys):
    from h2htalk.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = tmp_path / "h2htalk" / "llamacpp_rates.json"
    assert main(["rates"]) == 0
    assert capsys.readouterr().out == f"{path}: no rates kept\n"
    write_cache(path, {"AMD EPYC | 2 threads": [record(MACHINE, 171.5, 48.2, 0.1), record("generate", 140, 31, 0.2)]})
    assert main(["rates"]) == 0
    shown = capsys.readouterr().out
    assert f"{path}: rates of 1 settings" in shown and "AMD EPYC | 2 threads" in shown
    assert (
        "machine: pp512 172, tg128 48.2 (measured, 2026-12-01 00:00 UTC, other processes using 0.1 of 2 cores)" in shown
    )
    assert "generate: pp512 140, tg128 31.0 (a finished run's jobs, 2026-12-01 00:00 UTC" in shown
    assert main(["rates", "--reset"]) == 0
    assert capsys.readouterr().out == f"{path}: removed\n" and not path.exists()


def test_a_cache_of_the_earlier_layout_is_read_as_empty(tmp_path):
    """Its rates were measured in-process with libgomp's default spin, slower than the server beside other work."""
    path = tmp_path / "rates.json"
    path.write_text(json.dumps({"AMD EPYC | 2 threads": {"pp512": 37.6, "tg128": 2.3, "threads": 2}}))
    assert read_cache(path) == {}
    path.write_text("{not json")
    assert read_cache(path) == {}


def flat_jobs(count: int) -> list[JobName]:
    """Jobs that start no model and whose work does not grow with the run's: ``other_job_s`` each."""
    return [job_name("instances", {"subtask": f"subtask{n}"}) for n in range(count)]


def laptop_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The laptop default's configuration in ``tmp_path`` (its model file a stand-in), its layout, registry, every
    planned job and the rates cache's key of its local model."""
    pytest.importorskip("llama_cpp")
    shutil.copytree(REPO_ROOT / "config", tmp_path / "config")
    monkeypatch.chdir(tmp_path)
    config = load_config(["config/config.yaml", "config/local.yaml"])
    results = Layout("results", instances_set(config))
    registry = load_registry(registry_files(config))
    local = config["models"][0]
    monkeypatch.setattr("h2htalk.plan.timing.runnable_others", lambda: 0.0)  # no other thread waits for a core
    model_file = Path(results.path("model_file", model=local))
    model_file.parent.mkdir(parents=True)
    model_file.write_bytes(b"gguf")
    run = Scope(config, results).run
    every = {job_name(stage.name, labels) for stage in STAGES if stage.planned for labels in stage.jobs(run)}
    return config, results, registry, every, rates_key(registry[local], model_file)


def test_if_the_other_processes_stop_the_run_takes_what_the_cache_says_of_the_quiet_machine(tmp_path, monkeypatch):
    """Two cores held by others slowed llama.cpp here by five times or more, more than the cores they took say: the
    range's shorter end is the time at the rates kept from a quiet machine where the cache has them."""
    config, results, registry, every, key = laptop_plan(tmp_path, monkeypatch)
    cache = tmp_path / "rates.json"
    busy, quiet = record(MACHINE, 27.0, 15.0, 2.0), record(MACHINE, 163.0, 47.0, 0.0)
    learned = record("generate", 120.0, 40.0, 0.1)  # a finished run's generate, on the quiet machine

    def estimate(load: float, *records: Record):
        write_cache(cache, {key: list(records)})
        monkeypatch.setattr("h2htalk.plan.timing.other_processes_load", lambda: load)
        found = estimate_run(STAGES, config, results, registry, every, other_jobs=flat_jobs(20), cache=cache)
        assert found is not None
        return found

    shared = estimate(2.0, busy)  # no quiet record: the cores' share, at most 3/4 of them taken, so 4x the rates
    assert shared.quiet_s is None and "quiet machine" not in shared.line()
    starts = sum(e.starts for e in shared.jobs.values()) * shared.cpu.job_start_s
    llama_cpp_s = shared.seconds - shared.other_s - starts  # the other jobs had a core each already (none waiting)
    assert shared.free_seconds() == pytest.approx(starts + llama_cpp_s / 4 + shared.other_s)
    loaded = estimate(2.0, busy, quiet, learned)
    calm = estimate(0.0, busy, quiet, learned)
    assert loaded.seconds == pytest.approx(shared.seconds)  # as they are: the busy record, as before
    assert calm.rates.pp512 == 163.0 and "generate" in calm.models[config["models"][0]].learned
    assert loaded.free_seconds() == pytest.approx(calm.seconds)
    assert loaded.free_seconds() < shared.free_seconds()
    assert loaded.line().endswith(
        f"{minutes(calm.seconds)} that they stop (at the rates kept from a run or measurement on the quiet machine)"
    )
    assert estimate(2.0, busy, record(MACHINE, 163.0, 47.0, 0.3)).quiet_s is None  # 0.3 cores busy: not quiet


def test_the_whole_run_is_estimated_from_the_plan_of_the_laptop_default(tmp_path, monkeypatch):
    """The demo plan, cold (nothing cached), with rates from the cache: every local-model job has its time, and a
    machine twice as fast halves the time spent in llama.cpp. A finished run whose jobs ran at half the rates keeps
    them, and the next estimate is twice as long; a run that agrees with it within a quarter changes nothing."""
    config, results, registry, every, key = laptop_plan(tmp_path, monkeypatch)
    local = config["models"][0]
    cpu = load_throughput("config/throughput.yaml", STAGES).cpu
    assert cpu is not None
    cache = tmp_path / "rates.json"

    def estimate(pp512: float | None = None, tg128: float = 0.0):
        if pp512 is not None:  # made where the load was not known: used at any
            write_cache(cache, {key: [record(MACHINE, pp512, tg128, None)]})
        return estimate_run(STAGES, config, results, registry, needed, other_jobs=flat_jobs(20), cache=cache)

    ladders = {job for job in every if job[0] == "judge_ladder"}
    assert {dict(labels)["part"] for _, labels in ladders} == {"rubric", "studies"}
    needed = every - {job for job in ladders if dict(job[1])["part"] == "studies"}  # what the laptop's `all` runs
    slow, fast = estimate(60.0, 12.0), estimate(120.0, 24.0)
    assert slow is not None and fast is not None
    assert slow.rates.found == "measured 2026-12-01, at a load like now's"
    assert set(slow.jobs) == {"generate", "study", "rubric_judge", "judge_ladder"}
    for job, found in slow.jobs.items():
        assert found.prompt_tokens > 0 and found.answer_tokens > 0, job
        assert found.seconds - cpu.job_start_s == pytest.approx(2 * (fast.jobs[job].seconds - cpu.job_start_s))
    assert slow.other_s == fast.other_s == pytest.approx(20 * cpu.other_job_s)  # not at llama.cpp's rates

    # the run's jobs took twice the llama.cpp time expected, the other jobs three times theirs
    taken = {job: 2 * found.seconds - cpu.job_start_s for job, found in fast.jobs.items()}
    taken["score"] = 3 * fast.other_s
    said = learn_from_run(fast, taken, load=None)
    assert said == {**dict.fromkeys(fast.jobs, "added"), MACHINE: "replaced", OTHER_JOBS: "added"}
    assert learned_line(said, 0.2, 2, cache) == (
        f"Rates this run's jobs ran at (other processes used about 0.2 of 2 cores), for the next estimate:"
        f" {', '.join(fast.jobs)}, other jobs (new); machine (replaced: off by more than 25 %); in {cache}."
    )
    kept = read_cache(cache)[key]
    assert [r.pp512 for r in kept if r.kind == MACHINE] == [pytest.approx(60.0, abs=0.1)]
    learned = estimate()
    assert learned is not None and set(learned.models[local].learned) == {*fast.jobs, OTHER_JOBS}
    for job, found in learned.jobs.items():
        assert found.seconds == pytest.approx(taken[job], rel=0.01), job
    assert learned.other_s == pytest.approx(taken["score"], rel=0.01)
    assert "at the rates their jobs ran at in a finished run" in learned.line()
    # a run within a quarter of it keeps what is there
    again = {job: 1.2 * found.seconds for job, found in learned.jobs.items()} | {"score": learned.other_s}
    assert set(learn_from_run(learned, again, load=None).values()) == {"kept"}

    needed |= ladders
    both = estimate(60.0, 12.0)
    assert both is not None and both.jobs["judge_ladder"].prompt_tokens > slow.jobs["judge_ladder"].prompt_tokens
    baselines = {job_name("generate", {"model": name}) for name in config["baselines"]}
    no_local = estimate_run(STAGES, config, results, registry, baselines, other_jobs=flat_jobs(20), cache=cache)
    assert no_local is None  # no local model


def test_a_run_on_this_machine_says_its_expected_time_when_it_starts_and_no_estimate_never_stops_it(
    tmp_path, monkeypatch, caplog
):
    """The jobs Snakemake is to run, as the run's start gets them: every job is needed, those that start no model
    are the other jobs; the time said is the estimate of the plan of exactly those, and where the rates are kept."""
    config, results, registry, _, key = laptop_plan(tmp_path, monkeypatch)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    write_cache(rates_cache_file(), {key: [record(MACHINE, 100.0, 30.0, None)]})
    monkeypatch.setattr("h2htalk.plan.timing.other_processes_load", lambda: None)
    log = logging.getLogger("h2htalk.test.said")
    caplog.set_level(logging.INFO, logger=log.name)
    scope, local = Scope(config, results), config["models"][0]
    labelled = [(stage, labels) for stage in STAGES for labels in stage.jobs(scope.run)
                if set(stage.starts(scope, labels)) <= {local}]  # fmt: skip
    jobs = [snakemake_job(stage.name, labels) for stage, labels in labelled]
    others = [job_name(stage.name, labels) for stage, labels in labelled if not stage.starts(scope, labels)]
    needed = {job_name(stage.name, labels) for stage, labels in labelled}
    expected = estimate_run(STAGES, config, results, registry, needed, others)
    assert expected is not None and expected.other_jobs == len(others) > 0

    rules = Rules(config, results, registry)
    said = rules.start(jobs, log)
    assert said is not None and said.estimate == expected
    assert said_in(caplog, log) == [(logging.INFO, expected.line()), (logging.INFO, cache_line(rates_cache_file()))]
    assert rules.start(jobs, log, local=False) is None  # a cluster's jobs run elsewhere: no time said here

    caplog.clear()
    broken = {**config, "plan": {**config["plan"], "throughput": str(tmp_path / "no-such-table.yaml")}}
    assert say_expected_time(lambda: estimate_run(STAGES, broken, results, registry, needed, others), log) is None
    [(level, warning)] = said_in(caplog, log)
    assert level == logging.WARNING and warning.startswith("No time estimate: ") and "no-such-table.yaml" in warning


def test_the_work_of_a_job_that_starts_no_model_grows_with_the_runs_requests_and_answers():
    """At the full reconstructed set the plan job took 106 CPU s and a score job 53 s for 1,542 answers, where the
    estimate said ``other_job_s`` each: the plan's requests, a score job's answers and the studies' answers now
    count, each at its rate; a job whose work does not grow (curation, prompts, tables) counts none."""
    cpu = load_throughput(REPO_ROOT / "config" / "throughput.yaml", STAGES).cpu
    assert cpu is not None
    run = {
        ("generate", "m1"): 1000,
        ("generate", "m2"): 2000,
        ("study.answers", "m1"): 300,
        ("rubric_judge", "j"): 4000,
    }
    twice = {key: 2 * count for key, count in run.items()}
    plan, studies = job_name("plan", {}), job_name("score_studies", {"embedder": "e"})
    scores = {model: job_name("score", {"model": model, "embedder": "e"}) for model in ("m1", "m2", "baseline-oracle")}
    assert work_seconds(plan, run, cpu, STAGES) == pytest.approx(7300 * cpu.request_planned_s)
    assert work_seconds(scores["m1"], run, cpu, STAGES) == pytest.approx(1000 * cpu.answer_scored_s)
    assert work_seconds(scores["baseline-oracle"], run, cpu, STAGES) == pytest.approx(2000 * cpu.answer_scored_s)
    assert work_seconds(studies, run, cpu, STAGES) == pytest.approx(300 * cpu.study_answer_scored_s)
    for job in (plan, studies, *scores.values()):
        assert work_seconds(job, twice, cpu, STAGES) == pytest.approx(2 * work_seconds(job, run, cpu, STAGES))
    assert work_seconds(job_name("figure", {"figure": "fig4_wordcloud"}), twice, cpu, STAGES) == 0.0
    # the measured plan job at every reference (82,658 requests; CPU s, a busy machine) against the calibration
    assert cpu.other_job_s + work_seconds(plan, {("generate", "m"): 82_658}, cpu, STAGES) == pytest.approx(
        105.7, rel=0.1
    )


def test_what_a_jobs_work_grows_with_is_its_stages_declaration():
    """The stages say what their jobs' work grows with (``grows``); a stage declared so elsewhere is counted alike,
    and every declared rate is a key of the throughput table's ``cpu`` section."""
    from dataclasses import fields, replace

    from h2htalk.stages.spec import Grows

    cpu = load_throughput(REPO_ROOT / "config" / "throughput.yaml", STAGES).cpu
    assert cpu is not None
    declared = {stage.name: stage.grows for stage in STAGES if stage.grows is not None}
    assert set(declared) == {"plan", "score", "score_studies"}
    assert {grows.per for grows in declared.values()} <= {f.name for f in fields(cpu)}
    run = {("generate", "m1"): 1000, ("study.answers", "m1"): 300}
    toy = replace(next(s for s in STAGES if s.name == "table1"), grows=Grows("answer_scored_s", ("study.answers",)))
    assert work_seconds(job_name("table1", {}), run, cpu, [toy]) == pytest.approx(300 * cpu.answer_scored_s)
    assert work_seconds(job_name("table1", {}), run, cpu, STAGES) == 0.0


def test_the_laptop_defaults_other_jobs_take_what_the_readme_says_their_scores_a_share_of_it(tmp_path, monkeypatch):
    """The README's formula gives the jobs that start no model 90 s on the laptop default from an empty folder; the
    scores' and the plan's work is a small part of it there, and the rest ``other_job_s`` each."""
    config, results, registry, every, key = laptop_plan(tmp_path, monkeypatch)
    cpu = load_throughput("config/throughput.yaml", STAGES).cpu
    assert cpu is not None
    scope = Scope(config, results)
    others = [job_name(s.name, labels) for s in STAGES for labels in s.jobs(scope.run) if not s.starts(scope, labels)]
    write_cache(tmp_path / "rates.json", {key: [record(MACHINE, 100.0, 30.0, None)]})
    monkeypatch.setattr("h2htalk.plan.timing.other_processes_load", lambda: None)

    def estimate(other_jobs: list[JobName]):
        found = estimate_run(STAGES, config, results, registry, every, other_jobs, cache=tmp_path / "rates.json")
        assert found is not None
        return found

    laptop, flat = estimate(others), estimate(flat_jobs(len(others)))
    assert flat.other_s == pytest.approx(len(others) * cpu.other_job_s) and flat.other_work_s == 0.0
    assert laptop.other_s == pytest.approx(flat.other_s + laptop.other_work_s)
    assert 0 < laptop.other_work_s < 0.2 * laptop.other_s
    assert laptop.other_s == pytest.approx(90.0, abs=10.0)  # README: "the 90 s of jobs that start no model"
    without_scores = estimate([job for job in others if job[0] not in ("score", "score_studies", "plan")])
    assert without_scores.other_work_s == 0.0


def test_a_broken_cpu_calibration_is_named(tmp_path):
    table = yaml.safe_load((REPO_ROOT / "config" / "throughput.yaml").read_text(encoding="utf-8"))
    del table["cpu"]["decode_share"]
    path = tmp_path / "throughput.yaml"
    path.write_text(yaml.safe_dump(table), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"throughput.yaml: cpu: 'decode_share' is a required property"):
        load_throughput(path, STAGES)


@pytest.mark.parametrize(("key", "old", "new"), [("verdict_tokens", "rubric judge", "rubric_judge"),
                                                 ("answer_length", "generate studies", "study.answers")])  # fmt: skip
def test_a_step_the_cpu_calibration_names_by_an_old_name_is_named(tmp_path, key, old, new):
    table = yaml.safe_load((REPO_ROOT / "config" / "throughput.yaml").read_text(encoding="utf-8"))
    table["cpu"][key][old] = table["cpu"][key].pop(new)
    path = tmp_path / "throughput.yaml"
    path.write_text(yaml.safe_dump(table), encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"throughput.yaml: cpu.{key}: '{old}' is not one of \[.*'{new}'"):
        load_throughput(path, STAGES)


def test_the_other_jobs_take_the_share_of_a_core_the_threads_waiting_for_one_leave_them_and_learn_from_a_few_seconds(
    tmp_path, monkeypatch
):
    """On a busy 2-core machine llama.cpp's rates fell 4.6x where a one-thread job slowed far less, and under a load
    of 28 far more: the other jobs take the cores shared out among the threads ready to run. A finished run keeps how
    fast they went against that, though they took a few seconds, and the next estimate uses it at its own share."""
    from h2htalk.hardware import one_core_share

    config, results, registry, every, key = laptop_plan(tmp_path, monkeypatch)
    cpu = load_throughput("config/throughput.yaml", STAGES).cpu
    assert cpu is not None
    cache = tmp_path / "rates.json"
    write_cache(cache, {key: [record(MACHINE, 37.6, 2.3, None)]})  # rates measured under four busy processes
    monkeypatch.setattr("h2htalk.plan.timing.other_processes_load", lambda: None)

    def estimate(runnable: float, other_jobs: int = 20):
        monkeypatch.setattr("h2htalk.plan.timing.runnable_others", lambda: runnable)
        found = estimate_run(STAGES, config, results, registry, every, other_jobs=flat_jobs(other_jobs), cache=cache)
        assert found is not None
        return found

    quiet, crowded = estimate(0.0), estimate(4.0)
    share = one_core_share(4.0, None, crowded.cores)
    assert quiet.share == 1.0 and quiet.other_s == pytest.approx(20 * cpu.other_job_s)
    assert crowded.share == share and crowded.other_s == pytest.approx(20 * cpu.other_job_s / share)
    assert crowded.seconds - crowded.other_s == pytest.approx(quiet.seconds - quiet.other_s)  # llama.cpp's as before

    # 20 other jobs took 6 s where the estimate said 60 and more: below the model jobs' 20 s, and kept
    assert learn_from_run(crowded, {"score": 6.0}, load=None) == {OTHER_JOBS: "added"}
    assert [r.runnable for r in read_cache(cache)[key] if r.kind == OTHER_JOBS] == [4.0]  # as crowded as it was
    assert estimate(4.0).other_s == pytest.approx(6.0, rel=0.01)
    assert estimate(0.0).other_s == pytest.approx(6.0 * share, rel=0.01)  # as fast against a whole core
    assert learn_from_run(estimate(4.0), {"score": 6.5}, load=None) == {OTHER_JOBS: "kept"}
    few = estimate(4.0, other_jobs=3)  # too few jobs to tell what their seconds say
    assert learn_from_run(few, {"score": 60.0}, load=None) == {}


def test_a_run_whose_load_fell_after_its_estimate_keeps_rates_as_of_the_quiet_run_it_was(tmp_path, monkeypatch):
    """The learning case of the three-state benchmark: four busy processes held both cores while the estimate was
    made (4 threads waiting, 2.0 cores busy), then stopped, and the run went on alone (0.1 of 2 cores). Its records
    are of that quiet run: not kept as crowded (the next quiet run would pass them by), and the other jobs' speed
    against the whole core they had, not the 0.4 the estimate gave them (the next run said 0.7 min, took 1.7)."""
    config, results, registry, every, key = laptop_plan(tmp_path, monkeypatch)
    cpu = load_throughput("config/throughput.yaml", STAGES).cpu
    assert cpu is not None
    cache = tmp_path / "rates.json"
    write_cache(cache, {key: [record(MACHINE, 37.6, 2.3, 2.0), record(MACHINE, 163.0, 47.0, 0.0)]})

    def estimate(load: float, runnable: float):
        monkeypatch.setattr("h2htalk.plan.timing.other_processes_load", lambda: load)
        monkeypatch.setattr("h2htalk.plan.timing.runnable_others", lambda: runnable)
        found = estimate_run(STAGES, config, results, registry, every, other_jobs=flat_jobs(20), cache=cache)
        assert found is not None
        return found

    busy = estimate(2.0, 4.0)
    assert busy.share < 0.5
    assert learn_from_run(busy, {"score": 25.0}, load=0.1)[OTHER_JOBS] == "added"
    kept = read_cache(cache)[key]
    assert {r.runnable for r in kept if r.source == "run"} == {None}  # the start's crowd is not the run's
    assert {r.load for r in kept if r.source == "run"} == {0.1}
    quiet = estimate(0.0, 0.0)
    assert quiet.other_s == pytest.approx(25.0, rel=0.01)  # as fast as they went on a core of their own
    steady = estimate(2.0, 4.0)  # a run that stayed as busy as at its start keeps the crowd it had
    learn_from_run(steady, {"score": 25.0}, load=1.9)
    assert 4.0 in {r.runnable for r in read_cache(cache)[key] if r.kind == OTHER_JOBS}


def test_the_threads_waiting_for_a_core_are_counted_past_the_cores_there_are():
    """The busy cores read "2.0 of 2" at a load of 4 and of 38; the run queue tells them apart."""
    from h2htalk.hardware import nice_weight, one_core_share, runnable_others

    assert one_core_share(None, None, 2) == 1.0
    assert one_core_share(1.0, 2.0, 2) == 1.0  # one busy thread beside it on two cores: a core of its own
    assert one_core_share(4.0, 2.0, 2) == pytest.approx(0.4)
    assert one_core_share(38.0, 2.0, 2) == pytest.approx(2 / 39)
    assert one_core_share(None, 1.6, 2) == pytest.approx(2 / 2.6)  # no run queue: the busy cores stand for it
    if not Path("/proc/stat").is_file():
        return
    spinners = [busy_process(0) for _ in range(3)]
    try:
        time.sleep(0.1)
        weight = sum(nice_weight(os.getpriority(os.PRIO_PROCESS, p.pid)) for p in spinners)  # 3 at nice 0
        waiting = runnable_others(seconds=0.2, readings=4)
    finally:
        stop(spinners)
    assert waiting is not None and waiting >= weight - 1e-9


def busy_process(nice: int) -> subprocess.Popen[bytes]:
    """A process that keeps a core busy, at ``nice`` (where this process may not go below its own nice, at its own)."""
    spinner = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, spinner.pid, nice)
    return spinner


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.kill()
        process.wait()


def test_a_thread_ready_to_run_counts_by_its_claim_on_a_core_against_a_job_at_nice_0():
    """A busy process at nice 19 (a laptop's indexer) takes almost no time from the jobs at nice 0: it counts 15/1024
    of a waiting thread, one at nice 0 a whole one, one below nice 0 no more than one (it can take one core)."""
    from h2htalk.hardware import nice_weight, runnable_weight

    assert nice_weight(0) == 1.0 and nice_weight(19) == 15 / 1024 and nice_weight(-20) == 88761 / 1024
    assert nice_weight(5) == 335 / 1024 and nice_weight(40) == nice_weight(19)  # past the range: its end
    if not Path("/proc/stat").is_file():
        return
    at_0, at_19 = [busy_process(0) for _ in range(3)], [busy_process(19) for _ in range(3)]
    try:
        time.sleep(0.2)  # each has started its loop
        nices = [os.getpriority(os.PRIO_PROCESS, p.pid) for p in at_0 + at_19]
        weight_0 = runnable_weight(p.pid for p in at_0)
        weight_19 = runnable_weight(p.pid for p in at_19)
        everyone = runnable_weight()
    finally:
        stop(at_0 + at_19)
    assert nices[3:] == [19, 19, 19]
    assert weight_0 == pytest.approx(sum(min(nice_weight(n), 1.0) for n in nices[:3]))  # 3.0 where nice 0 was allowed
    assert weight_19 == pytest.approx(3 * 15 / 1024)
    assert everyone >= weight_0 + weight_19 - 1e-9  # and whatever else waits to run on the machine
    assert runnable_weight([os.getpid()]) == 0.0  # the process reading is not another's


def test_the_kept_rates_are_listed_by_setting_then_kind(tmp_path):
    from h2htalk.plan.rates import kept_rates

    path = tmp_path / "rates.json"
    write_cache(path, {"AMD EPYC | 2 threads": [record("study", 90, 20, 0.2), record(MACHINE, 171.5, 48.2, 0.1)]})
    first, setting, machine, study = kept_rates(path)
    assert (first, setting) == (f"{path}: rates of 1 settings", "\nAMD EPYC | 2 threads")
    assert machine.startswith("  machine: pp512 172") and study.startswith("  study: pp512 90")
    assert kept_rates(path, reset=True) == [f"{path}: removed"] and kept_rates(path) == [f"{path}: no rates kept"]
