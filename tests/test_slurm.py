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

from .conftest import REPO_ROOT
from .standins.loopback import LoopbackAPI
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


def small_config(root, synthetic_release, base_url):
    """An overlay of the laptop config: two subtasks, one variant, short answers and samples, the laptop's model
    served by the API stand-in at ``base_url`` (the jobs, not the model, are the subject here) and a copy of it that
    asks for a GPU (count-only GPUs: it runs on the CPU), extra sbatch flags."""
    config = {
        "upstream_dir": str(synthetic_release),
        "subtasks": ["dialogue_base", "itinerary_basic"],
        "variants": ["sap"],
        "models": ["qwen2.5-coder-0.5b-instruct-q4km", "gpu-probe"],
        "baselines": ["baseline-oracle"],
        "generation": {"max_new_tokens": {"dialogue_base": 16, "itinerary_basic": 16}},
        "rubric_judge": {"samples": 1, "max_new_tokens": 48},
        "study_judge": {"samples": 1, "max_new_tokens": 48},
        "studies": {"max_new_tokens": 8, "sample": {"safety": 1, "instruction_following": 1}},
        "scoring": {"bootstrap": {"resamples": 100}},
        "cluster": {"extra_sbatch": "--nice=10"},
    }
    # a model that asks for one GPU: its generate job must reach the scheduler with a GPU request
    registry = yaml.safe_load((root / "config" / "models.yaml").read_text(encoding="utf-8"))
    local = {**registry["qwen2.5-coder-0.5b-instruct-q4km"], "engine": "api", "api": {"base_url": base_url,
                                                                                     "model": "stand-in"}}
    for key in ("gguf", "llamacpp"):
        local.pop(key, None)
    registry["qwen2.5-coder-0.5b-instruct-q4km"] = local
    registry["gpu-probe"] = {**local, "display_name": "GPU probe", "gpus": 1, "cpus_per_gpu": 2}  # a 2-core node
    (root / "config" / "models-test.yaml").write_text(yaml.safe_dump(registry, allow_unicode=True), encoding="utf-8")
    config["model_registry"] = "config/models-test.yaml"
    (root / "config" / "slurm-test.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return ["--configfiles", "config/local.yaml", "config/slurm-test.yaml"]


@pytest.mark.slow
def test_a_small_study_submits_the_model_jobs_and_runs_the_rest_locally(checkout, synthetic_release):  # noqa: F811
    before = {job["JobId"] for job in slurm_jobs()}
    with LoopbackAPI(responder=None) as api:
        configfiles = small_config(checkout, synthetic_release, api.base_url)
        result = run_slurm(checkout, "table1", "table2", *configfiles)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    jobs = [job for job in slurm_jobs() if job["JobId"] not in before and job.get("WorkDir") == str(checkout)]
    rules = sorted(re.search(r"rule_(\w+?)_wildcards", job.get("Comment", "") + "_wildcards")[1] for job in jobs)
    # three models (one a baseline): a generate, a score and a judge job per model under test, a score job for
    # the baseline (not judged: the laptop overlay's rubric_judge.baselines is false); the data stage, the prompts,
    # the baseline's answers, J and the tables ran on the submit host; Table 2's resampling over all rows is a job,
    # and so is the rubric judge's ladder (Table 2 shows it). Table 2 needs no study: no study answers were
    # generated, scored or judged
    assert rules == [
        "generate", "generate", "judge_ladder", "rubric_judge", "rubric_judge", "score", "score", "score",
        "table2_pairs",
    ], rules  # fmt: skip
    assert all(job["JobState"] == "COMPLETED" for job in jobs), [(j["JobId"], j["JobState"]) for j in jobs]
    assert all(job["Nice"] == "10" for job in jobs)  # cluster.extra_sbatch reached every job
    # a submitted job's own summary line, read from its log on the shared file system (workflow_log.job_summary)
    said = re.compile(r"generate \S+: \d+ answers \(\d+ cached, 0 failed\) -> \d+ files \(")
    lines = (result.stdout + result.stderr).splitlines()
    assert any(said.match(line) for line in lines), lines
    probe = [j for j in jobs if "gpu-probe" in j.get("Comment", "") and "rule_generate" in j["Comment"]]
    assert probe and probe[0].get("TresPerJob") == "gres:gpu:1", probe  # --gpus=1 reached the scheduler
    assert probe[0].get("CpusPerTres") == "gres:gpu:2"  # and the registry's cpus_per_gpu
    assert {(j["Partition"], j is probe[0]) for j in jobs} == {("gpu", True), ("cpu", False)}
    rows = (checkout / "paper_figures" / "demo" / "table2.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 1 + 3  # the local model, the probe and the oracle (variant sap)
    provenance = json.loads((checkout / "results" / "sets" / "demo" / "provenance.json").read_text(encoding="utf-8"))
    assert provenance["data_manifest"]["commit"]


@pytest.mark.slow
def test_a_failing_job_fails_the_run_and_shows_its_log(checkout, tmp_path):  # noqa: F811
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_slurm(
        checkout, "table1", "--configfiles", "config/local.yaml", "--config", f"upstream_dir={empty}", timeout=900
    )
    assert result.returncode != 0
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert any(line.startswith("failed: fetch; its log: ") for line in lines), lines[-20:]
    # the job's error, from its log, ends the output
    assert lines[-1].startswith("h2htalk fetch: error: "), lines[-5:]
    assert "dialogue_base.jsonl: not found in upstream_dir" in lines[-1]


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_paper_rehearsal_slice_through_slurm(tmp_path, released_data):
    """The paper config end to end through profiles/slurm against the stand-in engines (benchmarks/
    paper_rehearsal.py): a vLLM model, a vLLM reasoning model and DeepSeek's API, 3 references per subtask
    reconstructed, the judge and both studies. The scheduler's records say where every job ran."""
    report_file = tmp_path / "report.json"
    command = [
        sys.executable, str(REPO_ROOT / "benchmarks" / "paper_rehearsal.py"), "--profile", "slurm",
        "--models", "qwen2-1.5b-instruct,deepseek-r1-distill-qwen-7b,deepseek-r1", "--items-per-subtask", "3",
        "--upstream-dir", str(released_data), "--out", str(report_file), "--workdir", str(tmp_path / "run"),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=2300, check=False)
    log = (tmp_path / "run" / "snakemake.log").read_text(encoding="utf-8", errors="replace")
    assert result.returncode == 0, result.stdout[-3000:] + log[-6000:]
    report = json.loads(report_file.read_text(encoding="utf-8"))
    jobs = report["slurm_jobs"]
    # one job per model and stage (Table 2's answers; the studies' answers and their verdicts in one study job), the
    # baselines' scores and judgments, one reconstruction, the studies' scores and Table 2's resampling (one job
    # each over all rows), the judge's sanity ladder (one job per judge model): the rest is local
    assert report["slurm_jobs_by_rule"] == {
        "reconstruct_instances": 1, "generate": 3, "study": 3, "score": 7, "score_studies": 1, "rubric_judge": 7,
        "table2_pairs": 1, "judge_ladder": 2,
    }  # fmt: skip
    assert all(job["state"] == "COMPLETED" for job in jobs), jobs
    # a study job runs its model and the study judge: the union of what they need (GPT-4o's API needs no GPU)
    vllm_generations = [j for j in jobs if j["rule"] in ("generate", "study") and j["partition"] == "gpu"]
    assert len(vllm_generations) == 2 * 2  # the two vLLM models; DeepSeek's API runs on the CPU partition
    scoring = [j for j in jobs if j["rule"] in ("score", "score_studies")]
    assert len(scoring) == 7 + 1  # BGE-M3 on a GPU (embedders.bge-m3.gpus: 1 in the paper config)
    # the rehearsal asks for one core per GPU (a stand-in needs no more): the registry's value reaches sbatch
    on_gpu = vllm_generations + scoring
    assert all(j["partition"] == "gpu" for j in on_gpu)
    assert all(j["gpus"] == "gres:gpu:1" and j["cpus_per_gpu"] == "gres:gpu:1" for j in on_gpu)
    assert all(j["partition"] == "cpu" and not j["gpus"] for j in jobs if j not in on_gpu)
    # DeepSeek refuses the safety study's crisis text: recorded per item, never fatal
    assert report["requests"]["failures"].get("content_refusal", 0) > 0
    assert report["cache_errors"] == 0
    assert {"table1.csv", "table2.csv", "table3.csv", "fig7_instruction_following.png"} <= set(report["produced"])
    figures = tmp_path / "run" / "paper_figures" / "reconstructed"  # the paper study's instance set
    table2 = (figures / "table2.csv").read_text(encoding="utf-8")
    assert "DeepSeek-R1," in table2 and "Qwen2-1.5B-Instruct," in table2
    assert "gpt-4o is a model under test" not in (figures / "table2.md").read_text()
