"""profiles/slurm against a real one-node SLURM cluster (started by the CI script: .ci/slurm/start.sh).

A small study runs end to end with every job submitted through the SLURM executor: fetch and curate,
instances and prompts, the local model's generation, an oracle baseline, scoring, the judge, Tables 1 and 2.
The test reads the scheduler's own records to check that the jobs ran there, and that a GPU request reached
it. A failing job must fail the run and show its log.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from .test_workflow import checkout  # noqa: F401 - the fixture: a fresh copy of the workflow

pytestmark = pytest.mark.skipif(
    os.environ.get("H2HTALK_SLURM") != "1" or shutil.which("sbatch") is None,
    reason="needs the one-node SLURM cluster the CI script starts (H2HTALK_SLURM=1)",
)

STATUS_FLAGS = ["--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5"]


def run_slurm(root, *args, timeout=2400):
    command = [sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", *STATUS_FLAGS, *args]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=timeout, check=False)


def slurm_jobs() -> list[dict[str, str]]:
    """Every job the controller still remembers (MinJobAge keeps finished ones for 10 minutes)."""
    out = subprocess.run(["scontrol", "show", "jobs", "-o"], capture_output=True, text=True, check=True).stdout
    jobs = []
    for line in out.splitlines():
        if line.startswith("JobId="):  # "No jobs in the system" otherwise
            jobs.append(dict(re.findall(r"(\w+(?:/\w+)?)=(\S*)", line)))
    return jobs


def small_config(root, synthetic_release):
    """An overlay of the laptop config: two subtasks, one variant, short answers and samples, a copy of the local
    model that asks for a GPU (count-only GPUs: it runs on the CPU), extra sbatch flags."""
    config = {
        "upstream_dir": str(synthetic_release),
        "subtasks": ["dialogue_base", "itinerary_basic"],
        "variants": ["sap"],
        "models": ["qwen2.5-coder-0.5b-instruct-q4km", "gpu-probe"],
        "baselines": ["baseline-oracle"],
        "generation": {"max_new_tokens": {"dialogue_base": 16, "itinerary_basic": 16}},
        "judge": {"samples": 1, "max_tokens": 48},
        "studies": {"max_new_tokens": 8, "sample": {"safety": 1, "instruction_following": 1}},
        "scoring": {"bootstrap": {"resamples": 100}},
        "cluster": {"extra_sbatch": "--nice=10"},
    }
    # a model that asks for one GPU: its generate job must reach the scheduler with a GPU request
    registry = yaml.safe_load((root / "config" / "models.yaml").read_text(encoding="utf-8"))
    local = registry["qwen2.5-coder-0.5b-instruct-q4km"]
    registry["gpu-probe"] = {**local, "display_name": "GPU probe", "gpus": 1, "cpus_per_gpu": 2}  # a 2-core node
    (root / "config" / "models-test.yaml").write_text(yaml.safe_dump(registry, allow_unicode=True), encoding="utf-8")
    config["model_registry"] = "config/models-test.yaml"
    (root / "config" / "slurm-test.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return ["--configfiles", "config/local.yaml", "config/slurm-test.yaml"]


@pytest.mark.slow
def test_a_small_study_submits_the_model_jobs_and_runs_the_rest_locally(checkout, synthetic_release):  # noqa: F811
    configfiles = small_config(checkout, synthetic_release)
    before = {job["JobId"] for job in slurm_jobs()}
    result = run_slurm(checkout, "table1", "table2", *configfiles)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    jobs = [job for job in slurm_jobs() if job["JobId"] not in before]
    rules = sorted(re.search(r"rule_(\w+?)_wildcards", job.get("Comment", "") + "_wildcards")[1] for job in jobs)
    # three models (one a baseline): a generate job per model under test, a score and a judge job each;
    # the data stage, the prompts, the baseline's answers, J and the tables ran on the submit host
    assert rules == ["generate", "generate", "judge", "judge", "judge", "score", "score", "score_baseline"], rules
    assert all(job["JobState"] == "COMPLETED" for job in jobs), [(j["JobId"], j["JobState"]) for j in jobs]
    assert all(job["Nice"] == "10" for job in jobs)  # cluster.extra_sbatch reached every job
    probe = [j for j in jobs if "gpu-probe" in j.get("Comment", "") and "rule_generate" in j["Comment"]]
    assert probe and probe[0].get("TresPerJob") == "gres:gpu:1", probe  # --gpus=1 reached the scheduler
    assert probe[0].get("CpusPerTres") == "gres:gpu:2"  # and the registry's cpus_per_gpu
    assert {(j["Partition"], j is probe[0]) for j in jobs} == {("gpu", True), ("cpu", False)}
    rows = (checkout / "paper_figures" / "table2.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 1 + 3  # the local model, the probe and the oracle (variant sap)
    provenance = json.loads((checkout / "results" / "provenance.json").read_text(encoding="utf-8"))
    assert provenance["data_manifest"]["commit"]


@pytest.mark.slow
def test_a_failing_job_fails_the_run_and_shows_its_log(checkout, tmp_path):  # noqa: F811
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_slurm(
        checkout, "table1", "--configfiles", "config/local.yaml", "--config", f"upstream_dir={empty}", timeout=900
    )
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "Error in rule fetch" in output
    assert "dialogue_base.jsonl: not found in upstream_dir" in output  # the job's log, shown
