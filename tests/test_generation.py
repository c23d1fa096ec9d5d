"""The generation stage: outputs, content-addressed cache, resume after a kill, engines and provisioning."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from h2htalk.cells import RunCells
from h2htalk.cli import main
from h2htalk.config import default_config, load_config, load_registry
from h2htalk.generation.generate import PromptFile, generate_model, request_params
from h2htalk.generation.provision import ProvisionError, provision_gguf
from h2htalk.hardware import available_cores
from h2htalk.instances.sources import demo_instances
from h2htalk.io import read_jsonl
from h2htalk.layout import Cell, Layout
from h2htalk.llm.calls import EngineOptions, chat_request, model_identity
from h2htalk.llm.client import EndpointError
from h2htalk.llm.engines import Endpoint, EngineError, open_endpoint
from h2htalk.llm.engines.llamacpp import llamacpp_command
from h2htalk.llm.engines.server import free_port
from h2htalk.llm.engines.vllm import vllm_command
from h2htalk.prompts.render import write_prompts
from h2htalk.settings import VARIANTS, GenerationSettings, StudySample
from h2htalk.subtasks import SUBTASK_KEYS

from .conftest import REPO_ROOT
from .standins.answers import echo_answer
from .standins.loopback import LoopbackAPI

CLIENT = {"concurrency": 3, "timeout_s": 10, "retries": 2, "backoff_base_s": 0.01, "backoff_max_s": 0.05}


def settings_for(tmp_path: Path, for_studies: bool = False, **generation) -> GenerationSettings:
    section = {**CLIENT, "max_new_tokens": {"dialogue_base": 64}, "cache_dir": str(tmp_path / "cache"), **generation}
    return GenerationSettings.from_config(default_config({"generation": section}), for_studies=for_studies)


def run(spec, files, settings, endpoint=None):
    return generate_model(spec, files, settings, EngineOptions(settings.client, settings.seed, endpoint=endpoint))


@pytest.fixture(scope="module")
def registry():
    return load_registry(REPO_ROOT / "config" / "models.yaml")


@pytest.fixture
def prompt_files(tmp_path) -> list[PromptFile]:
    files = []
    for variant in VARIANTS:
        for subtask in SUBTASK_KEYS:
            path = tmp_path / "prompts" / variant / f"{subtask}.jsonl"
            write_prompts(demo_instances(subtask), variant, path)
            files.append(PromptFile(variant, subtask, path, tmp_path / "out" / variant / f"{subtask}.jsonl"))
    return files


@pytest.fixture
def stub():
    with LoopbackAPI() as state:
        yield state


def api_spec(registry) -> dict:
    return registry["gpt-4o-mini"]


def test_outputs_per_variant_and_subtask(stub, registry, prompt_files, tmp_path):
    summary = run(api_spec(registry), prompt_files, settings_for(tmp_path), Endpoint(stub.base_url, "stub-model"))
    assert summary["requests"] == summary["sent"] == 66
    for file in prompt_files:
        records = read_jsonl(file.out)
        prompt_records = read_jsonl(file.prompts)
        assert [r["id"] for r in records] == [p["id"] for p in prompt_records]
        assert {(r["variant"], r["subtask"]) for r in records} == {(file.variant, file.name)}
        for record, prompt in zip(records, prompt_records, strict=True):
            user = prompt["messages"][1]["content"]
            assert record["response"] == echo_answer(user)
            assert record["finish_reason"] == "stop"
            assert record["completion_tokens"] == 6 and record["latency_s"] >= 0
            prov = record["provenance"]
            assert prov["model_id"] == "gpt-4o-mini" and prov["engine"] == "api"
            assert prov["params"]["seed"] == 1234 and prov["params"]["temperature"] == 0.0
            assert prov["prompt_hashes"] == prompt["hashes"]
    dialogue = read_jsonl(tmp_path / "out" / "sap" / "dialogue_base.jsonl")
    assert dialogue[0]["provenance"]["params"]["max_tokens"] == 64


def test_rerun_sends_nothing_and_one_subtask_regenerates_alone(stub, registry, prompt_files, tmp_path):
    endpoint = Endpoint(stub.base_url, "stub-model")
    run(api_spec(registry), prompt_files, settings_for(tmp_path), endpoint)
    before = sum(stub.requests.values())
    again = run(api_spec(registry), prompt_files, settings_for(tmp_path), endpoint)
    assert again["sent"] == 0 and sum(stub.requests.values()) == before
    # a changed decoding limit for one subtask changes only that subtask's request keys
    changed = settings_for(tmp_path, max_new_tokens={"dialogue_base": 64, "itinerary_middle": 99})
    third = run(api_spec(registry), prompt_files, changed, endpoint)
    assert third["sent"] == 6  # 3 itinerary_middle instances x 2 variants
    assert sum(stub.requests.values()) == before + 6


def test_a_regenerated_file_is_the_first_to_the_byte_from_the_cache_though_the_engine_answers_otherwise(
    stub, registry, prompt_files, tmp_path
):
    """The answer cache, not the seed, makes a rerun reproducible: an engine whose greedy, seeded answer
    depends on what it was sent before (llama.cpp's prefix reuse) gives the rerun the first run's bytes."""
    sent = iter(range(10_000))
    stub.responder = lambda user: f"{echo_answer(user)} {next(sent)}"  # a different answer every time it is asked
    spec, endpoint = registry["qwen2.5-coder-0.5b-instruct-q4km"], Endpoint(stub.base_url, "stub-model")
    first = run(spec, prompt_files, settings_for(tmp_path, concurrency=2), endpoint)
    written = {file.out: file.out.read_bytes() for file in prompt_files}
    for file in prompt_files[::4]:  # the files an interrupted run had not written yet
        file.out.unlink()
    again = run(spec, prompt_files, settings_for(tmp_path, concurrency=1), endpoint)  # in another order
    assert first["sent"] == 66 and again["sent"] == 0
    assert {file.out: file.out.read_bytes() for file in prompt_files} == written
    # without the cache the same requests, seed and all, get other answers from this engine
    fresh = settings_for(tmp_path, concurrency=1, cache_dir=str(tmp_path / "fresh"))
    uncached = run(spec, prompt_files, fresh, endpoint)
    assert uncached["sent"] == 66
    assert all(file.out.read_bytes() != written[file.out] for file in prompt_files)


def test_a_failed_item_is_recorded_and_sent_again_by_the_next_run(stub, registry, prompt_files, tmp_path):
    stub.faults.scripted = {"下雨了，我没带伞": ["400"]}  # one of the two variants' requests for this item is refused
    settings, endpoint = settings_for(tmp_path, concurrency=1), Endpoint(stub.base_url, "stub-model")
    summary = run(api_spec(registry), prompt_files, settings, endpoint)
    assert summary["failed"] == 1 and summary["failures"] == {"client_error": 1}  # 1 of 66 is under 2 %
    records = [r for v in VARIANTS for r in read_jsonl(tmp_path / "out" / v / "dialogue_base.jsonl")]
    refused = [r for r in records if r["failure"]]
    assert [(r["id"], r["response"], r["failure"]["kind"]) for r in refused] == [
        ("dialogue_base-demo03", "", "client_error")
    ]
    # not a content refusal: whatever caused it (a setting, the endpoint) may be fixed, so it is not cached
    again = run(api_spec(registry), prompt_files, settings, endpoint)
    assert again["sent"] == 1 and again["failed"] == 0


def test_a_content_refusal_is_cached_and_sent_again_with_retry_failed(stub, prompt_files, tmp_path):
    stub.faults.scripted = {"下雨了，我没带伞": ["risk"]}  # DeepSeek's answer to text it will not process
    command = generate_command(stub, results_tree(tmp_path, prompt_files), tmp_path)
    assert main(command) == 0
    sent = sum(stub.requests.values())
    assert main(command) == 0
    assert sum(stub.requests.values()) == sent  # it would be refused again: the rerun reuses it
    (tmp_path / "retry.yaml").write_text("generation: {retry_failed: true}\n", encoding="utf-8")  # as an overlay
    assert main([*command, "--config", str(tmp_path / "retry.yaml")]) == 0
    assert sum(stub.requests.values()) == sent + 1


def test_an_endpoint_that_refuses_every_request_fails_the_job_and_a_fixed_one_gets_them(
    stub, registry, prompt_files, tmp_path
):
    """A wrong key (401) reaches no answer and caches nothing: once the key is fixed, the rerun sends every
    request (it used to report "66 cached, 0 to send", every one a cached 401)."""
    stub.faults.scripted = {"": ["401"] * 66}  # every request
    settings, endpoint = settings_for(tmp_path), Endpoint(stub.base_url, "stub-model")
    with pytest.raises(EndpointError, match=r"model gpt-4o-mini: .* answered HTTP 401: .*Incorrect API key.* sends"):
        run(api_spec(registry), prompt_files, settings, endpoint)
    assert sum(stub.requests.values()) < 66 and not (tmp_path / "out").exists()
    with sqlite3.connect(tmp_path / "cache" / "gpt-4o-mini.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0
    stub.faults.scripted = {}  # the key is fixed
    fixed = run(api_spec(registry), prompt_files, settings, endpoint)
    assert fixed["sent"] == 66 and fixed["failed"] == 0


def test_content_refusals_are_recorded_but_never_fail_the_job(stub, registry, prompt_files, tmp_path):
    stub.faults.scripted = {"下雨了，我没带伞": ["risk", "risk"]}  # both variants' requests: DeepSeek's refusal
    settings = settings_for(tmp_path, concurrency=1, max_failure_rate=0.0)
    summary = run(api_spec(registry), prompt_files, settings, Endpoint(stub.base_url, "stub-model"))
    assert summary["failures"] == {"content_refusal": 2}
    records = [r for v in VARIANTS for r in read_jsonl(tmp_path / "out" / v / "dialogue_base.jsonl")]
    assert sorted(r["failure"]["kind"] for r in records if r["failure"]) == ["content_refusal"] * 2


def test_failures_beyond_the_threshold_fail_the_job_and_keep_finished_work(stub, registry, prompt_files, tmp_path):
    stub.faults.scripted = {"下雨了，我没带伞": ["400"]}
    settings = settings_for(tmp_path, concurrency=1, max_failure_rate=0.0)
    with pytest.raises(Exception, match=r"gpt-4o-mini: 1 of 66 requests failed.*(sap|nosap)/dialogue_base-demo03"):
        run(api_spec(registry), prompt_files, settings, Endpoint(stub.base_url, "stub-model"))
    assert not (tmp_path / "out").exists()  # no output is written for a failed job
    with sqlite3.connect(tmp_path / "cache" / "gpt-4o-mini.sqlite") as db:
        kept = db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
    assert kept == 65  # the answers; the failed request is not cached
    resumed = run(
        api_spec(registry), prompt_files, settings_for(tmp_path, concurrency=1), Endpoint(stub.base_url, "stub-model")
    )
    assert resumed["sent"] == 1 and resumed["failed"] == 0


def results_tree(tmp_path: Path, prompt_files: list[PromptFile]) -> Layout:
    """A results tree holding the benchmark's prompts where the workflow puts them (the studies without items)."""
    results = Layout(str(tmp_path / "results"))
    for file in prompt_files:
        Path(results.prompts(file.variant, file.name)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(file.prompts, results.prompts(file.variant, file.name))
    for cell in RunCells(default_config()).studies("gpt-4o-mini"):
        Path(results.prompts(cell.variant, cell.task)).parent.mkdir(parents=True, exist_ok=True)
        Path(results.prompts(cell.variant, cell.task)).write_text("", encoding="utf-8")
    return results


def generate_command(stub, results: Layout, tmp_path: Path, **generation) -> list[str]:
    """``h2htalk generate`` of gpt-4o-mini against the stub, its cache in ``tmp_path``."""
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model_registry": str(REPO_ROOT / "config" / "models.yaml"),
                "generation": {**generation, "cache_dir": str(tmp_path / "cache")},
            }
        ),
        encoding="utf-8",
    )
    return [
        "generate", "--model", "gpt-4o-mini", "--config", str(config), "--results", str(results.root),
        "--base-url", stub.base_url,
    ]  # fmt: skip


def test_kill_and_resume_sends_only_what_is_missing(stub, prompt_files, tmp_path):
    stub.latency_s = 0.15
    results = results_tree(tmp_path, prompt_files)
    options = generate_command(stub, results, tmp_path, retries=0, decoding={"seed": 7})
    command = [sys.executable, "-m", "h2htalk", *options, "--concurrency", "2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while sum(stub.answered.values()) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    with sqlite3.connect(tmp_path / "cache" / "gpt-4o-mini.sqlite") as db:
        kept = db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
    assert 0 < kept < 66
    answers = Path(results.generations(Cell("gpt-4o-mini", "nosap", "itinerary_advanced")))
    assert not answers.exists()
    sent_before = sum(stub.requests.values())
    stub.latency_s = 0.0
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sum(stub.requests.values()) - sent_before == 66 - kept
    assert len(read_jsonl(answers)) == 3


def test_api_key_comes_from_the_environment_and_is_never_written(stub, registry, prompt_files, tmp_path, monkeypatch):
    spec = {**api_spec(registry), "api": {**api_spec(registry)["api"], "base_url": stub.base_url}}
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EngineError, match="environment variable OPENAI_API_KEY"), open_endpoint(spec):
        pass
    secret = "sk-test-" + hashlib.sha256(b"secret").hexdigest()[:24]
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    with open_endpoint(spec) as endpoint:
        assert secret not in repr(endpoint)
    summary = run(spec, prompt_files, settings_for(tmp_path))
    assert summary["sent"] == 66
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(encoding="utf-8")
    assert secret not in json.dumps(summary)


def test_vllm_command_from_the_registry(registry):
    spec = registry["qwen2.5-72b-instruct"]
    command = vllm_command(spec, port=8123, seed=5)
    assert command[:3] == ["vllm", "serve", "Qwen/Qwen2.5-72B-Instruct"]
    joined = " ".join(command)
    assert "--tensor-parallel-size 4" in joined and "--enable-prefix-caching" in joined
    assert "--max-model-len 8192" in joined and "--served-model-name qwen2.5-72b-instruct" in joined
    assert "--port 8123" in joined and "--seed 5" in joined
    long_context = vllm_command(registry["qwen2.5-72b-instruct-128k"], port=1)
    assert "--max-model-len 131072" in " ".join(long_context) and "--hf-overrides" in long_context
    lora = {**registry["qwen2.5-7b-instruct-lora"], "lora": {"path": "/adapters/h2h", "rank": 16}}
    joined = " ".join(vllm_command(lora, port=1))
    assert "--enable-lora --lora-modules qwen2.5-7b-instruct-lora=/adapters/h2h --max-lora-rank 16" in joined
    with pytest.raises(EngineError, match="LoRA adapter path is not configured"):
        vllm_command(registry["qwen2.5-7b-instruct-lora"], port=1)
    assert "--trust-remote-code" in vllm_command(registry["chatglm3-6b"], port=1)
    assert "--reasoning-parser deepseek_r1" in " ".join(vllm_command(registry["deepseek-r1-distill-qwen-7b"], 1))
    assert "--reasoning-parser" not in vllm_command(spec, port=1)


def test_reasoning_model_answers_are_split_and_get_a_thinking_budget(stub, registry, prompt_files, tmp_path):
    stub.responder = lambda user: f"<think>她说：{user[-12:]}</think>\n\n{echo_answer(user)}"
    spec = registry["deepseek-r1"]
    run(spec, prompt_files, settings_for(tmp_path), Endpoint(stub.base_url, "stub-model"))
    record = read_jsonl(tmp_path / "out" / "sap" / "dialogue_base.jsonl")[0]
    user = read_jsonl(tmp_path / "prompts" / "sap" / "dialogue_base.jsonl")[0]["messages"][1]["content"]
    assert record["response"] == echo_answer(user)  # what gets scored: the answer alone
    assert record["reasoning"] == f"她说：{user[-12:]}" and record["flags"] == []
    assert record["provenance"]["params"]["max_tokens"] == 64 + spec["reasoning"]["max_new_tokens"]


def test_safety_conversations_continue_from_the_models_own_answers(stub, registry, tmp_path):
    from h2htalk.studies.data import read_scenarios, write_study_inputs

    scenario = next(s for s in read_scenarios("safety") if len(s["turns"]) >= 3)
    scenarios = tmp_path / "scenarios.jsonl"
    scenarios.write_text(json.dumps(scenario, ensure_ascii=False) + "\n", encoding="utf-8")
    files = []
    for variant in VARIANTS:
        prompts, items = tmp_path / f"{variant}.prompts.jsonl", tmp_path / f"{variant}.items.jsonl"
        write_study_inputs("safety", variant, [scenarios], prompts, items, StudySample(None, None, seed=7))
        files.append(PromptFile(variant, "safety", prompts, tmp_path / "out" / f"{variant}.jsonl"))
    stub.faults.scripted = {scenario["turns"][1]["user"]: ["400"]}  # one variant's second turn is refused
    settings = settings_for(tmp_path, for_studies=True, max_failure_rate=0.5)
    summary = run(api_spec(registry), files, settings, Endpoint(stub.base_url, "m"))
    turns = len(scenario["turns"])
    assert summary["requests"] == 2 + 2 + 1 * (turns - 2)  # the refused conversation sends nothing after it
    by_variant = {variant: read_jsonl(tmp_path / "out" / f"{variant}.jsonl") for variant in VARIANTS}
    items = read_jsonl(tmp_path / "sap.items.jsonl")
    ended, whole = sorted(by_variant.values(), key=lambda records: sum(bool(r["failure"]) for r in records))[::-1]
    assert [r["id"] for r in whole] == [i["id"] for i in items]  # one generation per turn, ids as the items'
    for index, record in enumerate(whole):
        said = [m for m in record["conversation"] if m["role"] == "assistant"]
        assert [m["content"] for m in said] == [r["response"] for r in whole[:index]]  # its own answers, not references
        assert record["conversation"][-1] == {"role": "user", "content": scenario["turns"][index]["user"]}
    assert [r["failure"] and r["failure"]["kind"] for r in ended] == [
        None, "client_error", *["conversation_ended"] * (turns - 2)
    ]  # fmt: skip


def test_registry_has_the_papers_fifty_models(registry):
    import csv

    with open(REPO_ROOT / "config" / "paper" / "table2.csv", encoding="utf-8") as handle:
        paper = [row["model"] for row in csv.DictReader(handle)]
    names = {entry["display_name"] for entry in registry.values()}
    assert len(paper) == 50 and set(paper) <= names
    for entry in registry.values():
        if entry["display_name"].endswith("-LoRA"):
            assert "lora" in entry
        if entry["engine"] == "vllm" and not entry.get("weights"):
            assert entry["hf_id"] and entry["gpus"] >= 1
    assert registry["qwen2.5-coder-0.5b-instruct-q4km"]["engine"] == "llamacpp"


def test_llamacpp_command():
    settings = {"threads": 2, "n_ctx": 2048, "chat_format": None, "flash_attn": True}
    command = llamacpp_command("/m/model.gguf", 9000, settings)
    assert command[1:3] == ["-m", "llama_cpp.server"]
    threads = str(min(2, available_cores()))  # at most the cores this process may use
    assert command[command.index("--n_threads") + 1] == threads and command[command.index("--port") + 1] == "9000"
    assert command[command.index("--n_threads_batch") + 1] == threads
    assert command[command.index("--logits_all") + 1] == "false"  # logits for the last token only
    assert command[command.index("--flash_attn") + 1] == "true"
    without = llamacpp_command("/m/model.gguf", 9000, {**settings, "flash_attn": False})
    assert without[without.index("--flash_attn") + 1] == "false"


def test_provision_from_a_url_checks_the_sha256(fixture_server, tmp_path):
    payload = (fixture_server.root / "dialogue_base.jsonl").read_bytes()
    url = fixture_server.base_url + "/x/y/data/dialogue_base.jsonl"
    good = {"source": "url", "url": url, "sha256": hashlib.sha256(payload).hexdigest()}
    record = provision_gguf(good, tmp_path / "m.gguf")
    assert (tmp_path / "m.gguf").read_bytes() == payload and record["size"] == len(payload)
    bad = {**good, "sha256": "0" * 64}
    with pytest.raises(ProvisionError, match="does not match the expected"):
        provision_gguf(bad, tmp_path / "n.gguf")
    assert not (tmp_path / "n.gguf").exists()


def test_provision_names_a_missing_part_package(tmp_path):
    spec = {"source": "pypi_parts", "parts": [{"module": "no_such_model_part", "file": "a.bin"}]}
    with pytest.raises(ProvisionError, match="'no_such_model_part' is not installed"):
        provision_gguf(spec, tmp_path / "m.gguf")


def test_server_engine_failing_to_start_is_reported(tmp_path):
    settings = {"threads": 1, "n_ctx": 512, "chat_format": None, "flash_attn": True}
    spec = {"name": "broken", "engine": "llamacpp", "llamacpp": settings}
    spec["startup_timeout_s"] = 30
    missing = tmp_path / "missing.gguf"
    with (
        pytest.raises(EngineError, match=r"exited \(exit status 1\) before it was ready"),
        open_endpoint(spec, model_file=str(missing), log_path=tmp_path / "server.log"),
    ):
        pass
    assert "llama_cpp.server" in (tmp_path / "server.log").read_text()


MESSAGES = [{"role": "system", "content": "你是"}, {"role": "user", "content": "你好"}]
PARAMS = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 64, "seed": 1234}


@pytest.mark.parametrize(
    ("name", "identity", "key"),
    [
        (
            "qwen2.5-coder-0.5b-instruct-q4km",
            {"name": "qwen2.5-coder-0.5b-instruct-q4km", "engine": "llamacpp",
             "model_id": "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
             "revision": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "lora": None},
            "b11d593379e9555a09c5aebf775b730d9bd31bf3ee7c8f99c47df00ee6c36684",
        ),
        (
            "qwen2-7b-instruct",
            {"name": "qwen2-7b-instruct", "engine": "vllm", "model_id": "Qwen/Qwen2-7B-Instruct", "revision": None,
             "lora": None},
            "e0f52c1e0a11f051712f280ac5271240cd540966c0a16072b496c46e09d97ba1",
        ),
    ],
)  # fmt: skip
def test_local_and_vllm_request_keys_are_those_of_earlier_runs(registry, name, identity, key):
    """A cache filled by an earlier run is still hit: the identity and the key of a fixed request, as they were."""
    assert model_identity(registry[name]) == identity
    assert chat_request(registry[name], "x", MESSAGES, PARAMS).key == key


def test_the_laptop_models_request_params_are_those_of_earlier_runs(registry):
    settings = GenerationSettings.from_config(
        load_config([REPO_ROOT / "config" / "config.yaml", REPO_ROOT / "config" / "local.yaml"])
    )
    params = request_params(registry["qwen2.5-coder-0.5b-instruct-q4km"], settings, "itinerary_advanced")
    assert json.dumps(params) == '{"temperature": 0.0, "top_p": 1.0, "max_tokens": 384, "seed": 1234}'


def at(spec: dict, base_url: str, **entry) -> dict:
    return {**spec, "api": {**spec["api"], "base_url": base_url}, **entry}


def test_an_api_models_endpoint_is_part_of_its_request_keys_unless_its_revision_is_pinned(registry):
    spec = api_spec(registry)
    here, there = at(spec, "http://127.0.0.1:8000/v1"), at(spec, "https://api.example.org/v1/")
    key = chat_request(here, "x", MESSAGES, PARAMS).key
    assert chat_request(there, "x", MESSAGES, PARAMS).key != key
    assert chat_request(at(spec, "http://127.0.0.1:8000/v1/"), "x", MESSAGES, PARAMS).key == key  # the same URL
    pinned = [
        at(spec, url, revision="2024-07-18") for url in ("http://127.0.0.1:8000/v1", "https://api.example.org/v1")
    ]
    assert len({chat_request(p, "x", MESSAGES, PARAMS).key for p in pinned}) == 1  # the same model, another host
    assert (
        "endpoint" not in model_identity(pinned[0]) and model_identity(here)["endpoint"] == "http://127.0.0.1:8000/v1"
    )


def test_an_api_model_moved_to_a_dead_endpoint_sends_its_requests(stub, registry, prompt_files, tmp_path, monkeypatch):
    """Pointed at another endpoint, a model's cached answers are not its answers there: the requests are sent,
    and a dead endpoint fails the job (it used to report "66 cached, 0 to send" and succeed)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = settings_for(tmp_path, retries=0)
    assert run(at(api_spec(registry), stub.base_url), prompt_files, settings)["sent"] == 66
    with pytest.raises(Exception, match=r"gpt-4o-mini: 66 of 66 requests failed"):
        run(at(api_spec(registry), f"http://127.0.0.1:{free_port()}/v1"), prompt_files, settings)


def test_what_the_server_says_it_serves_is_recorded_and_a_change_is_warned(
    stub, registry, prompt_files, tmp_path, caplog
):
    endpoint = Endpoint(stub.base_url, "stub-model")
    stub.system_fingerprint = "fp_one"
    summary = run(api_spec(registry), prompt_files, settings_for(tmp_path), endpoint)
    served = {"model": "stub-model", "root": None, "system_fingerprint": "fp_one"}
    assert summary["served_by"] == [served]
    assert read_jsonl(prompt_files[0].out)[0]["provenance"]["served_by"] == served
    stub.system_fingerprint = "fp_two"  # the backend changed between runs
    changed = settings_for(tmp_path, max_new_tokens={"dialogue_base": 64, "itinerary_middle": 99})
    assert run(api_spec(registry), prompt_files, changed, endpoint)["sent"] == 6
    warning = next(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert "system_fingerprint fp_two" in warning and "60 cached from earlier runs from model stub-model" in warning


def test_an_api_entry_without_a_key_talks_to_a_server_that_asks_for_none(stub, registry, prompt_files, tmp_path):
    (tmp_path / "models.yaml").write_text(
        yaml.safe_dump({"local-server": {"display_name": "Local server", "size_group": "local", "engine": "api",
                                         "api": {"base_url": stub.base_url, "model": "stub-model"}}}),
        encoding="utf-8",
    )  # fmt: skip
    spec = load_registry(tmp_path / "models.yaml")["local-server"]
    assert run(spec, prompt_files, settings_for(tmp_path))["sent"] == 66


def test_a_damaged_cache_names_its_file_and_what_deleting_it_costs(stub, prompt_files, tmp_path, capsys):
    command = generate_command(stub, results_tree(tmp_path, prompt_files), tmp_path)
    assert main(command) == 0
    cache = tmp_path / "cache" / "gpt-4o-mini.sqlite"
    with open(cache, "r+b") as handle:  # a disk fault: pages overwritten past the header
        handle.seek(4096)
        handle.write(b"\xa5" * 4096 * 3)
    capsys.readouterr()
    assert main(command) == 2
    error = capsys.readouterr().err
    assert f"{cache}: this cache is damaged" in error and "Traceback" not in error
    assert "It holds the answers of model gpt-4o-mini" in error
    assert "delete it, and the next run sends again every request to gpt-4o-mini that a job needs" in error
