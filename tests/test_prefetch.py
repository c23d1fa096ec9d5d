"""Prefetch: Hugging Face weights fetched before the compute jobs (from a hub on loopback), jobs then offline
at the commit the prefetch recorded; the paper DAG prefetches on the submit host."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from h2htalk.cli import build_parser
from h2htalk.cli.options import load_config
from h2htalk.config import embedder_settings, registry_entry

from .conftest import REPO_ROOT
from .standins.hf_hub import HubServer, Repo

WEIGHTS = Repo({"config.json": b'{"architectures": ["Qwen2ForCausalLM"]}', "model.safetensors": b"\0" * 4096})
ADAPTER = Repo({"adapter_config.json": b'{"r": 16}', "adapter_model.safetensors": b"\1" * 512})


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The hub on loopback; prefetch runs as a user runs it, in its own process, with HF_ENDPOINT set."""
    with HubServer({"org/tiny-chat": WEIGHTS, "org/tiny-lora": ADAPTER, "org/tiny-embedder": WEIGHTS}) as state:
        # a test that reads a record switches these on in this process: setenv first, so that the teardown
        # restores what was there before and later tests' subprocesses do not inherit an offline hub
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            monkeypatch.setenv(name, "0")
            monkeypatch.delenv(name)
        yield state


def prefetch(hub, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_ENDPOINT": hub.base_url, "HF_HOME": str(tmp_path / "hf-home")}
    stage = "prefetch-embedder" if "--embedder" in args else "prefetch-model"
    command = [sys.executable, "-m", "h2htalk", stage, *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.fixture
def configfile(tmp_path):
    registry = yaml.safe_load((REPO_ROOT / "config" / "models.yaml").read_text(encoding="utf-8"))
    registry["tiny-chat"] = {
        "display_name": "Tiny", "size_group": "open-1-8b", "engine": "vllm", "hf_id": "org/tiny-chat",
    }  # fmt: skip
    registry["tiny-lora"] = {**registry["tiny-chat"], "lora": {"path": "org/tiny-lora"}}
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(registry), encoding="utf-8")
    config = {
        "model_registry": str(tmp_path / "models.yaml"),
        "embedders": {"bge-m3": {"model": "org/tiny-embedder"}},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return tmp_path / "config.yaml"


def test_prefetch_records_the_commit_and_jobs_use_it_offline(hub, configfile, tmp_path):
    results = tmp_path / "results"
    result = prefetch(hub, tmp_path, "--config", str(configfile), "--results", str(results), "--model", "tiny-lora")
    assert result.returncode == 0, result.stderr
    record = json.loads((results / "prefetch" / "models" / "tiny-lora.json").read_text(encoding="utf-8"))
    weights, lora = record["downloads"]
    assert (weights["repo"], weights["revision"], weights["files"]) == ("org/tiny-chat", WEIGHTS.commit, 2)
    assert weights["requested_revision"] is None and weights["bytes"] == 4096 + 39
    assert (lora["role"], lora["revision"]) == ("lora", ADAPTER.commit)
    fetched = sum(hub.requests.values())

    args = build_parser().parse_args(
        ["generate", "--config", str(configfile), "--results", str(results), "--model", "tiny-lora"]
    )
    spec = registry_entry(load_config(args), "tiny-lora", args.results)
    assert spec["revision"] == WEIGHTS.commit  # vLLM gets --revision <commit>, and the request keys carry it
    assert Path(spec["lora"]["path"], "adapter_config.json").is_file()  # the adapter from the local snapshot
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    from huggingface_hub import hf_hub_download

    cached = hf_hub_download(
        "org/tiny-chat", "config.json", revision=WEIGHTS.commit, cache_dir=tmp_path / "hf-home" / "hub",
        local_files_only=True,
    )  # fmt: skip
    assert Path(cached).read_bytes() == WEIGHTS.files["config.json"] and sum(hub.requests.values()) == fetched


def test_prefetched_embedder_is_pinned_in_the_config(hub, configfile, tmp_path):
    results = tmp_path / "results"
    result = prefetch(hub, tmp_path, "--config", str(configfile), "--results", str(results), "--embedder", "bge-m3")
    assert result.returncode == 0, result.stderr
    args = build_parser().parse_args(
        ["score", "--config", str(configfile), "--results", str(results), "--model", "m", "--embedder", "bge-m3"]
    )
    record = args.results.path("prefetched_embedder", embedder="bge-m3")
    assert embedder_settings(load_config(args), "bge-m3", [record])["revision"] == WEIGHTS.commit


def test_a_repository_the_hub_does_not_have_fails_naming_it(hub, configfile, tmp_path):
    registry_path = tmp_path / "models.yaml"
    registry = yaml.safe_load(registry_path.read_text(encoding="utf-8"))
    registry["tiny-chat"]["hf_id"] = "org/missing"
    registry_path.write_text(yaml.safe_dump(registry), encoding="utf-8")
    results = tmp_path / "results"
    result = prefetch(hub, tmp_path, "--config", str(configfile), "--results", str(results), "--model", "tiny-chat")
    assert result.returncode == 2 and "h2htalk prefetch-model: error: cannot fetch org/missing@main" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (results / "prefetch" / "models" / "tiny-chat.json").exists()


def test_the_paper_dag_prefetches_on_the_submit_host_and_the_laptop_dag_does_not():
    def jobs(*configfiles: str) -> str:
        command = [sys.executable, "-m", "snakemake", "-n", "--configfiles", *configfiles,
                   "--config", "upstream_dir=/nonexistent"]  # fmt: skip
        result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    paper = jobs("config/config.yaml")
    assert "prefetch_model" in paper and "prefetch_embedder" in paper
    inputs = {  # model -> the inputs of its generate job
        re.search(r"wildcards: model=(\S+)", job)[1]: re.search(r"input: (.*)", job)[1]
        for job in paper.split("rule generate:")[1:]
    }
    assert "results/prefetch/models/llama-3.1-8b-instruct.json" in inputs["llama-3.1-8b-instruct"]  # vLLM weights
    assert "prefetch" not in inputs["claude-3.7"]  # an API model downloads nothing
    assert "prefetch" not in jobs("config/config.yaml", "config/local.yaml")
