"""Engines that start their own server process for the length of one job (llama.cpp, vLLM).

The server listens on a free loopback port and answers only the job's own key, which it reads from its
environment (never from its command line, which every user of the machine can read with ``ps``). It is
waited on until it answers, and stopped when the job ends, also when it fails or is killed.
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
from pathlib import Path
from typing import Any, ClassVar

from h2htalk.llm.engines.base import Endpoint, Engine, EngineError, ServeOptions


class PortTaken(EngineError):
    """The server could not bind its port: another process took it between our check and its start."""


PORT_TAKEN = ("address already in use", "errno 98")  # how vLLM (uvicorn) and llama_cpp.server say it
PORT_ATTEMPTS = 3


class ServerEngine(Engine):
    """An engine whose endpoint is a server process the job starts (subclasses say which command)."""

    key_variable: ClassVar[str]  # the environment variable the server reads its API key from
    server_defaults: ClassVar[dict[str, str]] = {}  # environment variables the server gets unless the user set them

    def command(self, spec: dict[str, Any], port: int, options: ServeOptions) -> list[str]:
        raise NotImplementedError

    def served_model(self, spec: dict[str, Any], options: ServeOptions) -> str:
        """The name requests carry in their "model" field."""
        raise NotImplementedError

    def server_environment(self, key: str) -> dict[str, str]:
        """The server's environment: this process's, over the engine's defaults, and the job's key."""
        return {**self.server_defaults, **os.environ, self.key_variable: key}

    @contextlib.contextmanager
    def endpoint(self, spec: dict[str, Any], options: ServeOptions) -> Iterator[Endpoint]:
        key = secrets.token_hex(16)  # this job's server answers only this job
        environment = self.server_environment(key)
        timeout_s, log_path = spec["startup_timeout_s"], options.log_path
        with contextlib.ExitStack() as stack:
            for attempt in range(1, PORT_ATTEMPTS + 1):
                port = free_port()
                command = self.command(spec, port, options)
                if log_path:
                    log_path.parent.mkdir(parents=True, exist_ok=True)
                    with open(log_path, "a", encoding="utf-8") as handle:
                        handle.write(f"$ {shlex.join(command)}\n")
                base = f"http://127.0.0.1:{port}"
                try:
                    stack.enter_context(serve(command, environment, f"{base}/v1/models", timeout_s, log_path, key))
                    break
                except PortTaken:
                    if attempt == PORT_ATTEMPTS:
                        raise
            yield Endpoint(f"{base}/v1", self.served_model(spec, options), key)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
def serve(
    command: list[str],
    environment: dict[str, str],
    ready_url: str,
    timeout_s: float,
    log_path: Path | None,
    key: str,
) -> Iterator[None]:
    """Run a server process until the block ends, however it ends.

    The server gets its own process group (a Ctrl-C in the terminal reaches the job, which then stops the
    server and keeps what it cached), and dies with the job's process if that is killed outright.
    """
    log_file = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - closed below
    try:
        process = subprocess.Popen(
            command,
            env=environment,
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
            " llama-cpp-python with the portable CMAKE_ARGS of the README's set-up command"
        )
    return name


def _log_tail(log_path: Path | None) -> str:
    return log_path.read_text(errors="replace")[-2000:] if log_path and log_path.exists() else ""
