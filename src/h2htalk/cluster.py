"""What a submitted job asks a SLURM cluster for: where it goes (partition, account, extra flags), its GPUs
and their type, CPUs per GPU, memory and runtime, from the config's ``cluster`` section and the registry
entries of the models it runs. The workflow splats these into each rule's resources."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Entry = dict[str, Any]
SCORING_CPUS_PER_GPU = 4  # an embedder's tokenizer and batching, beside the GPU


def placement(cluster: dict[str, Any], gpus: int, gpu_model: str | None = None) -> dict[str, Any]:
    """Where a job asking for ``gpus`` goes, and the GPUs with their type (``gpu_model``, else the cluster's)."""
    return {
        "slurm_partition": cluster["gpu_partition" if gpus else "cpu_partition"],
        "slurm_account": cluster["account"] or "",
        "slurm_extra": cluster["extra_sbatch"] or "",
        "gpu": gpus,
        "gpu_model": (gpu_model or cluster["gpu_model"] or "") if gpus else "",
    }


def model_job(cluster: dict[str, Any], entries: Sequence[Entry]) -> dict[str, Any]:
    """A job that runs the models of ``entries`` (at least one): the most any of them needs (cores per GPU: the most
    the models on GPUs ask for; an API client's entry, which has none, adds none)."""
    on_gpus = [e for e in entries if e["gpus"]] or entries
    gpu_models = [e.get("gpu_model") for e in entries if e["gpus"]]
    return {
        **placement(cluster, max(e["gpus"] for e in entries), next(filter(None, gpu_models), None)),
        "cpus_per_gpu": max(e["cpus_per_gpu"] for e in on_gpus),
        "mem_mb": max(e["resources"]["mem_mb"] for e in entries),
        "runtime": max(e["resources"]["runtime_min"] for e in entries),
    }


def embedder_job(cluster: dict[str, Any], embedder: dict[str, Any], mem_mb: int, runtime: int) -> dict[str, Any]:
    """A scoring job, which runs no model: placed by its embedder's GPUs (``embedders.NAME.gpus``; 0: the CPU
    partition)."""
    gpus = embedder["gpus"]
    return {**placement(cluster, gpus), "cpus_per_gpu": SCORING_CPUS_PER_GPU, "mem_mb": mem_mb, "runtime": runtime}


def cpu_job(cluster: dict[str, Any], mem_mb: int, runtime: int) -> dict[str, Any]:
    """A job that runs no model and needs no GPU (Table 2's resampling): the CPU partition."""
    return {**placement(cluster, 0), "mem_mb": mem_mb, "runtime": runtime}
