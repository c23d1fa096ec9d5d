"""Engines: how an OpenAI-compatible endpoint comes to exist for one model, for the length of one job.

- ``llamacpp``: ``python -m llama_cpp.server`` with a GGUF file on a free loopback port (the laptop default).
- ``vllm``: ``vllm serve`` inside the (SLURM) job: tensor parallel over the model's GPUs, prefix caching
  for the shared persona prompt, LoRA adapters for the "-LoRA" models.
- ``api``: a remote endpoint; the key comes from an environment variable named in the registry.

A server engine starts once per model per job, is waited on until it answers, and is stopped when the job
ends, also when it fails.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.hardware import available_cores


class EngineError(H2HTalkError):
    """An engine could not provide an endpoint."""


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # ends in /v1
    model: str  # the name requests carry in their "model" field
    api_key: str = "not-needed"

    def __repr__(self) -> str:  # never print the key
        return f"Endpoint(base_url={self.base_url!r}, model={self.model!r})"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def llamacpp_command(model_path: str, port: int, spec: dict[str, Any]) -> list[str]:
    threads = min(spec["threads"], available_cores())
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", model_path,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_threads", str(threads), "--n_threads_batch", str(threads),
        "--n_ctx", str(spec["n_ctx"]),
        # the server's default keeps logits for every prompt token (a 152k-wide row each): prompt evaluation
        # runs about a third slower for logprobs nothing here asks for (benchmarks/local_engine.py)
        "--logits_all", "false",
    ]  # fmt: skip
    if spec["chat_format"]:
        command += ["--chat_format", spec["chat_format"]]
    return command


def vllm_command(spec: dict[str, Any], port: int, seed: int | None = None) -> list[str]:
    """The ``vllm serve`` command for a registry entry (unit-tested; run only on GPU nodes)."""
    served = spec.get("served_name") or spec["name"]
    command = [
        "vllm", "serve", spec["hf_id"],
        "--host", "127.0.0.1",
        "--port", str(port),
        "--tensor-parallel-size", str(spec["gpus"]),
        "--enable-prefix-caching",
        "--max-model-len", str(spec["max_model_len"]),
        "--gpu-memory-utilization", str(spec["gpu_memory_utilization"]),
        "--dtype", spec["dtype"],
    ]  # fmt: skip
    if spec["revision"]:
        command += ["--revision", spec["revision"]]
    if spec["trust_remote_code"]:
        command.append("--trust-remote-code")
    if seed is not None:
        command += ["--seed", str(seed)]
    lora = spec.get("lora")
    if lora:
        if not lora.get("path"):
            raise EngineError(f"model {spec['name']}: LoRA adapter path is not configured (registry: lora.path)")
        # requests name the adapter, so the served name is the adapter's
        command += ["--enable-lora", "--lora-modules", f"{served}={lora['path']}"]
        command += ["--max-lora-rank", str(lora["rank"])]
    else:
        command += ["--served-model-name", served]
    reasoning = spec.get("reasoning") or {}
    if reasoning.get("parser"):  # the thinking comes back apart (reasoning_content), the content is the answer
        command += ["--reasoning-parser", reasoning["parser"]]
    command += [str(a) for a in spec["extra_args"]]
    return command


class PortTaken(EngineError):
    """The server could not bind its port: another process took it between our check and its start."""


PORT_TAKEN = ("address already in use", "errno 98")  # how vLLM (uvicorn) and llama_cpp.server say it
PORT_ATTEMPTS = 3


def _wait_until_ready(
    url: str, process: subprocess.Popen[bytes], timeout_s: float, log_path: Path | None, key: str
) -> None:
    """Wait until our own server answers ``url`` with our key. Another job's server on the same port (two jobs
    on one node can draw the same free port) answers 401 to our key and is never taken for ours."""
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = _log_tail(log_path)
            kind = PortTaken if any(sign in tail.lower() for sign in PORT_TAKEN) else EngineError
            raise kind(f"server exited ({_describe_status(process.returncode)}) before it was ready\n{tail}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(0.5)
    raise EngineError(f"server did not answer {url} within {timeout_s:.0f} s")


def _stop(process: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the server's process, before it starts: ask the kernel to kill it when the job's process dies,
    however it dies (a SIGKILL from the scheduler included), so no server outlives its job (Linux). SIGKILL,
    because a server finishing its current answer first would keep a core busy for a job that is gone."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@contextlib.contextmanager
def serve(command: list[str], ready_url: str, timeout_s: float, log_path: Path | None, key: str) -> Iterator[None]:
    """Run a server process until the block ends, however it ends.

    The server gets its own process group (a Ctrl-C in the terminal reaches the job, which then stops the
    server and keeps what it cached), and dies with the job's process if that is killed outright.
    """
    log_file = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - closed below
    try:
        process = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    except FileNotFoundError:
        raise EngineError(f"cannot start {command[0]!r}: not installed") from None
    try:
        _wait_until_ready(ready_url, process, timeout_s, log_path, key)
        yield
    except Exception as exc:
        status = process.poll()
        if status is not None and not isinstance(exc, EngineError):  # the server died under the requests
            raise EngineError(
                f"{command[0]} {' '.join(command[1:3])} died ({_describe_status(status)}): {exc}\n{_log_tail(log_path)}"
            ) from exc
        raise
    finally:
        _stop(process)
        if log_path:
            log_file.close()  # type: ignore[union-attr]


def _describe_status(status: int) -> str:
    if status >= 0:
        return f"exit status {status}"
    name = signal.Signals(-status).name
    if name == "SIGILL":
        return (
            "SIGILL, illegal instruction: this build uses CPU instructions the machine does not allow; rebuild"
            " llama-cpp-python with the portable CMAKE_ARGS given in the README"
        )
    return name


def _log_tail(log_path: Path | None) -> str:
    return log_path.read_text(errors="replace")[-2000:] if log_path and log_path.exists() else ""


@contextlib.contextmanager
def open_endpoint(
    spec: dict[str, Any], model_file: str | None = None, log_path: Path | None = None, seed: int | None = None
) -> Iterator[Endpoint]:
    """Provide an endpoint for the registry entry ``spec`` for the duration of the block."""
    engine = spec["engine"]
    if engine == "api":
        env = spec["api"]["api_key_env"]
        key = os.environ.get(env)
        if not key:
            raise EngineError(f"model {spec['name']}: environment variable {env} (the API key) is not set")
        yield Endpoint(spec["api"]["base_url"].rstrip("/"), spec["api"]["model"], key)
        return
    if engine == "llamacpp" and not model_file:
        raise EngineError(f"model {spec['name']}: the llamacpp engine needs a GGUF file")
    if engine not in ("llamacpp", "vllm"):
        raise EngineError(f"model {spec['name']}: unknown engine {engine!r}")
    key = secrets.token_hex(16)  # this job's server answers only this job
    with contextlib.ExitStack() as stack:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            if engine == "llamacpp":
                command = [*llamacpp_command(str(model_file), port, spec["llamacpp"]), "--api_key", key]
                timeout, name = spec["startup_timeout_s"], Path(str(model_file)).name
            else:
                command = [*vllm_command(spec, port, seed), "--api-key", key]
                timeout, name = spec["startup_timeout_s"], spec.get("served_name") or spec["name"]
            if log_path:
                log_path.parent.mkdir(parents=True, exist_ok=True)
                with open(log_path, "a", encoding="utf-8") as handle:
                    handle.write(f"$ {shlex.join(command[:-1])} <key>\n")
            try:
                stack.enter_context(serve(command, f"{base}/v1/models", timeout, log_path, key))
                break
            except PortTaken:
                if attempt == PORT_ATTEMPTS:
                    raise
        yield Endpoint(f"{base}/v1", name, key)


class LazyEndpoint:
    """An engine started on first use (only when some request is not cached) and stopped on exit."""

    def __init__(
        self, spec: dict[str, Any], model_file: str | None = None, log_path: Path | None = None, seed: int | None = None
    ) -> None:
        self._args = (spec, model_file, log_path, seed)
        self._stack = contextlib.ExitStack()
        self._endpoint: Endpoint | None = None

    def __call__(self) -> Endpoint:
        if self._endpoint is None:
            spec, model_file, log_path, seed = self._args
            self._endpoint = self._stack.enter_context(open_endpoint(spec, model_file, log_path, seed))
        return self._endpoint

    def __enter__(self) -> LazyEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
