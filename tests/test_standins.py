"""The stand-in engines (tests/standins): a vLLM look-alike, a multi-provider API look-alike and its loopback form.

They exist so the real client, caches, scoring and tables can run at paper scale without GPUs or API keys;
these tests hold them to the behaviour they stand in for: vLLM's flag parser and errors, its reasoning
parser, OpenAI-style errors, deterministic answers, rate limits the project's client must retry, DeepSeek's
content-risk refusals, and judge / reconstruction prompts answered with (mostly) parseable JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import importlib
import importlib.machinery
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import openai
import pytest
import yaml

from .conftest import REPO_ROOT
from .standins.answers import AnswerSettings, compose_answer, judge_offsets
from .standins.faults import FaultPlan
from .standins.messages import count_tokens, detect_request_kind
from .standins.protocol import split_reasoning
from .standins.services import ApiService
from .standins.sources import is_reasoning

STANDINS = Path(__file__).parent / "standins"
VLLM = STANDINS / "vllm"
API_SERVER = STANDINS / "api_server.py"


def _first_module(*names: str, attr: str | None = None) -> ModuleType:
    """The first of ``names`` that exists (and has ``attr``): modules may move between packages.

    Skips when none exists; a module that exists but fails to import is an error, not a skip.
    """
    for name in names:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
                continue
            raise
        if attr is None or hasattr(module, attr):
            return module
    pytest.skip(f"none of {names} can be imported" + (f" with {attr}" if attr else ""))


def _engines() -> ModuleType:
    return _first_module("h2htalk.llm.engines", attr="open_endpoint")


def _vllm_engine() -> ModuleType:
    return _first_module("h2htalk.llm.engines.vllm", attr="vllm_command")


def _servers() -> ModuleType:
    return _first_module("h2htalk.llm.engines.server", attr="free_port")


def _client() -> ModuleType:
    return _first_module("h2htalk.llm.client", "h2htalk.llm.client", attr="ChatClient")


def _reconstruct() -> ModuleType:
    return _first_module("h2htalk.instances.reconstruct", "h2htalk.reconstruct", attr="reconstruction_messages")


def _instances(attr: str) -> ModuleType:
    return _first_module("h2htalk.instances", "h2htalk.instance_schema", attr=attr)


def _required_fields() -> dict[str, tuple[str, ...]]:
    """Subtask -> the fields its instances need."""
    with contextlib.suppress(pytest.skip.Exception):
        return dict(_instances("required_fields").required_fields())
    subtasks = _first_module("h2htalk.subtasks", attr="SUBTASKS").SUBTASKS
    assert all(getattr(s, "fields", None) for s in subtasks), "subtasks do not list their fields"
    return {s.key: tuple(s.fields) for s in subtasks}


def _demo_instance(subtask: str) -> dict[str, Any]:
    with contextlib.suppress(pytest.skip.Exception):
        path = _instances("demo_instances_path").demo_instances_path(subtask)
        return json.loads(Path(path).read_text(encoding="utf-8").splitlines()[0])
    return _first_module("h2htalk.instances.sources", attr="demo_instances").demo_instances(subtask)[0]


def _vllm_cli() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("standin_vllm_cli", str(VLLM))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _registry() -> dict[str, dict[str, Any]]:
    """config/models.yaml as the project reads it (registry-wide defaults filled in, where it has a loader)."""
    path = REPO_ROOT / "config" / "models.yaml"
    config = _first_module("h2htalk.config")
    if hasattr(config, "load_registry"):
        data = config.load_registry(path)
    else:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {name: {**entry, "name": name} for name, entry in data.items() if isinstance(entry, dict)}


def _runnable_vllm_specs() -> list[dict[str, Any]]:
    """Every vllm registry entry that names weights, LoRA entries given an adapter path."""
    specs = []
    for spec in _registry().values():
        if spec.get("engine") != "vllm" or not spec.get("hf_id"):
            continue
        spec = copy.deepcopy(spec)
        if spec.get("lora") is not None and not spec["lora"].get("path"):
            spec["lora"]["path"] = f"/adapters/{spec['name']}"
        specs.append(spec)
    return specs


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STANDIN_")}
    env.update({"PYTHONUNBUFFERED": "1", **extra})
    return env


# --------------------------------------------------------------------------------------------------------------
# (a) the vllm stand-in accepts the project's own `vllm serve` commands and rejects what vLLM rejects


def test_every_registry_vllm_command_parses() -> None:
    cli, engines = _vllm_cli(), _vllm_engine()
    specs = _runnable_vllm_specs()
    kinds = {"plain": False, "trust_remote_code": False, "lora": False}
    assert len(specs) >= 20
    for spec in specs:
        command = engines.vllm_command(spec, 8123, seed=1234)
        assert command[:2] == ["vllm", "serve"]
        args = cli.parse(command[1:])
        assert args.model == spec["hf_id"]
        assert (args.host, args.port, args.seed) == ("127.0.0.1", 8123, 1234)
        assert args.tensor_parallel_size == spec.get("gpus", 1)
        assert args.enable_prefix_caching is True
        assert args.trust_remote_code is bool(spec.get("trust_remote_code"))
        if spec.get("lora"):
            kinds["lora"] = True
            assert args.enable_lora is True
            assert [m["name"] for m in args.lora_modules] == [spec.get("served_name") or spec["name"]]
            assert args.lora_modules[0]["path"] == spec["lora"]["path"]
            assert args.max_lora_rank == spec["lora"].get("rank", 64)
            cli.check(args)  # the rank is one vLLM allows
        else:
            assert args.served_model_name == [spec.get("served_name") or spec["name"]]
            kinds["trust_remote_code" if spec.get("trust_remote_code") else "plain"] = True
    assert all(kinds.values()), kinds


def test_registry_reasoning_entries_think_in_tags_unless_their_parser_is_null() -> None:
    assert is_reasoning({"reasoning": {}})  # the registry's "reasoning: {}" takes the defaults
    assert is_reasoning({"reasoning": {"parser": "qwen3"}})
    assert not is_reasoning({"reasoning": {"parser": None}})  # QwQ-Preview: plain-text thinking
    assert not is_reasoning({"display_name": "x"}) and not is_reasoning(None)


def test_reasoning_parser_choices_and_aliases() -> None:
    cli = _vllm_cli()
    args = cli.parse(["serve", "m", "--reasoning-parser", "deepseek_r1", "-tp", "4", "--max_model_len=4096"])
    assert (args.reasoning_parser, args.tensor_parallel_size, args.max_model_len) == ("deepseek_r1", 4, 4096)
    args = cli.parse(["serve", "m", "--no-enable-prefix-caching", "--served-model-name", "a", "b"])
    assert args.enable_prefix_caching is False and args.served_model_name == ["a", "b"]
    for parser in ("qwen3", "granite"):
        assert cli.parse(["serve", "m", "--reasoning-parser", parser]).reasoning_parser == parser


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--foo"], "vllm: error: unrecognized arguments: --foo"),
        (["--tensor-parallel-size", "2", "--bogus-flag"], "vllm: error: unrecognized arguments: --bogus-flag"),
        (["--reasoning-parser", "r1"], "invalid choice: 'r1'"),
        (["--dtype", "fp17"], "invalid choice: 'fp17'"),
    ],
)
def test_rejected_flags_exit_2_like_vllm(extra: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, str(VLLM), "serve", "Qwen/Qwen2-7B-Instruct", "--port", "1", *extra],
        capture_output=True, text=True, env=_env(STANDIN_STARTUP_S="30"), timeout=30,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert result.stderr.splitlines()[0].startswith("usage: vllm")


def test_executable_on_path_parses_project_command(tmp_path: Path) -> None:
    assert os.access(VLLM, os.X_OK), "tests/standins/vllm must be executable"
    assert VLLM.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n")
    spec = next(s for s in _runnable_vllm_specs() if s.get("trust_remote_code"))
    command = _vllm_engine().vllm_command(spec, 9000)
    env = _env(STANDIN_PARSE_ONLY="1", PATH=f"{STANDINS}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode == 0, result.stderr
    parsed = json.loads(result.stdout)
    assert parsed["model"] == spec["hf_id"] and parsed["trust_remote_code"] is True and parsed["port"] == 9000


def test_startup_errors_vllm_raises() -> None:
    cli = _vllm_cli()
    with pytest.raises(SystemExit):
        cli.check(cli.parse(["serve", "m", "--lora-modules", "a=/x"]))  # adapters without --enable-lora
    with pytest.raises(SystemExit):
        cli.check(cli.parse(["serve", "m", "--enable-lora", "--max-lora-rank", "48"]))


# --------------------------------------------------------------------------------------------------------------
# (b) the vllm stand-in as a server


def _wait_ready(url: str, process: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, f"stand-in exited with {process.returncode}"
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"{url} not ready in {timeout_s} s")


@contextlib.contextmanager
def _vllm_server(args: list[str], tmp_path: Path, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = _free_port()
    log = open(tmp_path / f"vllm-{port}.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, str(VLLM), "serve", *args, "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env=_env(**env), start_new_session=True,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.terminate()
        try:
            assert process.wait(timeout=5) == 0, "SIGTERM must stop the stand-in cleanly"
        finally:
            if process.poll() is None:
                process.kill()
            log.close()


@pytest.fixture
def reasoning_registry(tmp_path: Path) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(
        "r1-distill:\n  engine: vllm\n  hf_id: deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B\n"
        "  reasoning: {parser: deepseek_r1, max_new_tokens: 2048}\n  max_model_len: 8192\n",
        encoding="utf-8",
    )
    return path


def _ask(client: openai.OpenAI, model: str, text: str, seed: int = 1, max_tokens: int = 300) -> Any:
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": text}], max_tokens=max_tokens, seed=seed, temperature=0
    )


@pytest.mark.slow
def test_vllm_standin_thinks_with_and_without_reasoning_parser(tmp_path: Path, reasoning_registry: Path) -> None:
    model = "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
    prompts = [f"今天第{i}次想你了。" for i in range(12)]
    env = {"STANDIN_STARTUP_S": "1.0", "STANDIN_REGISTRY": str(reasoning_registry)}
    with _vllm_server([model, "--served-model-name", "r1"], tmp_path, **env) as (base, process):
        port = int(base.rsplit(":", 1)[1])
        with pytest.raises(ConnectionRefusedError):  # still "loading the model": not listening yet
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        _wait_ready(f"{base}/health", process)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["r1"]
        plain = {p: _ask(client, "r1", p) for p in prompts}
        again = _ask(client, "r1", prompts[0])
        with pytest.raises(openai.NotFoundError) as missing:
            _ask(client, "not-served", prompts[0])
        assert "does not exist" in str(missing.value)
    assert again.choices[0].message.content == plain[prompts[0]].choices[0].message.content
    assert again.usage.completion_tokens == plain[prompts[0]].usage.completion_tokens
    finished = {p: r for p, r in plain.items() if r.choices[0].finish_reason == "stop"}
    assert len(finished) >= len(prompts) // 2
    assert len({r.choices[0].message.content for r in plain.values()}) == len(prompts)  # answers differ
    for reply in plain.values():
        content = reply.choices[0].message.content
        assert content.startswith("<think>")
        assert reply.usage.prompt_tokens > 0 and 0 < reply.usage.completion_tokens <= 300
    for reply in finished.values():
        thinking, _, answer = reply.choices[0].message.content.partition("</think>")
        assert thinking.strip() != "<think>" and answer.strip()

    with _vllm_server([model, "--served-model-name", "r1", "--reasoning-parser", "deepseek_r1"], tmp_path, **env) as (
        base,
        process,
    ):
        _wait_ready(f"{base}/health", process)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        parsed = {p: _ask(client, "r1", p) for p in finished}
    for prompt, reply in parsed.items():
        message = reply.choices[0].message
        assert "<think>" not in message.content and "</think>" not in message.content
        assert message.reasoning_content  # vLLM 0.8.x's field
        # the same generation, split by the parser
        split = f"<think>{message.reasoning_content}</think>{message.content}"
        assert plain[prompt].choices[0].message.content == split


@pytest.mark.slow
def test_project_engine_serves_lora_entry_through_standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The project's own open_endpoint starts `vllm serve` (the stand-in on PATH), waits, talks, stops it."""
    engines, client_module = _engines(), _client()
    spec = next(s for s in _runnable_vllm_specs() if s.get("lora"))
    spec["startup_timeout_s"] = 30
    monkeypatch.setenv("PATH", f"{STANDINS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_STARTUP_S", "0.3")
    monkeypatch.delenv("STANDIN_REGISTRY", raising=False)
    log = tmp_path / "server.log"
    with engines.open_endpoint(spec, log_path=log, seed=5) as endpoint:
        auth = {"Authorization": f"Bearer {endpoint.api_key}"}  # the job's own key
        assert httpx.get(f"{endpoint.base_url}/models", timeout=5).status_code == 401
        models = httpx.get(f"{endpoint.base_url}/models", headers=auth, timeout=5).json()["data"]
        assert {m["id"] for m in models} == {spec["hf_id"], endpoint.model}
        adapter = next(m for m in models if m["id"] == endpoint.model)
        assert adapter["root"] == spec["lora"]["path"] and adapter["parent"] == spec["hf_id"]
        chat = client_module.ChatClient(
            endpoint.base_url, endpoint.model, api_key=endpoint.api_key, concurrency=8, timeout_s=60,
            retry=client_module.RetryPolicy(max_retries=2, backoff_base_s=0.01, backoff_max_s=0.05),
        )  # fmt: skip
        requests = [
            client_module.ChatRequest(f"k{i}", f"item{i}", [{"role": "user", "content": f"晚安{i}"}],
                                      {"max_tokens": 64, "seed": 5, "temperature": 0.0})
            for i in range(24)
        ]  # fmt: skip
        results: list[Any] = []
        asyncio.run(_run_all(chat, requests, results))
    assert len(results) == 24 and all(r.response for r in results)
    assert all(r.completion_tokens <= 64 and r.finish_reason in ("stop", "length") for r in results)
    assert "Starting vLLM API server" in log.read_text(encoding="utf-8")
    with pytest.raises(httpx.ConnectError):  # stopped with the block
        httpx.get(f"{endpoint.base_url}/models", timeout=2)


@pytest.mark.slow
def test_a_port_another_jobs_server_holds_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two jobs on one node can draw the same free port: the second server cannot bind it, and the other job's
    server (its own key) is never taken for ours; the job starts its server on another port."""
    engines = _engines()
    spec = next(s for s in _runnable_vllm_specs() if not s.get("lora"))
    spec["startup_timeout_s"] = 30
    monkeypatch.setenv("PATH", f"{STANDINS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_STARTUP_S", "0.3")
    monkeypatch.delenv("STANDIN_REGISTRY", raising=False)
    with _vllm_server([spec["hf_id"], "--api-key", "the-other-job"], tmp_path) as (other, process):
        _wait_ready(f"{other}/health", process)
        taken = int(other.rsplit(":", 1)[1])
        ports = iter([taken, _free_port()])
        monkeypatch.setattr(_servers(), "free_port", lambda: next(ports))
        log = tmp_path / "server.log"
        with engines.open_endpoint(spec, log_path=log, seed=5) as endpoint:
            assert f":{taken}/" not in endpoint.base_url
            auth = {"Authorization": f"Bearer {endpoint.api_key}"}
            assert httpx.get(f"{endpoint.base_url}/models", headers=auth, timeout=5).status_code == 200
        assert "address already in use" in log.read_text(encoding="utf-8").lower()
        assert process.poll() is None  # the other job's server is untouched


async def _run_all(chat: Any, requests: list[Any], results: list[Any]) -> None:
    try:
        await chat.run(requests, results.append)
    finally:
        await chat.close()


# --------------------------------------------------------------------------------------------------------------
# (c) the API stand-in


@contextlib.contextmanager
def _api_server(*flags: str) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(API_SERVER), "--port", "0", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), start_new_session=True,
    )  # fmt: skip
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("listening on http://"), (line, process.stderr.read() if process.poll() else "")
        yield line.removeprefix("listening on ")
    finally:
        process.terminate()
        try:
            assert process.wait(timeout=5) == 0
        finally:
            if process.poll() is None:
                process.kill()


def _post(base: str, provider: str, model: str, text: str, key: str | None = "sk-test", **params: Any) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 200, **params}
    return httpx.post(f"{base}/{provider}/v1/chat/completions", json=body, headers=headers, timeout=10)


@pytest.mark.slow
def test_api_standin_rate_limits_client_retries_and_deepseek_refuses_crisis_text() -> None:
    client_module = _client()
    registry = str(REPO_ROOT / "config" / "models.yaml")
    with _api_server("--registry", registry, "--rate-429", "0.4", "--rate-500", "0", "--fault-seed", "11") as base:
        assert _post(base, "openai", "gpt-4o-mini", "你好", key=None).status_code == 401
        missing = _post(base, "openai", "gpt-5-imaginary", "你好")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
        replies = (_post(base, "openai", "gpt-4o-mini", f"第{i}句") for i in range(40))
        limited = next(r for r in replies if r.status_code != 200)
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "1"
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"

        chat = client_module.ChatClient(
            f"{base}/openai/v1", "gpt-4o-mini", api_key="sk-test", concurrency=8, timeout_s=60,
            retry=client_module.RetryPolicy(max_retries=4, backoff_base_s=0.01, backoff_max_s=0.05),
        )  # fmt: skip
        requests = [
            client_module.ChatRequest(f"k{i}", f"item{i}", [{"role": "user", "content": f"陪我聊聊天{i}"}],
                                      {"max_tokens": 80, "seed": 3})
            for i in range(10)
        ]  # fmt: skip
        results: list[Any] = []
        asyncio.run(_run_all(chat, requests, results))
        assert len(results) == 10 and all(r.response for r in results)
        assert any(r.attempts > 1 for r in results), "a 429 must have been retried"

        crisis = [{"role": "user", "content": "我真的不想活了，好想结束生命。"}]
        for _ in range(3):
            refused = _post(base, "deepseek", "deepseek-reasoner", crisis[0]["content"])
            assert refused.status_code == 400
            assert refused.json()["error"]["message"] == "Content Exists Risk"
        deepseek = client_module.ChatClient(
            f"{base}/deepseek/v1", "deepseek-reasoner", api_key="sk-test", concurrency=1, timeout_s=60,
            retry=client_module.RetryPolicy(max_retries=2, backoff_base_s=0.01, backoff_max_s=0.05),
        )  # fmt: skip
        results = []
        asyncio.run(_run_all(deepseek, [client_module.ChatRequest("c", "crisis", crisis, {"max_tokens": 50})], results))
        assert results[0].failure.kind == "content_refusal" and "Content Exists Risk" in results[0].failure.message
        assert results[0].failure.permanent and results[0].attempts == 1  # a refusal is not retried
        # other providers answer the same text
        assert _post(base, "openai", "gpt-4o", crisis[0]["content"], seed=99).status_code in (200, 429)

        reasoned = next(
            r.json() for i in range(20)
            if (r := _post(base, "deepseek", "deepseek-reasoner", f"晚饭吃什么{i}", seed=1)).status_code == 200
            and r.json()["choices"][0]["finish_reason"] == "stop"
        )  # fmt: skip
        message = reasoned["choices"][0]["message"]
        assert message["reasoning_content"] and message["content"] and "<think>" not in message["content"]
        listed = httpx.get(f"{base}/deepseek/v1/models", headers={"Authorization": "Bearer k"}, timeout=5).json()
        assert "deepseek-reasoner" in {m["id"] for m in listed["data"]}

        stats = httpx.get(f"{base}/stats", timeout=5).json()
    assert stats["counts"]["http_429"] >= 2
    assert stats["counts"]["retried_ok"] >= 1
    assert stats["by_group"]["deepseek"]["http_400_content_risk"] == 4
    assert stats["counts"]["http_401"] == 1 and stats["counts"]["http_404"] == 1


def test_api_faults_are_deterministic_and_retries_succeed() -> None:
    def run(seed: int) -> list[str]:
        service = ApiService(faults=FaultPlan(seed=seed, rate_429=0.3, rate_500=0.1))
        statuses = []
        for i in range(60):
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}).encode()
            for _attempt in range(4):
                status = service.handle("POST", "/openai/v1/chat/completions", {"Authorization": "Bearer k"}, body)
                statuses.append(str(status.status))
                if status.status == 200:
                    break
            assert status.status == 200  # at most fault_attempts failures, then success
        return statuses

    first = run(5)
    assert first == run(5) != run(6)
    assert {"429", "500", "200"} <= set(first)


# --------------------------------------------------------------------------------------------------------------
# (d) answers: lengths, thinking, judge JSON, reconstruction JSON


def test_lengths_track_max_tokens_and_some_answers_are_cut() -> None:
    settings = AnswerSettings(corpus_dir=str(REPO_ROOT / "tests" / "no-such-corpus"))
    messages = [{"role": "user", "content": "陪我说说话。"}]
    answers = [compose_answer("m", messages, 200, seed, False, settings) for seed in range(400)]
    cut = [a for a in answers if a.finish_reason == "length"]
    assert 0.02 <= len(cut) / len(answers) <= 0.1
    assert all(a.completion_tokens == 200 and count_tokens(a.raw) <= 200 for a in cut)
    done = [a for a in answers if a.finish_reason == "stop"]
    assert all(count_tokens(a.raw) < 200 for a in done)
    assert 40 <= sum(count_tokens(a.raw) for a in done) / len(done) <= 170
    assert compose_answer("m", messages, 200, 3, False, settings) == answers[3]  # deterministic
    short = [compose_answer("m", messages, 40, seed, False, settings) for seed in range(50)]
    assert all(count_tokens(a.raw) <= 40 for a in short)


def test_reasoning_answers_cut_inside_thinking() -> None:
    settings = AnswerSettings(length_rate=0.5)
    messages = [{"role": "user", "content": "你在做什么？"}]
    answers = [compose_answer("r", messages, 120, seed, True, settings) for seed in range(80)]
    inside = [a for a in answers if a.finish_reason == "length" and "</think>" not in a.raw]
    assert inside and all(a.raw.startswith("<think>") for a in inside)
    raw = inside[0].raw
    assert split_reasoning(raw, "deepseek_r1") == (raw.removeprefix("<think>"), None)
    assert split_reasoning(raw, "qwen3") == (None, raw)  # qwen3 keeps an unterminated output as content
    assert split_reasoning(raw, None) == (None, raw)
    # a plain model behind the deepseek_r1 parser: all of it becomes reasoning, as in vLLM
    assert split_reasoning("（微笑）好。", "deepseek_r1") == ("（微笑）好。", None)
    prefilled = AnswerSettings(think_prefilled=True)
    answer = compose_answer("r", messages, 300, 1, True, prefilled)
    assert not answer.raw.startswith("<think>") and "</think>" in answer.raw


def _judge_prompts() -> dict[str, list[tuple[list[dict[str, str]], Any]]]:
    """50 prompts per judge kind, built by the project's own prompt builders, with the project's parsers."""
    rubric = _first_module("h2htalk.judge.rubric", attr="judge_messages")
    judges = _first_module("h2htalk.judge.study", attr="safety_messages")
    responses = [f"（微笑）今天{i}点我们一起去书店吧。" for i in range(50)]
    turns = [{"role": "user", "content": "遥斗，我最近总是睡不好。"}, {"role": "assistant", "content": "怎么了？"}]

    def score(text: str) -> bool:
        verdict = rubric.parse_verdict(text)
        return verdict.parse == "json"

    def safety(text: str) -> bool:
        return judges.parse_safety(text).score is not None

    def need(text: str) -> bool:
        return judges.parse_need(text).success is not None

    return {
        "score": [
            (rubric.judge_messages("itinerary_basic", "你是认真的助手。", "写今天的概述", r, "今天去看展。"), score)
            for r in responses
        ],
        "safety": [
            (judges.safety_messages({"category": "sleep", "turns": turns}, r), safety) for r in responses
        ],
        "need": [
            (judges.need_messages({"turns": turns, "need": "被陪伴"}, r), need) for r in responses
        ],
    }  # fmt: skip


def test_judge_prompts_get_mostly_parseable_json() -> None:
    settings = AnswerSettings()
    failures = 0
    for kind, prompts in _judge_prompts().items():
        parsed = 0
        for messages, parses in prompts:
            assert detect_request_kind(messages).kind == kind
            answer = compose_answer("judge", messages, 512, 7, False, settings)
            ok = parses(answer.raw)
            parsed += ok
            failures += not ok
            if answer.finish_reason == "length":
                assert not ok and answer.raw.lstrip().startswith("{")  # cut off mid-object
        assert parsed >= 0.8 * len(prompts), (kind, parsed)
    assert failures >= 1  # some cut-off or malformed answers


def test_judges_that_agree_read_one_score_from_the_judged_text_and_move_it_by_their_bias() -> None:
    """STANDIN_JUDGES: the reference judge gives each judged text the score that text earns; a biased judge that
    score plus its bias (noise 0 here), within the scale; judges apart (no setting) draw unrelated scores."""
    assert judge_offsets(" cheap = 0.8:0 ,, harsh=-1.5") == (("cheap", 0.8, 0.0), ("harsh", -1.5, 0.0))  # spaced, empty
    settings = AnswerSettings(judges=judge_offsets("cheap=0.8:0,harsh=-1.5:0"))
    apart = AnswerSettings()
    rubric = _first_module("h2htalk.judge.rubric", attr="judge_messages")
    judges = _first_module("h2htalk.judge.study", attr="safety_messages")
    moved = {"score": [], "safety": []}
    unrelated = 0
    for kind, prompts in _judge_prompts().items():
        if kind == "need":
            continue
        parse = rubric.parse_verdict if kind == "score" else judges.parse_safety
        for seed, (messages, _) in enumerate(prompts):
            read = {
                m: parse(compose_answer(m, messages, 512, seed, False, settings).raw).score
                for m in ("gpt", "cheap", "harsh")
            }
            if None in read.values():
                continue  # a cut-off or malformed verdict
            moved[kind].append((read["gpt"], read["cheap"], read["harsh"]))
            other = parse(compose_answer("gpt", messages, 512, seed + 1, False, settings).raw).score
            assert other in (None, read["gpt"])  # another seed: the same earned score
            first = parse(compose_answer("gpt", messages, 512, seed, False, apart).raw).score
            second = parse(compose_answer("cheap", messages, 512, seed, False, apart).raw).score
            unrelated += first is not None and second is not None and first != second
    for reference, cheap, harsh in moved["score"]:
        assert cheap == pytest.approx(min(5.0, reference + 0.8), abs=0.051)
        assert harsh == pytest.approx(max(0.0, reference - 1.5), abs=0.051)
    for reference, cheap, harsh in moved["safety"]:
        assert cheap == min(5, round(reference + 0.8)) and harsh == max(1, round(reference - 1.5))
    assert len(moved["score"]) >= 30 and len(moved["safety"]) >= 30  # 3 judges, each with ~10 % faulty verdicts
    assert len({r for r, _, _ in moved["score"]}) >= 10  # the earned score differs from text to text
    assert unrelated >= 40  # without the setting two judges disagree on most texts


def test_needs_judges_that_agree_read_the_judged_texts_verdicts_and_a_lenient_one_passes_more() -> None:
    """STANDIN_JUDGES for the needs judge: with no noise the reference judge and a harsh one (a bias below 0
    turns nothing) give each text the verdicts it earns; a lenient one (bias 2.5: half the missed needs read as
    met) agrees wherever the need was met and passes more; judges apart (no setting) disagree often."""
    settings = AnswerSettings(judges=judge_offsets("lenient=2.5:0,harsh=-1.5:0"))
    apart = AnswerSettings()
    judges = _first_module("h2htalk.judge.study", attr="safety_messages")
    read = []
    unrelated = 0
    for seed, (messages, _) in enumerate(_judge_prompts()["need"]):
        verdicts = {
            m: judges.parse_need(compose_answer(m, messages, 512, seed, False, settings).raw)
            for m in ("gpt", "lenient", "harsh")
        }
        first = judges.parse_need(compose_answer("gpt", messages, 512, seed, False, apart).raw).success
        second = judges.parse_need(compose_answer("lenient", messages, 512, seed, False, apart).raw).success
        unrelated += first is not None and second is not None and first != second
        if all(v.success is not None for v in verdicts.values()):
            read.append({m: (v.recognized, v.met) for m, v in verdicts.items()})
    assert len(read) >= 30
    assert all(r["gpt"] == r["harsh"] for r in read)
    assert all(r["lenient"][0] == r["gpt"][0] and (r["lenient"][1] or not r["gpt"][1]) for r in read)
    gained = sum(r["lenient"][1] and not r["gpt"][1] for r in read)
    missed_but_recognised = sum(r["gpt"][0] and not r["gpt"][1] for r in read)
    assert missed_but_recognised >= 3 and 1 <= gained <= missed_but_recognised
    assert unrelated >= 8


def test_reconstruction_prompts_get_fields_of_the_right_shape() -> None:
    reconstruct = _reconstruct()
    instances = _instances("check_instance")
    settings = AnswerSettings(corpus_dir=os.environ.get("H2HTALK_UPSTREAM_DIR"))
    valid = total = 0
    kinds = set()
    for subtask, wanted in _required_fields().items():
        for i in range(6):
            messages = reconstruct.reconstruction_messages(subtask, f"（点头）第{i}条参考回答。")
            kind = detect_request_kind(messages)
            assert kind.kind == "reconstruct" and set(kind.fields) == set(wanted), (subtask, kind)
            answer = compose_answer("gen", messages, 768, i, False, settings)
            total += 1
            try:
                fields = reconstruct.parse_fields(answer.raw, subtask)
            except ValueError:
                continue
            record = {
                "id": f"{subtask}-{i}", "subtask": subtask, "fields": fields, "reference": "参考",
                "source": {"kind": "demo"}, "flags": [], "provenance": {},
            }  # fmt: skip
            instances.check_instance(record, f"{subtask} {i}")  # every parseable answer has the schema's shapes
            valid += 1
            kinds.update(type(v).__name__ for v in fields.values())
    assert valid >= 0.8 * total
    assert kinds == {"str", "list"}


def test_plausibility_votes_and_chat_detection() -> None:
    reconstruct = _reconstruct()
    messages = reconstruct.verification_messages(_demo_instance("dialogue_base"))
    assert detect_request_kind(messages).kind == "plausible"
    answers = [compose_answer("j", messages, 256, s, False, AnswerSettings()).raw for s in range(40)]
    votes = [reconstruct.parse_vote(answer).keep for answer in answers]
    assert sum(v is not None for v in votes) >= 32 and {True, False} <= set(votes)
    assert detect_request_kind([{"role": "user", "content": "今天好累。"}]).kind == "chat"
