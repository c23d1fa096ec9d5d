"""A table added the way docs/extending.md says: one new module in a copy of the checkout, declaring an "answer
length per cell" table at its function, the stage reference regenerated, nothing else edited. The workflow puts it
in `all`, runs it end to end through the stand-in engine (the API stand-in on loopback, under the laptop model's
name), adds its provenance, lists it in the run's closing lines and in Snakemake's report."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

from h2htalk.subtasks import SUBTASKS

from .conftest import REPO_ROOT, synthetic_release_bytes
from .standins.loopback import LoopbackAPI
from .test_workflow import LOCAL, copy_checkout, overlay

TOY = '''"""Answer length per cell: the mean length, in characters, of each cell's answers."""

from __future__ import annotations

from h2htalk.io import iter_jsonl, write_text_atomic
from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, Each, Product, figure_files


@stage(
    "answer_lengths", "the mean answer length of every Table 2 cell of the models under test",
    reads=("models", "subtasks", "variants"),
    cells=lambda run, labels: [cell for model in run.models for cell in run.benchmark(model)],
    product=Product("table", "Answer lengths", "mean answer length per cell", main="csv", shown=("csv",)),
    inputs={"generations": Each("generations")}, outputs=figure_files("answer_lengths", csv=".csv"),
)
def answer_lengths(generations: list[str], cells, each, csv: str) -> Done:
    rows = ["model,variant,subtask,mean_chars"]
    for cell in cells:
        texts = [record.get("response") or "" for _, record in iter_jsonl(each("generations", cell))]
        rows.append(f"{cell.model},{cell.variant},{cell.task},{sum(map(len, texts)) / max(len(texts), 1):.1f}")
    write_text_atomic(csv, "\\n".join(rows) + "\\n")  # whole or not at all
    return Done(f"{len(cells)} cells")
'''


def snakemake(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Snakemake in the copy, as a user runs it: the package the environment imports is this checkout's, not the
    copy's, and the profile's logger plugin imports it before the Snakefile runs, which then uses the copy's."""
    command = [sys.executable, "-m", "snakemake", "--profile", "profiles/local", *args]
    return subprocess.run(command, cwd=checkout, capture_output=True, text=True, timeout=900, check=False)


def stand_in_run(checkout: Path, tmp_path: Path, base_url: str) -> list[str]:
    """The --configfiles of a small laptop run in the copy whose model under test is the API stand-in at
    ``base_url``: one subtask, two instances, no baselines, the synthetic release."""
    release = tmp_path / "release"
    release.mkdir()
    for subtask in SUBTASKS:  # the release is checked whole
        (release / subtask.upstream_file).write_bytes(synthetic_release_bytes(subtask.released, subtask.key))
    registry = {LOCAL: {"engine": "api", "api": {"base_url": base_url, "model": "stand-in"}}}
    (checkout / "config" / "stand-in.yaml").write_text(yaml.safe_dump(registry), encoding="utf-8")
    return overlay(checkout, "toy", {
        "upstream_dir": str(release), "model_registry_overlays": ["config/stand-in.yaml"],
        "subtasks": ["dialogue_base"], "instances": {"limit": 2}, "baselines": [],
        "generation": {"max_new_tokens": {"dialogue_base": 24}},
    })  # fmt: skip


PER_MODEL = '''"""Answer length of one model: the mean length of each of its cells' answers."""

from h2htalk.io import iter_jsonl, write_json_atomic
from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, Each, One, Over


@stage(
    "answer_lengths_model", "the mean answer length of one model's Table 2 cells",
    reads=("models", "subtasks", "variants"), jobs=Over(model=lambda run: run.models),
    cells=lambda run, labels: run.benchmark(labels["model"]),
    inputs={"generations": Each("generations")}, outputs={"lengths": One("answer_lengths")}, targets="lengths",
)
def answer_lengths_model(model: str, cells, each, lengths: str) -> Done:
    found = {}
    for cell in cells:
        texts = [record.get("response") or "" for _, record in iter_jsonl(each("generations", cell))]
        found[f"{cell.variant}/{cell.task}"] = sum(map(len, texts)) / max(len(texts), 1)
    write_json_atomic(lengths, found)
    return Done(f"{len(cells)} cells", subject=model)
'''


def test_a_stage_of_each_model_with_a_new_kind_of_result_runs_as_the_docs_say(tmp_path):
    """docs/extending.md's stage once per model: its module, and its result's kind as one line of the layout."""
    checkout = copy_checkout(tmp_path / "checkout")
    layout = checkout / "src/h2htalk/layout.py"
    kinds = layout.read_text(encoding="utf-8")
    line = '    "curated": "data/curated/{subtask}.jsonl",\n'
    layout.write_text(kinds.replace(line, line + '    "answer_lengths": "answer_lengths/{model}.json",\n'), "utf-8")
    (checkout / "src/h2htalk/stages/jobs/answer_lengths_model.py").write_text(PER_MODEL, encoding="utf-8")
    with LoopbackAPI(responder=None) as api:
        configfiles = stand_in_run(checkout, tmp_path, api.base_url)
        run = snakemake(checkout, "lengths", *configfiles)  # its named target: every job of it
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lengths = json.loads((checkout / f"results/sets/demo-first2/answer_lengths/{LOCAL}.json").read_text("utf-8"))
    assert sorted(lengths) == ["nosap/dialogue_base", "sap/dialogue_base"] and all(v > 0 for v in lengths.values())
    assert f"answer_lengths_model {LOCAL}: 2 cells" in run.stdout + run.stderr


def test_a_table_added_in_one_module_is_in_all_the_closing_lines_and_the_report(tmp_path):
    checkout = copy_checkout(tmp_path / "checkout")
    shutil.copytree(REPO_ROOT / "docs", checkout / "docs")
    (checkout / "src/h2htalk/stages/jobs/answer_lengths.py").write_text(TOY, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    made = subprocess.run([sys.executable, "-m", "h2htalk.stages.reference"], cwd=checkout, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr[-3000:]  # a declaration's error, as it loads
    reference = made.stdout
    (checkout / "docs/stages.md").write_text(reference, encoding="utf-8")
    assert "## answer_lengths" in reference and "inputs:\n  - provenance:" in reference.split("## answer_lengths")[1]

    with LoopbackAPI(responder=None) as api:
        configfiles = stand_in_run(checkout, tmp_path, api.base_url)
        planned = snakemake(checkout, *configfiles, "--dry-run")
        assert planned.returncode == 0, planned.stderr[-3000:]
        assert "answer_lengths" in planned.stdout  # in `all`
        run = snakemake(checkout, "answer_lengths", *configfiles)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        report = snakemake(checkout, "answer_lengths", "--report", "report.zip", *configfiles)
        assert report.returncode == 0, report.stderr[-3000:]

    figures = checkout / "paper_figures" / "demo-first2"
    with open(figures / "answer_lengths.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["model"], r["subtask"]) for r in rows] == [(LOCAL, "dialogue_base")] * 2  # both variants
    assert all(float(r["mean_chars"]) > 0 for r in rows)
    meta = json.loads((figures / "answer_lengths.meta.json").read_text(encoding="utf-8"))
    assert len(meta["inputs"]) == 2  # both variants' answers, with their checksums, added by the machinery
    closing = r"Answer lengths +paper_figures/demo-first2/answer_lengths\.csv: mean answer length per cell"
    assert re.search(closing, run.stdout + run.stderr)  # the run's closing lines, the titles in one column
    assert "answer_lengths: 2 cells -> paper_figures/demo-first2/answer_lengths.csv" in run.stdout + run.stderr
    with zipfile.ZipFile(checkout / "report.zip") as bundle:
        assert any(name.endswith("answer_lengths.csv") for name in bundle.namelist())


def test_a_command_declared_wrong_fails_the_dry_run_before_any_job(tmp_path):
    """Every job runs an ``h2htalk`` command, and a command declared wrong fails them all: the workflow builds the
    command line when it loads, so that the dry run says so instead of every job."""
    checkout = copy_checkout(tmp_path / "checkout")
    rates = checkout / "src/h2htalk/plan/rates.py"
    rates.write_text(rates.read_text(encoding="utf-8").replace("    reset: forget", "    resett: forget"), "utf-8")
    planned = snakemake(checkout, "--dry-run")
    assert planned.returncode != 0
    assert "command rates: reset: no help (a docstring line 'reset: ...')" in planned.stdout + planned.stderr


def test_a_stage_declared_wrong_is_one_line_naming_it_for_every_command_and_the_dry_run(tmp_path):
    """Every command builds the parser, which loads the registry: a stage declared wrong is said as any error the
    user can act on (one line, exit status 2), not a traceback, by ``h2htalk`` and by the workflow."""
    checkout = copy_checkout(tmp_path / "checkout")
    broken = TOY.replace('reads=("models", "subtasks", "variants")', 'reads=("models", "subtask", "variants")')
    (checkout / "src/h2htalk/stages/jobs/answer_lengths.py").write_text(broken, encoding="utf-8")
    said = "stage answer_lengths: reads 'subtask': not a key of the config schema (did you mean 'subtasks'?)"
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    rates = subprocess.run([sys.executable, "-m", "h2htalk", "rates", "--help"], cwd=checkout, env=env,
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert rates.returncode == 2 and rates.stdout == ""
    assert rates.stderr.startswith(f"h2htalk: error: {said}") and rates.stderr.count("\n") == 1
    verbose = subprocess.run([sys.executable, "-m", "h2htalk", "-v", "rates", "--help"], cwd=checkout, env=env,
                             capture_output=True, text=True, check=False)  # fmt: skip
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr and said in verbose.stderr  # -v: where it broke
    planned = snakemake(checkout, "--dry-run")
    shown = planned.stdout + planned.stderr
    assert planned.returncode != 0 and "WorkflowError in file" in shown and said in shown
    assert "Traceback" not in shown and "declare.py" not in shown
