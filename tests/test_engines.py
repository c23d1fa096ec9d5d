"""Engines behind one interface: a test-only engine, added as one module adds one, runs through generation."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from h2htalk.config import default_config, load_registry, runnable_problem
from h2htalk.errors import ConfigError
from h2htalk.generation.generate import PromptFile, generate_model
from h2htalk.instances.sources import demo_instances
from h2htalk.io import read_jsonl
from h2htalk.llm.calls import EngineOptions, model_identity
from h2htalk.llm.engines import ENGINES, Endpoint, Engine, ServeOptions, engine_of, register
from h2htalk.prompts.render import write_prompts
from h2htalk.settings import VARIANTS, GenerationSettings, StudySample

from .standins.answers import echo_answer
from .standins.loopback import LoopbackAPI

LOOPBACK_SCHEMA = yaml.safe_load(
    """
    properties:
      loopback:
        description: The loopback engine's settings.
        type: object
        additionalProperties: false
        properties:
          delay_s: {type: number, minimum: 0, default: 0}
    then:
      required: [loopback]
      properties:
        gpus: {default: 0}
        resources: {properties: {mem_mb: {default: 1000}}}
    """
)


class Loopback(Engine):
    """Its server is the test suite's loopback API stand-in, started and stopped with the endpoint."""

    name = "loopback"
    schema = LOOPBACK_SCHEMA

    def __init__(self) -> None:
        self.started = 0
        self.api: LoopbackAPI | None = None  # the last server started

    def model_id(self, spec: dict[str, Any]) -> str | None:
        return "stub-model"

    @contextlib.contextmanager
    def endpoint(self, spec: dict[str, Any], options: ServeOptions) -> Iterator[Endpoint]:
        with LoopbackAPI(latency_s=spec["loopback"]["delay_s"]) as api:
            self.started += 1
            self.api = api
            yield Endpoint(api.base_url, "stub-model")


class OneSlot(Loopback):
    """The loopback engine as a server that works on one request at a time, as llama_cpp.server does."""

    slots = 1


@contextlib.contextmanager
def registered(engine: Loopback) -> Iterator[Loopback]:
    register(engine)
    try:
        yield engine
    finally:
        del ENGINES[engine.name]


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    with registered(Loopback()) as engine:
        yield engine


ENTRY = {"display_name": "Loopback", "size_group": "local", "engine": "loopback"}


def write_registry(path, **entries) -> str:
    path.write_text(yaml.safe_dump(entries), encoding="utf-8")
    return str(path)


def test_an_unregistered_engine_is_not_in_the_registry_schema(tmp_path):
    with pytest.raises(ConfigError, match=r"'loopback' is not one of \['llamacpp', 'vllm', 'api', 'baseline'\]"):
        load_registry(write_registry(tmp_path / "models.yaml", echo=ENTRY))


def test_a_registered_engine_brings_its_keys_requirements_and_defaults(loopback, tmp_path):
    with pytest.raises(ConfigError, match=r"echo: 'loopback' is a required property"):
        load_registry(write_registry(tmp_path / "models.yaml", echo=ENTRY))
    with pytest.raises(ConfigError, match=r"'echo.loopback.delay_s': -1 is less than the minimum"):
        load_registry(write_registry(tmp_path / "models.yaml", echo={**ENTRY, "loopback": {"delay_s": -1}}))
    spec = load_registry(write_registry(tmp_path / "models.yaml", echo={**ENTRY, "loopback": {}}))["echo"]
    assert spec["loopback"] == {"delay_s": 0} and spec["gpus"] == 0 and spec["resources"]["mem_mb"] == 1000
    assert engine_of(spec) is loopback and runnable_problem(spec) is None
    assert engine_of(spec).threads(spec) == 1 and engine_of(spec).downloads(spec) == []  # the interface's defaults
    assert model_identity(spec) == {
        "name": "echo", "engine": "loopback", "model_id": "stub-model", "revision": None, "lora": None
    }  # fmt: skip


def test_the_test_engine_runs_through_generation(loopback, tmp_path):
    spec = load_registry(write_registry(tmp_path / "models.yaml", echo={**ENTRY, "loopback": {"delay_s": 0.01}}))
    files = []
    for variant in VARIANTS:
        path = tmp_path / "prompts" / variant / "dialogue_base.jsonl"
        write_prompts(demo_instances("dialogue_base"), variant, path)
        files.append(PromptFile(variant, "dialogue_base", path, tmp_path / "out" / variant / "dialogue_base.jsonl"))
    generation = {"cache_dir": str(tmp_path / "cache"), "max_new_tokens": {"dialogue_base": 32}}
    settings = GenerationSettings.from_config(default_config({"generation": generation}))
    engines = EngineOptions(settings.client, settings.seed)
    summary = generate_model(spec["echo"], files, settings, engines)
    assert summary["sent"] == summary["requests"] > 0 and summary["engine"] == "loopback"
    assert loopback.started == 1  # started once for the job, and stopped with it
    for file in files:
        prompts, records = read_jsonl(file.prompts), read_jsonl(file.out)
        assert [r["response"] for r in records] == [echo_answer(p["messages"][1]["content"]) for p in prompts]
        assert all(r["provenance"]["engine"] == "loopback" for r in records)
    assert generate_model(spec["echo"], files, settings, engines)["sent"] == 0
    assert loopback.started == 1  # everything cached: no server started


def test_a_job_sends_a_server_it_starts_no_more_requests_at_once_than_it_works_on(tmp_path):
    """generation.concurrency is what a batching engine gets at once; a server of the job's own that works on one
    request at a time (llama_cpp.server) gets one, whatever the setting: a request queued there gains nothing, and
    the server would answer it on another thread, whose idle OpenMP team then spins beside the one decoding."""
    in_flight = {}
    for engine in (Loopback(), OneSlot()):
        with registered(engine):
            entry = {**ENTRY, "loopback": {"delay_s": 0.05}}
            spec = load_registry(write_registry(tmp_path / "models.yaml", echo=entry))["echo"]
            files = []
            for variant in VARIANTS:
                path = tmp_path / "prompts" / variant / "dialogue_base.jsonl"
                write_prompts(demo_instances("dialogue_base"), variant, path)
                out = tmp_path / type(engine).__name__ / variant / "dialogue_base.jsonl"
                files.append(PromptFile(variant, "dialogue_base", path, out))
            generation = {"cache_dir": str(tmp_path / type(engine).__name__ / "cache"), "concurrency": 4}
            settings = GenerationSettings.from_config(default_config({"generation": generation}))
            summary = generate_model(spec, files, settings, EngineOptions(settings.client, settings.seed))
            assert summary["sent"] == 6
            in_flight[type(engine).__name__] = engine.api.stats.max_in_flight
    assert in_flight["Loopback"] > 1 and in_flight["OneSlot"] == 1


def test_a_one_slot_engine_takes_each_conversation_to_its_end_before_the_next(tmp_path):
    """A server that works on one request at a time keeps only the last request's tokens: its conversations go one
    after another (after every first turn), so each turn finds its conversation's earlier turns still there; the
    answers are those of the rounds a batching engine gets."""
    from h2htalk.studies.data import read_scenarios, write_study_inputs

    chosen = [s for s in read_scenarios("safety") if len(s["turns"]) >= 3][:2]
    scenarios = tmp_path / "scenarios.jsonl"
    scenarios.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in chosen), encoding="utf-8")
    prompts, items = tmp_path / "sap.prompts.jsonl", tmp_path / "sap.items.jsonl"
    write_study_inputs("safety", "sap", [scenarios], prompts, items, StudySample(None, None, seed=7))
    runs = {}
    for engine in (Loopback(), OneSlot()):
        with registered(engine):
            spec = load_registry(write_registry(tmp_path / "models.yaml", echo={**ENTRY, "loopback": {}}))["echo"]
            out = tmp_path / type(engine).__name__ / "sap.jsonl"
            generation = {"cache_dir": str(out.parent / "cache"), "concurrency": 2}
            settings = GenerationSettings.from_config(default_config({"generation": generation}), for_studies=True)
            generate_model(
                spec, [PromptFile("sap", "safety", prompts, out)], settings, EngineOptions(settings.client, 1)
            )
            runs[type(engine).__name__] = (list(engine.api.requests), read_jsonl(out))
    order, records = runs["OneSlot"]
    turns = [[t["user"] for t in s["turns"]] for s in chosen]
    assert set(order[:2]) == {turns[0][0], turns[1][0]}  # the first turns, sent together with the other prompts
    assert order[2:] == turns[0][1:] + turns[1][1:]  # then each conversation to its end
    batched_order, batched = runs["Loopback"]
    assert [set(batched_order[i : i + 2]) for i in (2, 4)] == [{turns[0][1], turns[1][1]}, {turns[0][2], turns[1][2]}]
    assert [r["response"] for r in records] == [r["response"] for r in batched] and len(records) == sum(map(len, turns))


def test_the_llamacpp_server_spins_briefly_unless_the_user_says_otherwise(monkeypatch):
    """Its OpenMP threads sleep soon instead of taking the cores from a process beside them (vLLM's server is left
    as it is); a user's own ``GOMP_SPINCOUNT`` wins, and the job's key is the server's whatever the environment
    holds."""
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setenv("API_KEY", "from-the-user")
    environment = ENGINES["llamacpp"].server_environment("job-key")
    assert environment["GOMP_SPINCOUNT"] == "1000" and environment["API_KEY"] == "job-key"
    assert "GOMP_SPINCOUNT" not in ENGINES["vllm"].server_environment("job-key")
    monkeypatch.setenv("GOMP_SPINCOUNT", "300000")
    assert ENGINES["llamacpp"].server_environment("job-key")["GOMP_SPINCOUNT"] == "300000"


def test_a_job_reaches_its_models_by_their_files_a_running_server_or_not_without_their_keys(tmp_path, monkeypatch):
    config = default_config()
    registry = load_registry(config["model_registry"])
    local, api = "qwen2.5-coder-0.5b-instruct-q4km", config["rubric_judge"]["model"]
    specs = {local: registry[local], api: registry[api]}
    variable = registry[api]["api"]["api_key_env"]
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigError, match=f"environment variable {variable} .* is not set"):
        EngineOptions.reaching(specs, config, lambda name: f"{tmp_path}/{name}.gguf")
    with pytest.raises(ConfigError, match="--base-url serves every model of this job"):
        EngineOptions.reaching(specs, config, str, base_url="http://127.0.0.1:9/v1")
    served = EngineOptions.reaching(specs, config, str, base_url="http://127.0.0.1:9/v1", served_model="x")
    assert served.endpoint == Endpoint("http://127.0.0.1:9/v1", "x") and served.model_files == {local: local}
    monkeypatch.setenv(variable, "sk-test")
    options = EngineOptions.reaching(specs, config, lambda name: f"{tmp_path}/{name}.gguf")
    assert options.endpoint is None and options.model_files == {local: f"{tmp_path}/{local}.gguf"}  # a file: llama.cpp
    assert options.seed == config["generation"]["decoding"]["seed"] and options.client.concurrency > 0
