"""The time a run's local-model jobs are expected to take: the one-slot server's prompt tokens, the estimate's
arithmetic, the rates cache and the closing line."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from h2htalk.config import load_config, load_registry, registry_files
from h2htalk.errors import ConfigError
from h2htalk.layout import Layout, instances_set
from h2htalk.llm.client import ChatRequest
from h2htalk.llm.tokens import MESSAGE_OVERHEAD, prompt_tokens, text_tokens
from h2htalk.plan.calls import Placeholder, PlannedCalls, Stage, job_name, shared_with
from h2htalk.plan.costs import load_throughput
from h2htalk.plan.timing import (
    CpuCalibration,
    Rates,
    RunEstimate,
    actual_line,
    estimate_jobs,
    estimate_run,
    job_seconds_since,
    rates_key,
)
from h2htalk.stages.spec import Scope
from h2htalk.stages.table import STAGES

from .conftest import REPO_ROOT

PERSONA = "你是小林，一位温和的朋友，记得对方说过的每一件事。" * 4
CPU = CpuCalibration(
    prefill_share=0.5, decode_share=0.25, job_start_s=10.0, answer_length={"generate": 2.0},
    verdict_tokens={"study judge": 30.0, "rubric judge": 30.0, "judge ladder": 30.0},
    other_job_s=1.0, reference_pp512=200.0,
)  # fmt: skip
RATES = Rates(pp512=100.0, tg128=20.0, threads=2, cached=False)


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

    stage = Stage("generate", "m", False, lambda spec, request: Placeholder("好的", 5))
    calls = PlannedCalls({"name": "m", "engine": "llamacpp"}, "/nonexistent", stage, None)  # no cache: no client
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
    stage = Stage("generate", "m", False, lambda spec, request: Placeholder("好的", 5))
    calls = PlannedCalls({"name": "m", "engine": "llamacpp"}, "/nonexistent", stage, None)
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
    stage = Stage(step, model, False, lambda spec, request: Placeholder("", 0))
    calls = PlannedCalls({"name": model, "engine": engine}, "/nonexistent", stage, None)
    calls.job = job_name(job, {"model": model})
    calls.tally.requests = to_send
    calls.tally.evaluated_tokens_to_send = evaluated
    calls.tally.completion_tokens_to_send = completion
    return calls


def test_each_job_is_expected_to_take_its_tokens_at_the_machines_rates_as_calibrated():
    sessions = [
        planned_session("generate", "generate", "llamacpp", 10, 5_000, 1_000),
        planned_session("study", "generate studies", "llamacpp", 4, 1_000, 200),
        planned_session("study", "study judge", "llamacpp", 4, 2_000, 1_024),  # the same job: one start
        planned_session("rubric_judge", "rubric judge sample", "llamacpp", 3, 500, 768),
        planned_session("rubric_judge", "rubric judge", "llamacpp", 0, 0, 0),  # all cached: nothing to send
        planned_session("judge_ladder", "judge ladder", "llamacpp", 2, 100, 512),
        planned_session("judge_ladder", "judge ladder", "llamacpp", 2, 100, 512, model="n"),  # another job
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
    faster = estimate_jobs(sessions, Rates(200.0, 40.0, 2, True), CPU)
    assert faster["generate"].seconds - 10 == pytest.approx((jobs["generate"].seconds - 10) / 2)


def test_the_closing_line_sets_each_jobs_time_beside_what_was_expected(tmp_path):
    jobs = estimate_jobs([planned_session("generate", "generate", "llamacpp", 10, 5_000, 1_000)], RATES, CPU)
    estimate = RunEstimate(jobs, other_s=60.0, rates=RATES)
    assert estimate.seconds == pytest.approx(510 + 60)
    line = estimate.line()
    assert line.startswith("Expected time: about 9.5 min on this machine: generate ~8.5, other jobs ~1.0")
    assert "pp512 100, tg128 20 tokens/s on 2 threads, measured now" in line
    two = RunEstimate(jobs, 60.0, RATES, {"small": RATES, "large": Rates(50.0, 10.0, 2, True)})
    # each local model's rates: a judge panel's larger model runs at its own speed
    speeds = "small pp512 100, tg128 20; large pp512 50, tg128 10 tokens/s on 2 threads, measured now"
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


def test_rates_are_kept_per_cpu_thread_count_model_and_llama_cpp(tmp_path):
    pytest.importorskip("llama_cpp")
    model = tmp_path / "model.gguf"
    model.write_bytes(b"x" * 10)
    key = rates_key(model, 2, True)
    assert key != rates_key(model, 1, True) and key != rates_key(model, 2, False)
    model.write_bytes(b"x" * 11)  # another file under the same name
    assert rates_key(model, 2, True) != key
    copy = tmp_path / "tmp1234.gguf"  # a temporary copy of the registry's model: known by the model's name
    copy.write_bytes(b"x" * 11)
    assert rates_key(copy, 2, True, "qwen") == rates_key(model, 2, True, "qwen") != rates_key(model, 2, True)


def test_the_whole_run_is_estimated_from_the_plan_of_the_laptop_default(tmp_path, monkeypatch):
    """The demo plan, cold (nothing cached), with rates from the cache: every local-model job has its time, and a
    machine twice as fast halves the time spent in llama.cpp."""
    pytest.importorskip("llama_cpp")
    shutil.copytree(REPO_ROOT / "config", tmp_path / "config")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = load_config(["config/config.yaml", "config/local.yaml"])
    results = Layout("results", instances_set(config))
    registry = load_registry(registry_files(config))
    local = config["models"][0]
    model_file = Path(results.path("model_file", model=local))
    model_file.parent.mkdir(parents=True)
    model_file.write_bytes(b"gguf")
    settings = registry[local]["llamacpp"]
    threads = min(settings["threads"], len(os.sched_getaffinity(0)))
    cpu = load_throughput("config/throughput.yaml").cpu
    assert cpu is not None

    def estimate(pp512: float, tg128: float):
        cache = tmp_path / "cache" / "h2htalk" / "llamacpp_rates.json"
        cache.parent.mkdir(parents=True, exist_ok=True)
        key = rates_key(model_file, threads, settings["flash_attn"], local)
        cache.write_text(json.dumps({key: {"pp512": pp512, "tg128": tg128, "threads": threads}}))
        return estimate_run(config, results, registry, needed, other_jobs=20)

    run = Scope(config, results).run
    every = {job_name(stage.name, labels) for stage in STAGES if stage.planned for labels in stage.jobs(run)}
    ladders = {job for job in every if job[0] == "judge_ladder"}
    assert {dict(labels)["part"] for _, labels in ladders} == {"rubric", "studies"}
    needed = every - {job for job in ladders if dict(job[1])["part"] == "studies"}  # what the laptop's `all` runs
    slow, fast = estimate(60.0, 12.0), estimate(120.0, 24.0)
    assert slow is not None and fast is not None and slow.rates.cached
    assert set(slow.jobs) == {"generate", "study", "rubric_judge", "judge_ladder"}
    for job, found in slow.jobs.items():
        assert found.prompt_tokens > 0 and found.answer_tokens > 0, job
        assert found.seconds - cpu.job_start_s == pytest.approx(2 * (fast.jobs[job].seconds - cpu.job_start_s))
    assert slow.other_s == pytest.approx(20 * cpu.other_job_s * cpu.reference_pp512 / 60.0)
    needed |= ladders
    both = estimate(60.0, 12.0)
    assert both is not None and both.jobs["judge_ladder"].prompt_tokens > slow.jobs["judge_ladder"].prompt_tokens
    baselines = {job_name("generate", {"model": name}) for name in config["baselines"]}
    assert estimate_run(config, results, registry, baselines, other_jobs=20) is None  # no local model


def test_a_broken_cpu_calibration_is_named(tmp_path):
    table = yaml.safe_load((REPO_ROOT / "config" / "throughput.yaml").read_text(encoding="utf-8"))
    del table["cpu"]["decode_share"]
    path = tmp_path / "throughput.yaml"
    path.write_text(yaml.safe_dump(table), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"throughput.yaml: cpu: 'decode_share' is a required property"):
        load_throughput(path)
