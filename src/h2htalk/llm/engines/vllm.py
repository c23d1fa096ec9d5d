"""``vllm``: ``vllm serve`` inside the (SLURM) job, tensor parallel over the model's GPUs, prefix caching for
the shared persona prompt, LoRA adapters for the "-LoRA" models; weights prefetched on the submit host."""

from __future__ import annotations

from typing import Any

from h2htalk.io import parse_yaml
from h2htalk.llm.engines.base import EngineError, ServeOptions
from h2htalk.llm.engines.server import ServerEngine
from h2htalk.prefetch import is_hub_id


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


class Vllm(ServerEngine):
    name = "vllm"
    packages = ("vllm",)
    key_variable = "VLLM_API_KEY"
    schema = parse_yaml(
        """
        properties:
          max_model_len: {type: integer, minimum: 512}
          trust_remote_code: {type: boolean, default: false}
          served_name: {type: string}
          gpu_memory_utilization: {type: number, exclusiveMinimum: 0, maximum: 1}
          dtype: {type: string}
          lora:
            type: object
            additionalProperties: false
            properties:
              path: {description: Local folder or Hugging Face id of the adapter., type: [string, "null"]}
              rank: {description: vLLM --max-lora-rank., type: integer, minimum: 1, default: 64}
          extra_args: {type: array, items: {type: string}, default: []}
        then:
          required: [hf_id]
          properties:
            gpus: {minimum: 1, default: 1}
            max_model_len: {default: 8192}
            gpu_memory_utilization: {default: 0.9}
            dtype: {default: auto}
            startup_timeout_s: {default: 1800}
            resources: {properties: {mem_mb: {default: 64000}}}
        """
    )

    def downloads(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """The weights, and the LoRA adapter when it is a hub id."""
        downloads = [{"role": "weights", "repo": spec["hf_id"], "revision": spec.get("revision")}]
        lora = (spec.get("lora") or {}).get("path")
        if is_hub_id(lora):
            downloads.append({"role": "lora", "repo": lora, "revision": None})
        return downloads

    def runnable_problem(self, spec: dict[str, Any]) -> str | None:
        if not spec.get("hf_id"):
            unset = spec.get("weights", "hf_id is null")
            return f"model {spec['name']!r} has no weights configured ({unset}): set hf_id"
        if spec.get("lora") is not None and not spec["lora"].get("path"):
            return f"model {spec['name']!r} is a LoRA variant whose adapter is not configured: set lora.path"
        return None

    def command(self, spec: dict[str, Any], port: int, options: ServeOptions) -> list[str]:
        return vllm_command(spec, port, options.seed)

    def served_model(self, spec: dict[str, Any], options: ServeOptions) -> str:
        return spec.get("served_name") or spec["name"]
