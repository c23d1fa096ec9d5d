"""The Snakemake workflow end to end, run as a user runs it, in a fresh copy of the repository."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from h2htalk.generation.baselines import NO_ANSWER
from h2htalk.subtasks import SUBTASKS, get_subtask

from .conftest import REPO_ROOT, synthetic_release_bytes
from .standins.loopback import LoopbackAPI

DEMO, FIGURES = "results/sets/demo", "paper_figures/demo"  # the laptop's instance set: its results and tables
PAPER = "results/sets/reconstructed"  # the paper study's
RELEASED = [1882, 99, 533, 412, 589, 41, 207, 444, 143, 163, 76]
SUBTASK_ORDER = [
    "dialogue_base",
    "dialogue_emotion",
    "dialogue_schedule",
    "recollection_synthesis",
    "recollection_refinement",
    "recollection_initialization",
    "itinerary_basic",
    "itinerary_middle",
    "itinerary_advanced",
    "itinerary_response",
    "itinerary_initialization",
]


def copy_checkout(root: Path) -> Path:
    root.mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "Snakefile", root / "Snakefile")
    for folder in ("workflow", "config", "profiles", "src", "envs"):
        shutil.copytree(
            REPO_ROOT / folder, root / folder, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
        )
    return root


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the files a clone holds that the workflow needs, without any outputs."""
    return copy_checkout(tmp_path / "checkout")


def snakemake(root: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "snakemake", "--profile", "profiles/local", *args]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=timeout, check=False)


def overlay(root: Path, name: str, changes: dict) -> list[str]:
    """A config overlay written beside the shipped ones, and the --configfiles that put it on the laptop's."""
    (root / "config" / f"{name}.yaml").write_text(yaml.safe_dump(changes, allow_unicode=True), encoding="utf-8")
    return ["--configfiles", "config/local.yaml", f"config/{name}.yaml"]


def read_jsonl_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_table1(root: Path) -> list[dict[str, str]]:
    with open(root / FIGURES / "table1.csv", encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def paths_under(root: Path) -> set[str]:
    """Every file and folder under ``root`` but Snakemake's own records (.snakemake/) and Python's bytecode."""
    return {
        str(path.relative_to(root)) for path in root.rglob("*")
        if not {".snakemake", "__pycache__"} & set(path.relative_to(root).parts)
    }  # fmt: skip


def test_dry_run_lists_the_laptop_default_jobs_and_writes_nothing(checkout):
    before = paths_under(checkout)
    result = snakemake(checkout, "-n")
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    for rule in ("fetch", "curate", "curation_report", "table1"):
        assert rule in out
    # the laptop judges its model, not the baselines (rubric_judge.baselines: false): one judge job, one combine-j
    assert re.search(r"^rubric_judge\s+1$", out, re.M) and re.search(r"^combine_j\s+1$", out, re.M), out[-3000:]
    assert paths_under(checkout) == before  # no review store either: no run makes one
    for mode in ("--list-rules", "--summary"):
        result = snakemake(checkout, mode)
        assert result.returncode == 0 and "table2" in result.stdout, result.stderr[-3000:]
        assert paths_under(checkout) == before, mode


def test_a_review_store_that_is_no_store_stops_the_run_as_it_loads_naming_the_key(checkout):
    """A file at ``review.store`` that is no review store (one a stopped program left empty, another file) stops
    the run before its jobs are planned, as a configuration error naming the key, and is left as it is."""
    store = checkout / "desk" / "ratings.sqlite"
    store.parent.mkdir()
    store.write_bytes(b"")
    before = paths_under(checkout)
    result = snakemake(checkout, "-n")
    said = result.stdout + result.stderr
    assert result.returncode != 0 and "key 'review.store'" in said, said[-3000:]
    assert "is no review store" in said and "InputFunctionException" not in said
    assert paths_under(checkout) == before and store.read_bytes() == b""


def test_the_partial_table2_needs_no_judge_and_the_answers_and_scores_go_first(checkout):
    """Table 2 from the scores alone needs no judge and no study job; the answers, the scores and the tables that
    need no judge rank above the judge and the studies, so that they are ready while those run."""
    result = snakemake(checkout, "-n", "table2_partial")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert re.search(r"^table2_partial\s+1$", out, re.M) and re.search(r"^score\s+3$", out, re.M), out[-3000:]
    assert not re.search(r"^(rubric_judge|study|combine_j)\s", out, re.M)
    from h2htalk.stages.table import BY_NAME

    later = max(BY_NAME[name].priority for name in ("rubric_judge", "study", "judge_ladder", "combine_j"))
    for name in ("generate", "baseline_answers", "score", "table2_partial", "table1", "figure"):
        assert BY_NAME[name].priority > later, name


def test_the_judges_card_is_one_ladder_job_per_judge_model_and_part(checkout):
    """Every run has the rubric judge's ladder (Table 2 shows it beside the judged cells); the laptop makes the
    judges' card, and the studies' part of the ladder, when asked (judge_reliability.every_run: false); the paper's
    `all` makes it, with one ladder job per part for its one judge model, and Table 2 waits for the rubric judge's
    drift canary."""
    laptop = snakemake(checkout, "-n")
    out = laptop.stdout + laptop.stderr
    assert laptop.returncode == 0 and re.search(r"^judge_ladder\s+1$", out, re.M), out[-3000:]
    assert "part=rubric" in out and "part=studies" not in out
    card = snakemake(checkout, "-n", "judge_reliability")
    out = card.stdout + card.stderr
    assert re.search(r"^judge_ladder\s+2$", out, re.M) and re.search(r"^judge_reliability\s+1$", out, re.M), out[-3000:]
    command = [sys.executable, "-m", "snakemake", "-n", "all", "--configfiles", "config/config.yaml",
               "--config", "upstream_dir=/nonexistent"]  # fmt: skip
    paper = subprocess.run(command, cwd=checkout, capture_output=True, text=True, timeout=300, check=False)
    assert paper.returncode == 0, paper.stderr[-3000:]
    for rule, jobs in (("judge_ladder", 2), ("judge_reliability", 1)):  # GPT-4o judges everything: both parts
        assert re.search(rf"^{rule}\s+{jobs}$", paper.stdout, re.M), rule
    table2 = next(job for job in re.split(r"\n(?=rule )", paper.stdout) if job.startswith("rule table2:"))
    assert f"{PAPER}/judge_reliability/gpt-4o/rubric/canary.json" in table2


def submitted_jobs(root: Path, stats: str) -> dict[str, int]:
    """Jobs by rule of a dry run's job stats, less the stages that run on the submit host (and the targets)."""
    from h2htalk.stages.table import STAGES

    local = {stage.name for stage in STAGES if stage.where == "local"}
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", stats[stats.index("Job stats") :], re.M))
    return {rule: int(n) for rule, n in counts.items() if rule not in local and rule in {s.name for s in STAGES}}


def test_the_paper_dag_submits_one_study_job_per_model(checkout):
    """A model's study job answers both studies and has the study judge judge them: 145 submitted jobs in all,
    within the cluster's limit of 150."""
    command = [sys.executable, "-m", "snakemake", "-n", "all", "--configfiles", "config/config.yaml",
               "--config", "upstream_dir=/nonexistent"]  # fmt: skip
    paper = subprocess.run(command, cwd=checkout, capture_output=True, text=True, timeout=300, check=False)
    assert paper.returncode == 0, paper.stderr[-3000:]
    submitted = submitted_jobs(checkout, paper.stdout)
    assert submitted == {
        "generate": 33, "study": 33, "score": 37, "score_studies": 1, "rubric_judge": 37, "reconstruct_instances": 1,
        "judge_ladder": 2, "table2_pairs": 1,
    }  # fmt: skip
    assert sum(submitted.values()) == 145
    study = next(job for job in re.split(r"\n(?=rule )", paper.stdout) if job.startswith("rule study:"))
    assert f"{PAPER}/studies/safety/verdicts/" in study and f"{PAPER}/generations/" in study


def scoring_jobs(root: Path, *configfiles: str) -> dict[str, set[str]]:
    """The resources and the shell commands of every scoring job the paper DAG plans, as a dry run prints them."""
    command = [sys.executable, "-m", "snakemake", "-n", "-p", "all", "--configfiles", "config/config.yaml",
               *configfiles, "--config", "upstream_dir=/nonexistent"]  # fmt: skip
    result = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = [job for job in re.split(r"\n(?=rule )", result.stdout) if re.match(r"rule score(_studies)?:", job)]
    return {
        "resources": {re.search(r"resources: (.*)", job)[1] for job in jobs},
        "commands": {re.search(r"Shell command: (.*)", job)[1] for job in jobs},
    }


def test_the_paper_dag_scores_on_a_gpu_and_a_cpu_only_embedder_stays_on_the_cpu_partition(checkout):
    on_gpu = scoring_jobs(checkout)
    assert on_gpu["resources"] and all("slurm_partition=gpu" in r and ", gpu=1," in r for r in on_gpu["resources"])
    (checkout / "config" / "cpu.yaml").write_text("embedders: {bge-m3: {gpus: 0}}\n", encoding="utf-8")
    on_cpu = scoring_jobs(checkout, "config/cpu.yaml")
    assert on_cpu["resources"] and all("slurm_partition=cpu" in r and ", gpu=0," in r for r in on_cpu["resources"])
    # where a job runs is not one of its settings: the same commands, so moving it reruns nothing
    # 33 models and 4 baselines, and the safety study's answers of the 33
    assert on_cpu["commands"] == on_gpu["commands"] and len(on_gpu["commands"]) == 37 + 1


def test_misspelled_config_key_fails_before_any_job(checkout):
    configfiles = overlay(checkout, "bad", {"data": {"curate": {"anonymize": {"phone": "flag"}}}})
    result = snakemake(checkout, "table1", *configfiles)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "unknown key 'data.curate.anonymize' (did you mean 'anonymise'?)" in out
    assert not (checkout / "results").exists(), "no job may start with an invalid config"


def test_an_api_key_missing_fails_before_any_job_but_not_a_dry_run_or_a_job_without_the_model(checkout, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    configfiles = overlay(checkout, "api", {"models": ["gpt-4o-mini"]})
    assert snakemake(checkout, "-n", "generations", *configfiles).returncode == 0  # a dry run needs no key
    instances = snakemake(checkout, f"{DEMO}/instances/dialogue_base.jsonl", *configfiles)
    assert instances.returncode == 0, instances.stderr  # a job that calls no model runs without it
    result = snakemake(checkout, "generations", *configfiles)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert "environment variable OPENAI_API_KEY (the API key of model gpt-4o-mini) is not set" in out, out[-3000:]
    assert not (checkout / "results" / "data").exists(), "no job may start: fetch is the first"


def test_a_failed_job_ends_the_output_with_its_error(checkout, tmp_path):
    """The terminal shows no job blocks or shell commands, and its last line is the failed job's error."""
    (tmp_path / "empty").mkdir()
    result = snakemake(checkout, "table1", "--config", f"upstream_dir={tmp_path / 'empty'}")
    assert result.returncode != 0
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert lines[-1].startswith("h2htalk fetch: error: "), lines[-10:]
    assert "check failed: dialogue_base.jsonl: not found in upstream_dir" in lines[-1]
    assert lines[-1].endswith(f"(and 10 more lines in {DEMO}/logs/fetch.log)")
    assert f"failed: fetch; its log: {DEMO}/logs/fetch.log" in lines
    assert not any(line.startswith(("Shell command", "rule ", "localrule ", "    jobid")) for line in lines), lines
    assert len(lines) < 20, lines


@pytest.mark.slow
def test_table1_from_the_released_files(checkout, released_data):
    result = snakemake(checkout, "table1", "--config", f"upstream_dir={released_data}")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = read_table1(checkout)
    assert [r["subtask"] for r in rows] == SUBTASK_ORDER
    assert [int(r["released"]) for r in rows] == RELEASED
    assert [int(r["paper_count"]) for r in rows][5] == 102
    assert list(rows[0]) == [
        "subtask",
        "paper_name",
        "paper_count",
        "released",
        "kept",
        "empty",
        "filler",
        "meta_refusal",
        "leftover_instruction",
        "duplicate",
        "sensitive",
        "pii",
        "upstream_file",
    ]
    by_key = {r["subtask"]: r for r in rows}
    # known release defects (DESIGN): filler in synthesis, meta text in the swapped schedule file,
    # leftover instructions in refinement, 30 exact duplicates in dialogue_base
    assert int(by_key["recollection_synthesis"]["filler"]) == 264
    assert int(by_key["itinerary_initialization"]["meta_refusal"]) > 0
    assert by_key["itinerary_initialization"]["upstream_file"] == "dialogue_schedule.jsonl"
    assert by_key["dialogue_schedule"]["upstream_file"] == "itinerary_initialize.jsonl"
    assert int(by_key["recollection_refinement"]["leftover_instruction"]) > 0
    assert int(by_key["dialogue_base"]["duplicate"]) == 30
    for row in rows:
        assert int(row["kept"]) <= int(row["released"])
    tex = (checkout / FIGURES / "table1.tex").read_text(encoding="utf-8")
    assert r"\toprule" in tex and "dialogue\\_base" in tex
    again = snakemake(checkout, "table1", "--config", f"upstream_dir={released_data}")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # a change to Table 1's code reruns Table 1 alone (Snakemake's code trigger), unless the run leaves that trigger
    with open(checkout / "src" / "h2htalk" / "tables" / "table1.py", "a", encoding="utf-8") as handle:
        handle.write("\n# a change\n")
    changed = snakemake(checkout, "table1", "-n", "--config", f"upstream_dir={released_data}")
    said = changed.stdout + changed.stderr
    assert changed.returncode == 0 and re.search(r"^table1\s+1$", said, re.M), said[-3000:]
    assert "Code has changed since last execution" in said and not re.search(r"^curate\s", said, re.M), said[-3000:]
    triggers = ("--rerun-triggers", "mtime", "params", "input", "software-env")
    kept = snakemake(checkout, "table1", "-n", *triggers, "--config", f"upstream_dir={released_data}")
    assert kept.returncode == 0 and "Nothing to be done" in kept.stdout + kept.stderr


@pytest.mark.slow
def test_table1_through_the_download_path(checkout, fixture_server):
    configfiles = overlay(checkout, "served", {"data": {"upstream": {"url_template": fixture_server.url_template()}}})
    result = snakemake(checkout, "table1", *configfiles)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sum(fixture_server.requests.values()) == 11
    # the terminal: each job's summary line, then what the run made and where its full log is
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert f"table1: 11 subtasks -> {FIGURES}/table1.md (+ .csv .tex)" in "\n".join(lines)
    assert not any("Shell command" in line or line.startswith("localrule ") for line in lines)
    assert any(re.match(rf"  Table 1 +{FIGURES}/table1\.md \(\+ \.csv \.tex\): ", line) for line in lines)
    assert lines[-1].startswith("Full log: .snakemake/log/"), lines[-5:]
    assert [int(r["released"]) for r in read_table1(checkout)] == RELEASED
    manifest = yaml.safe_load((checkout / "results" / "data" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["origin"] == "download"


LOCAL = "qwen2.5-coder-0.5b-instruct-q4km"


@contextmanager
def stand_in_run(root: Path, **changes: Any) -> Iterator[tuple[Path, list[str], LoopbackAPI]]:
    """The whole laptop default (`all`) in a fresh checkout under ``root``: data, instances, prompts, the laptop's
    model (here the API stand-in on loopback under the laptop model's name: test_llamacpp runs the real one end to
    end), scores, judge, tables. Token limits and judge samples are lowered; ``changes`` go on top; everything else
    is the shipped config. The stand-in answers until the context ends."""
    release = root / "release"
    release.mkdir()
    for subtask in SUBTASKS:
        (release / subtask.upstream_file).write_bytes(synthetic_release_bytes(subtask.released, subtask.key))
    checkout = copy_checkout(root / "checkout")
    with LoopbackAPI(responder=None) as api:
        registry = {LOCAL: {"engine": "api", "api": {"base_url": api.base_url, "model": "stand-in"}}}
        (checkout / "config" / "stand-in.yaml").write_text(yaml.safe_dump(registry), encoding="utf-8")
        configfiles = overlay(checkout, "e2e", {
            "upstream_dir": str(release),
            "model_registry_overlays": ["config/stand-in.yaml"],
            "generation": {"max_new_tokens": dict.fromkeys(SUBTASK_ORDER, 24)},
            "rubric_judge": {"samples": 1, "max_new_tokens": 64},
            "study_judge": {"samples": 1, "max_new_tokens": 64},
            "studies": {"max_new_tokens": 24, "sample": {"safety": 2, "instruction_following": 3}},
            "scoring": {"bootstrap": {"resamples": 200}},
            "baselines": ["baseline-random-reference", "baseline-oracle"],
            **changes,
        })  # fmt: skip
        result = snakemake(checkout, *configfiles, timeout=1800)
        assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
        yield checkout, configfiles, api


@pytest.fixture(scope="session")
def laptop_run(tmp_path_factory) -> Iterator[tuple[Path, list[str], LoopbackAPI]]:
    """The whole laptop default (``stand_in_run``), made once for the tests that read or change a finished run.
    Each test works on a copy (``laptop_copy``)."""
    with stand_in_run(tmp_path_factory.mktemp("laptop")) as run:
        yield run


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the whole laptop default, as the session's laptop run is, beside it
def test_a_run_of_one_item_per_subtask_makes_every_table(tmp_path):
    """`all` with one item per subtask (instances.limit 1, `h2htalk eval --limit 1`): the random reference has no
    other item to draw, so no subtask has a chance floor; calibration says so, as Table 2 does, instead of failing
    on a percentile of no values."""
    with stand_in_run(tmp_path, instances={"limit": 1}) as (checkout, _, _):
        figures = checkout / "paper_figures" / "demo-first1"
        for name in ("calibration.md", "table2.md"):  # one line naming every subtask, in both
            text = (figures / name).read_text(encoding="utf-8")
            [said] = [line for line in text.splitlines() if "baseline-random-reference: no value, not 0, in" in line]
            assert said.endswith(f"{NO_ANSWER['random_reference']}.") and all(s in said for s in SUBTASK_ORDER), name
        with open(figures / "calibration.csv", encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert rows and all(row["floor"] == "" and row["rescaled"] == "" for row in rows)
        with open(figures / "table2.csv", encoding="utf-8", newline="") as handle:
            table = {(r["model"], r["variant"]): r for r in csv.DictReader(handle)}
        assert all(table[(LOCAL, variant)]["dialogue_base"] for variant in ("sap", "nosap"))


@pytest.fixture
def laptop_copy(laptop_run, tmp_path) -> tuple[Path, list[str]]:
    """A copy of the finished laptop run, to change (its stand-in still answering)."""
    checkout, configfiles, _ = laptop_run
    copy = tmp_path / "checkout"
    shutil.copytree(checkout, copy, symlinks=True)
    return copy, configfiles


@pytest.mark.slow
def test_laptop_default_end_to_end(laptop_copy):
    """The whole laptop default: Table 2 with its model, the baselines and the judged cells, Tables 1 and 3, the
    figures and the agreement report; a rerun does nothing, and one after answers and a score were removed rebuilds
    them (from the caches) and everything made from them."""
    checkout, configfiles = laptop_copy
    with open(checkout / FIGURES / "table2.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    models = [(r["model"], r["variant"]) for r in rows]
    local = LOCAL
    assert models[:2] == [(local, "nosap"), (local, "sap")]
    assert {m for m, _ in models[2:]} == {"baseline-random-reference", "baseline-oracle"}
    scores = checkout / DEMO / "scores" / "usem3"
    for subtask in SUBTASK_ORDER:  # the oracle: 100 on every subtask, end to end through the workflow
        oracle = json.loads((scores / "baseline-oracle" / "sap" / f"{subtask}.summary.json").read_text())
        assert oracle["S"] == pytest.approx(100.0), subtask
    figures = checkout / FIGURES
    assert "chance" in (figures / "calibration.md").read_text(encoding="utf-8")
    for name in (
        "table1.csv",
        "table3.csv",
        "table3.md",
        "fig4_wordcloud.png",
        "fig5_verb_noun.png",
        "fig6_lengths.png",
        "fig7_instruction_following.png",
        "table2.meta.json",
        "agreement.md",
        "agreement.csv",
    ):
        assert (figures / name).stat().st_size > 0, name
    table3 = (figures / "table3.csv").read_text(encoding="utf-8")
    assert "w/ SAP" in table3 and "w/o SAP" in table3 and "delta" in table3 and "paper" in table3
    # every table of a judge's verdicts speaks of its ladder: the laptop runs the studies' ladder with the card only
    # (judge_reliability.every_run: false), and Table 3 says so and where it is
    assert "safety judge qwen2.5-coder-0.5b-instruct-q4km's sanity ladder is not run with every run" in (
        figures / "table3.md"
    ).read_text(encoding="utf-8")
    weights = {subtask: get_subtask(subtask).released for subtask in SUBTASK_ORDER}
    complete = [row for row in rows if all(row[subtask] for subtask in SUBTASK_ORDER)]
    assert complete, "no row has all 11 cells"
    for row in complete:  # Overall: the released-count-weighted mean of the row's own cells, whatever was scored
        mean = sum(float(row[k]) * w for k, w in weights.items()) / sum(weights.values())
        assert float(row["overall"]) == pytest.approx(mean, abs=1e-3), row["model"]
    rows = rows[:2]
    judged = checkout / DEMO / "j_scores" / "usem3" / "qwen2.5-coder-0.5b-instruct-q4km"
    for row in rows:
        for column in (
            "dialogue_base",
            "dialogue_emotion",
            "recollection_synthesis",
            "dialogue_avg",
            "recollection_avg",
            "itinerary_response",
        ):
            assert 0.0 < float(row[column]) < 100.0, column
        for column in ("itinerary_basic", "itinerary_middle", "itinerary_advanced"):
            assert row[f"{column}_measure"] == "J"
            summary = json.loads((judged / row["variant"] / f"{column}.summary.json").read_text())
            assert 0.0 < float(row[column]) < 100.0 and summary["n"] + summary["missing"] == 3
    assert (checkout / FIGURES / "table2_heatmap.png").stat().st_size > 10_000
    with open(figures / "table2_pairs.csv", encoding="utf-8", newline="") as handle:
        pairs = list(csv.DictReader(handle))
    # one model under test: no size group to compare within, its SAP row against its no-SAP row; no baseline
    assert pairs and {(r["comparison"], r["model_a"], r["model_b"]) for r in pairs} == {("SAP vs no-SAP", local, local)}
    assert "Power (80 % power" in (figures / "table2.md").read_text(encoding="utf-8")
    assert (figures / "table2_ranks.png").stat().st_size > 0  # no rank where a judged cell has no J at all
    assert (checkout / DEMO / "review" / "queue.csv").exists()
    generations = checkout / DEMO / "generations" / "qwen2.5-coder-0.5b-instruct-q4km"
    run, studies_run = (json.loads((generations / name).read_text()) for name in ("run.json", "studies.run.json"))
    study_requests = sum(  # a safety conversation asks once per user turn, after the model's own answers
        len(json.loads(line).get("user_turns", [None]))
        for study in ("safety", "instruction_following")
        for variant in ("sap", "nosap")
        for line in read_jsonl_lines(checkout / DEMO / "studies" / study / "prompts" / f"{variant}.jsonl")
    )
    assert run["sent"] == run["requests"] == 66  # Table 2's job: 11 subtasks, 3 items, 2 variants
    assert studies_run["sent"] == studies_run["requests"] == study_requests  # the studies' job
    again = snakemake(checkout, *configfiles)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # a failed job's outputs are removed and a killed job leaves none: the rerun rebuilds what is missing (from
    # the caches) and everything made from it, instead of "nothing to be done" beside tables that look current
    table2 = (checkout / FIGURES / "table2.csv").read_bytes()
    summary = scores / local / "sap" / "dialogue_base.summary.json"
    answers = sorted((checkout / DEMO / "generations" / local / "nosap").glob("*.jsonl"))
    for path in [summary, *answers]:
        path.unlink()
    for mode in ("--summary", "--list-rules", "-n"):  # they run no job: they remove nothing (a dry run says it)
        looked = snakemake(checkout, *configfiles, mode)
        assert looked.returncode == 0 and (figures / "table2.csv").exists(), mode
        assert ("would be rebuilt" in looked.stdout + looked.stderr) == (mode == "-n"), mode
    repaired = snakemake(checkout, *configfiles)
    assert repaired.returncode == 0, repaired.stdout[-3000:] + repaired.stderr[-3000:]
    assert "are rebuilt" in repaired.stdout + repaired.stderr
    assert summary.exists() and all(path.exists() for path in answers)
    rerun = json.loads((checkout / DEMO / "generations" / local / "run.json").read_text())
    assert rerun["sent"] == 0 and (checkout / FIGURES / "table2.csv").read_bytes() == table2
    report = snakemake(checkout, *configfiles, "--report", "report.zip")
    assert report.returncode == 0, report.stderr[-3000:]
    names = zipfile.ZipFile(checkout / "report.zip").namelist()
    for figure in ("fig4_wordcloud.png", "fig7_instruction_following.png", "table2_heatmap.png", "table3.csv"):
        assert any(name.endswith(figure) for name in names), figure


def test_the_limit_cuts_each_subtasks_instances_in_the_workflow(checkout):
    """instances.limit (items per subtask) reaches the instances stage; a limited run is an instance set of its own,
    beside the whole set's run and other limits'."""
    whole = snakemake(checkout, f"{DEMO}/instances/dialogue_base.jsonl")
    assert whole.returncode == 0, whole.stdout[-3000:] + whole.stderr[-3000:]
    for limit in (2, 1):
        configfiles = overlay(checkout, "limit", {"instances": {"limit": limit}})
        target = f"results/sets/demo-first{limit}/instances/dialogue_base.jsonl"
        dry = snakemake(checkout, "-n", target, *configfiles)
        assert re.search(r"^instances\s+1$", dry.stdout, re.M), dry.stdout[-3000:]  # the data is shared
        result = snakemake(checkout, target, *configfiles)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert len(read_jsonl_lines(checkout / target)) == limit
    assert len(read_jsonl_lines(checkout / DEMO / "instances" / "dialogue_base.jsonl")) == 3  # the demo set's, kept
    prompts = snakemake(checkout, "-n", "prompts", *configfiles)
    assert re.search(r"^prompt_messages\s+22$", prompts.stdout, re.M), prompts.stdout[-3000:]


def test_a_users_model_from_a_registry_overlay_runs_in_the_workflow(checkout):
    """A model of the user's own comes from a registry overlay (model_registry_overlays); the tracked registry is
    not edited, and the tables take the overlay as an input (a change to the user's entry remakes them)."""
    tracked = (checkout / "config" / "models.yaml").read_bytes()
    entry = {"display_name": "Mine", "size_group": "local", "engine": "api",
             "api": {"base_url": "http://127.0.0.1:9/v1", "model": "mine"}}  # fmt: skip
    (checkout / "my-models.yaml").write_text(yaml.safe_dump({"my-server": entry}), encoding="utf-8")
    configfiles = overlay(checkout, "mine", {"models": ["my-server"], "model_registry_overlays": ["my-models.yaml"]})
    result = snakemake(checkout, "-n", "-p", "table2", *configfiles)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = re.split(r"\n(?=rule |localrule )", result.stdout)
    generated = [re.search(r"wildcards: model=(\S+)", job)[1] for job in jobs if job.startswith("rule generate:")]
    assert generated == ["my-server"]  # the user's model alone answers (the laptop's model only judges)
    table2 = next(job for job in jobs if re.match(r"(local)?rule table2:", job))
    assert "my-models.yaml" in table2
    assert (checkout / "config" / "models.yaml").read_bytes() == tracked
