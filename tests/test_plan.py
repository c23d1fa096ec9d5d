"""The plan: the requests a run sends, counted before it sends them and found in the caches after; tokens, prices
and GPU-hours from their tables."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from h2htalk.cli import main
from h2htalk.config import default_config
from h2htalk.errors import ConfigError
from h2htalk.io import write_jsonl_atomic
from h2htalk.layout import Layout
from h2htalk.llm.client import ChatRequest
from h2htalk.plan.chain import Placeholders
from h2htalk.plan.costs import Price, load_prices, load_throughput
from h2htalk.stages.steps import declared_steps
from h2htalk.stages.table import STAGES

from .conftest import REPO_ROOT
from .standins.loopback import LoopbackAPI

SUBTASKS = ["itinerary_basic", "dialogue_base"]


def registry(tmp_path: Path, base_url: str) -> Path:
    api = {"base_url": base_url, "model": "stub"}
    entries = {
        "stub-model": {"display_name": "Stub", "size_group": "specialized", "engine": "api", "api": api},
        "stub-judge": {"display_name": "Judge", "size_group": "specialized", "engine": "api",
                       "api": {**api, "batch_api": {}}},
        "vllm-7b": {"display_name": "Seven", "size_group": "open-1-8b", "engine": "vllm", "hf_id": "org/seven",
                    "size_b": 7, "gpus": 1},
        "baseline-oracle": {"display_name": "Oracle", "size_group": "baseline", "engine": "baseline",
                            "baseline": {"kind": "oracle"}},
    }  # fmt: skip
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(entries, allow_unicode=True), encoding="utf-8")
    return path


def write_config(tmp_path: Path, base_url: str, **changes: object) -> Path:
    cache = tmp_path / "cache"
    config = {
        "model_registry": str(registry(tmp_path, base_url)),
        "models": ["stub-model"],
        "baselines": ["baseline-oracle"],
        "subtasks": SUBTASKS,
        "instances": {"source": "demo", "reconstruct": {"generator": "stub-judge", "voters": ["stub-judge"]}},
        "generation": {"cache_dir": str(cache / "generations"), "concurrency": 4},
        "rubric_judge": {"model": "stub-judge", "samples": 2, "cache_dir": str(cache / "judgments")},
        "study_judge": {"model": "stub-judge", "samples": 1, "cache_dir": str(cache / "judgments")},
        "studies": {"sample": {"safety": 2, "instruction_following": 2}},
        "review": {"store": str(tmp_path / "desk.sqlite")},
        "plan": {"prices": str(prices_file(tmp_path)), "throughput": str(REPO_ROOT / "config" / "throughput.yaml")},
        **changes,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return path


def prices_file(tmp_path: Path) -> Path:
    table = {
        "date": "2025-03-01",
        "currency": "USD",
        "models": {
            "stub-judge": {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "batch_discount": 0.5},
            "stub-model": {"input_per_mtok": 1.0, "output_per_mtok": 4.0, "batch_discount": None},
        },
        "gpu_hours": {"NVIDIA A100 80GB SXM": {"per_hour": 3.0}},  # config/throughput.yaml's GPU
    }
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(table), encoding="utf-8")
    return path


def plan(config: Path, results: Path) -> dict[tuple[str, str], dict[str, str]]:
    assert main(["plan", "--config", str(config), "--results", str(results)]) == 0
    rows = list(csv.DictReader((results / "plan.csv").open(encoding="utf-8")))
    merged: dict[tuple[str, str], dict[str, str]] = {}
    for row in rows:  # the judges have a row per judged model: summed here
        key = (row["stage"], row["model"])
        if key in merged:
            for column in ("requests", "cached", "to_send", "prompt_tokens", "recorded_prompt_tokens"):
                merged[key][column] = str(int(merged[key][column]) + int(row[column]))
        else:
            merged[key] = row
    return merged


def run_stages(config: Path, results: Path, base_url: str) -> dict[str, int]:
    """The run's own stages, against the stand-in: what each job's run.json says it asked for."""
    common = ["--config", str(config), "--results", str(results)]
    for subtask in SUBTASKS:
        assert main(["instances", *common, "--subtask", subtask]) == 0
        for variant in ("sap", "nosap"):
            assert main(["prompts", "--results", str(results), "--subtask", subtask, "--variant", variant]) == 0
    for study in ("safety", "instruction_following"):
        for variant in ("sap", "nosap"):
            assert main(["study-inputs", *common, "--study", study, "--variant", variant]) == 0
    served = ["--base-url", base_url, "--served-model", "stub"]
    assert main(["generate", *common, "--model", "stub-model", *served]) == 0
    assert main(["baseline-answers", *common, "--model", "baseline-oracle"]) == 0
    for model in ("stub-model", "baseline-oracle"):
        assert main(["rubric-judge", *common, "--model", model, *served]) == 0
    assert main(["study", *common, "--model", "stub-model", *served]) == 0
    runs = {
        "generate": results / "generations" / "stub-model" / "run.json",
        "study.answers": results / "generations" / "stub-model" / "studies.run.json",
        "rubric_judge": results / "judge_samples",
        "study.judge": results / "studies" / "verdicts" / "stub-model.run.json",
    }
    judged = sum(json.loads((runs["rubric_judge"] / m / "run.json").read_text())["requests"]
                 for m in ("stub-model", "baseline-oracle"))  # fmt: skip
    return {
        "generate": json.loads(runs["generate"].read_text())["requests"],
        "study.answers": json.loads(runs["study.answers"].read_text())["requests"],
        "rubric_judge": judged,
        "study.judge": json.loads(runs["study.judge"].read_text())["requests"],
    }


def test_the_plan_counts_the_requests_a_run_sends_and_finds_them_cached_after(tmp_path):
    results = tmp_path / "results"
    with LoopbackAPI() as api:
        config = write_config(tmp_path, api.base_url)
        before = plan(config, results)
        assert sum(api.requests.values()) == 0  # a plan sends nothing
        assert not (tmp_path / "cache").exists()  # and creates no cache
        sent = run_stages(config, results, api.base_url)
        after = plan(config, results)
    # the stand-in answers a study turn alike in both variants, and the study judge (shown no system prompt) then
    # asks once for both; the plan cannot know the answers and counts one request per variant: an upper bound
    planned = sent | {"study.judge": 2 * sent["study.judge"]}
    stages = ("generate", "study.answers", "rubric_judge", "study.judge")
    assert sent["generate"] == len(SUBTASKS) * 3 * 2  # Table 2's answers alone: the demo sets, both variants
    for stage, model in zip(stages, ("stub-model", "stub-model", "stub-judge", "stub-judge"), strict=True):
        assert int(before[(stage, model)]["requests"]) == planned[stage], stage  # exact, before the run
        assert int(before[(stage, model)]["to_send"]) == planned[stage]
        assert int(after[(stage, model)]["requests"]) == sent[stage]  # exact after it, every one cached
        assert int(after[(stage, model)]["cached"]) == sent[stage] and int(after[(stage, model)]["to_send"]) == 0
    # 3 demo items of the judged subtask, 2 variants, 2 samples, for the model and the oracle
    assert sent["rubric_judge"] == 3 * 2 * 2 * 2
    generated = after[("generate", "stub-model")]
    estimated, recorded = int(generated["prompt_tokens"]), int(generated["recorded_prompt_tokens"])
    assert abs(estimated / recorded - 1) < 0.25  # the stand-in counts 1.5 CJK characters a token, a little fewer
    report = (results / "plan.md").read_text(encoding="utf-8")
    assert "| **total** |" in report and "USD, Batch API" in report


def test_the_batch_api_halves_the_judges_cost_where_the_endpoint_has_one(tmp_path):
    results = tmp_path / "results"
    judge = {"model": "stub-judge", "samples": 2, "cache_dir": str(tmp_path / "j"), "batch": True}
    rows = plan(write_config(tmp_path, "http://127.0.0.1:9/v1", rubric_judge=judge, models=["stub-model", "vllm-7b"]),
                results)  # fmt: skip
    judge, model, local = (rows[key] for key in (("rubric_judge", "stub-judge"), ("generate", "stub-model"),
                                                 ("generate", "vllm-7b")))  # fmt: skip
    assert judge["batch"] == "on" and model["batch"] == ""  # generation has no batch key
    assert float(judge["cost_batch"]) == pytest.approx(float(judge["cost_direct"]) / 2, abs=1e-4)  # 4 places
    assert float(model["cost_batch"]) == float(model["cost_direct"]) > 0
    assert float(local["gpu_hours"]) > 0 and float(local["cost_direct"]) == 0  # GPUs, no bill
    assert float(model["gpu_hours"] or 0) == 0
    assert "through the Batch API: rubric_judge" in (results / "plan.md").read_text(encoding="utf-8")


def test_a_benchmark_not_yet_reconstructed_is_planned_from_its_curated_references(tmp_path):
    results = tmp_path / "results"
    for subtask in SUBTASKS:
        records = [
            {"id": f"{subtask}-{i:05d}", "subtask": subtask, "text": f"第{i}条参考回答。", "kept": True,
             "source": {"file": "x.jsonl", "line": i}}
            for i in range(1, 6)
        ]  # fmt: skip
        write_jsonl_atomic(results / "data" / "curated" / f"{subtask}.jsonl", records)
    reconstruct = {"generator": "stub-judge", "voters": ["stub-judge", "stub-model"], "votes": 3,
                   "cache_dir": str(tmp_path / "r")}  # fmt: skip
    config = write_config(tmp_path, "http://127.0.0.1:9/v1", instances={"source": "reconstructed",
                                                                         "reconstruct": reconstruct})  # fmt: skip
    rows = plan(config, results)
    assert int(rows[("reconstruct_instances", "stub-judge")]["requests"]) == 10 + 10 * 2  # a try and 2 of 3 votes each
    assert int(rows[("reconstruct_instances", "stub-model")]["requests"]) == 10
    assert "10 of 10 references are not reconstructed yet" in (results / "plan.md").read_text(encoding="utf-8")
    demo = plan(write_config(tmp_path, "http://127.0.0.1:9/v1"), tmp_path / "demo")
    # every planned instance makes its own prompts: 10 references in 2 variants, where the demo set has 2 x 3 x 2
    assert int(demo[("generate", "stub-model")]["requests"]) == 2 * 3 * 2
    assert int(rows[("generate", "stub-model")]["requests"]) == 10 * 2  # the studies' answers are a job of their own
    assert rows[("study.answers", "stub-model")]["requests"] == demo[("study.answers", "stub-model")]["requests"]


def test_a_missing_verdict_is_planned_at_the_limit_its_step_declares(tmp_path):
    """A judge's verdict at its section's max_new_tokens, its cascade sample's too, even on a second try that asks
    for twice as many; the ladders' (either judge's) at their request's own limit."""
    config = default_config({"rubric_judge": {"max_new_tokens": 300}, "study_judge": {"max_new_tokens": 200}})
    planned = Placeholders(config, Layout(str(tmp_path)))
    steps = declared_steps(STAGES)
    retry = ChatRequest("key", "item+retry", [{"role": "user", "content": "计划"}], {"max_tokens": 600})
    limits = {
        name: planned(steps[name])({}, retry).completion_tokens
        for name in ("rubric_judge", "rubric_judge.sample", "study.judge", "study.judge.sample", "judge_ladder")
    }
    assert limits == {"rubric_judge": 300, "rubric_judge.sample": 300, "study.judge": 200, "study.judge.sample": 200,
                      "judge_ladder": 600}  # fmt: skip


def test_prices_and_gpu_hours_come_from_their_tables(tmp_path):
    assert Price(2.5, 10.0, 0.5).cost(1_000_000, 100_000, batched=True) == pytest.approx((2.5 + 1.0) / 2)
    assert Price(2.5, 10.0, None).cost(1_000_000, 0, batched=True) == pytest.approx(2.5)
    throughput = load_throughput(REPO_ROOT / "config" / "throughput.yaml", STAGES)
    seven = {"gpus": 1, "size_b": 7}
    rates = throughput.size_class(7)
    assert throughput.gpu_hours(seven, 0, 0, 1) == pytest.approx(rates.startup_min / 60)
    hours = throughput.gpu_hours(seven, int(rates.prefill * 3600), int(rates.decode * 3600), 0)
    assert hours == pytest.approx(2.0)
    assert throughput.gpu_hours({"gpus": 0, "size_b": 7}, 10, 10, 1) is None  # an API model: no GPUs
    assert throughput.size_class(671).up_to_b is None
    prices = load_prices(REPO_ROOT / "config" / "prices.yaml")
    assert prices.currency == "USD" and prices.date and prices.models["gpt-4o"].batch_discount == 0.5
    rate = prices.gpu_hours[throughput.gpu]  # the shipped tables price the GPU the rates are for
    assert prices.gpu_cost(throughput.gpu, 10.0) == pytest.approx(10 * rate)
    assert prices.gpu_cost("a GPU without a price", 10.0) is None and prices.gpu_cost(throughput.gpu, None) is None
    broken = tmp_path / "prices.yaml"
    broken.write_text("date: 2025-01-01\ncurrency: USD\nmodels: {gpt-4o: {input_per_mtok: 1}}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"prices.yaml: models.gpt-4o: 'output_per_mtok' is a required property"):
        load_prices(broken)


def test_a_prefetch_record_left_from_another_engine_pins_neither_the_run_nor_the_plan(tmp_path, monkeypatch):
    """A model a registry overlay moved from vLLM to an API downloads nothing: the record of its weights left by an
    earlier run pins neither its jobs nor its plan, so the plan's request keys are the run's (else it counts the
    cached answers as unsent)."""
    from h2htalk.config import registry_entry
    from h2htalk.llm.engines import engine_of
    from h2htalk.plan.chain import PlanModels
    from h2htalk.prefetch import OFFLINE

    for variable in OFFLINE:  # reading a record switches the process offline: restored after the test
        monkeypatch.setenv(variable, "0")
    moved, kept = "qwen2.5-72b-instruct", "qwen2.5-7b-instruct"
    mine = tmp_path / "mine.yaml"
    served = {"base_url": "http://127.0.0.1:8000/v1", "model": "qwen"}
    mine.write_text(yaml.safe_dump({moved: {"engine": "api", "api": served}}), encoding="utf-8")
    registry = {"model_registry": str(REPO_ROOT / "config" / "models.yaml"), "model_registry_overlays": [str(mine)]}
    config, results = default_config(registry), Layout(str(tmp_path / "results"))
    for name, repo in ((moved, "Qwen/Qwen2.5-72B-Instruct"), (kept, "Qwen/Qwen2.5-7B-Instruct")):
        download = {"role": "weights", "repo": repo, "revision": "a" * 40, "bytes": 1, "path": str(tmp_path)}
        record = Path(results.path("prefetched_model", model=name))
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"kind": "models", "name": name, "downloads": [download]}), encoding="utf-8")
    planned = PlanModels(config, results, None)
    for name in (moved, kept):
        run, plan = registry_entry(config, name, results), planned.entry(name)
        assert engine_of(plan).identity(plan) == engine_of(run).identity(run), name
    assert planned.entry(kept)["revision"] == "a" * 40 and planned.entry(moved)["revision"] is None
