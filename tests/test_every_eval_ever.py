"""Every item of a run in the Every Eval Ever schema, laid out as its datastore, and every record checked by the
every-eval-ever package's own validator.

every-eval-ever needs Python 3.12 or later: the tests that run its validator use this Python when it has the
package, else the one $H2HTALK_EEE_PYTHON names, and are skipped when neither does."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import stat
from pathlib import Path

import pytest
import yaml

from h2htalk.cli import main
from h2htalk.config import default_config, load_registry
from h2htalk.errors import H2HTalkError
from h2htalk.export.eee_validation import PYTHON_ENV, validator_version, write_validation
from h2htalk.export.every_eval_ever import write_every_eval_ever
from h2htalk.io import read_json, read_jsonl, sha256_file
from h2htalk.layout import Layout
from h2htalk.subtasks import JUDGED, SUBTASK_KEYS

from .export_tree import NO_ANSWER, ORACLE, QUALITY, UNJUDGED, VARIANTS, shared_tree

pytestmark = pytest.mark.slow
UUID4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
HAS_VALIDATOR = bool(os.environ.get(PYTHON_ENV)) or importlib.util.find_spec("every_eval_ever") is not None
needs_validator = pytest.mark.skipif(
    not HAS_VALIDATOR, reason=f"every-eval-ever (Python >= 3.12) is not installed here and {PYTHON_ENV} is not set"
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, Path, Layout]:
    return shared_tree(tmp_path_factory)


def export(tree, out: Path) -> list[Path]:
    _, config_path, results = tree
    config = default_config(yaml.safe_load(config_path.read_text(encoding="utf-8")))
    return write_every_eval_ever(config, results, load_registry(config["model_registry"]), out)


def test_the_export_is_the_datastore_layout_with_one_record_per_item_and_result(tree, tmp_path):
    files = export(tree, tmp_path / "eee")
    aggregates = [p for p in files if p.suffix == ".json"]
    assert len(aggregates) == len(VARIANTS) * (len(QUALITY) + 1)  # one log per model and variant (one embedder)
    for path in aggregates:
        relative = path.relative_to(tmp_path / "eee").as_posix()
        assert re.fullmatch(rf"data/h2htalk/[^/]+/[^/]+/{UUID4}\.json", relative), relative
        log = read_json(path)
        samples_path = tmp_path / "eee" / log["detailed_evaluation_results"]["file_path"]
        assert samples_path == path.with_name(f"{path.stem}_samples.jsonl")
        samples = read_jsonl(samples_path)
        assert log["detailed_evaluation_results"]["total_rows"] == len(samples)
        assert log["detailed_evaluation_results"]["checksum"] == sha256_file(samples_path)
        assert {s["evaluation_id"] for s in samples} == {log["evaluation_id"]}
        assert {s["model_id"] for s in samples} == {log["model_info"]["id"]}
        model = log["model_info"]["additional_details"]["registry_name"]
        judged = model != ORACLE
        by_result = {}
        for sample in samples:
            by_result.setdefault(sample["evaluation_result_id"], []).append(sample)
        expected = {f"{s}.S" for s in SUBTASK_KEYS} | ({f"{s}.J" for s in JUDGED} if judged else set())
        assert set(by_result) == expected
        assert all(len(by_result[f"{s}.S"]) == 3 for s in SUBTASK_KEYS)  # every item has its S
        if judged:  # the item without a readable verdict has no J record (missing, never 0)
            assert len(by_result[f"{UNJUDGED[0]}.J"]) == 2
        results = {r["evaluation_result_id"]: r for r in log["evaluation_results"]}
        assert set(results) == expected | {"overall"}
        cell = results[f"{UNJUDGED[0]}.J"] if judged else results["dialogue_base.S"]
        interval = cell["score_details"]["uncertainty"]["confidence_interval"]
        assert interval["lower"] <= cell["score_details"]["score"] <= interval["upper"]
        assert interval["confidence_level"] == 0.95
    gpt = next(p for p in aggregates if "/openai/gpt-4o/" in p.as_posix())
    reasoning = [s for s in read_jsonl(gpt.with_name(f"{gpt.stem}_samples.jsonl")) if s["sample_id"].endswith("01")
                 and s["evaluation_result_id"] == f"{NO_ANSWER[0]}.S"]  # fmt: skip
    assert reasoning[0]["output"]["reasoning_trace"] and "no_final_answer" in reasoning[0]["metadata"]["flags"]
    again = export(tree, tmp_path / "again")  # the same run writes the same files
    assert [p.relative_to(tmp_path / "again") for p in again] == [p.relative_to(tmp_path / "eee") for p in files]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(files, again, strict=True))


@needs_validator
def test_every_record_validates_with_every_eval_ever(tree, tmp_path):
    _, config, results = tree
    out = tmp_path / "every_eval_ever"
    assert main(["every-eval-ever", "--config", str(config), "--results", results.root.as_posix(),
                 "--figures", str(tmp_path)]) == 0  # fmt: skip
    validation = read_json(out / "validation.json")
    written = sorted(p.relative_to(out).as_posix() for p in (out / "data").rglob("*") if p.is_file())
    assert sorted(r["file"] for r in validation["reports"]) == written and len(written) == 20
    assert all(r["valid"] and not r["errors"] and not r["warnings"] for r in validation["reports"])
    lines = sum(len(read_jsonl(out / name)) for name in written if name.endswith(".jsonl"))
    assert validation["records"] == lines > 0 and validation["version"] == "0.3.0"
    assert read_json(tmp_path / "every_eval_ever.meta.json")["inputs"]
    print(json.dumps({k: validation[k] for k in ("validator", "version", "command", "files", "records")}))


@needs_validator
def test_the_validator_finds_a_broken_record(tree, tmp_path):
    files = export(tree, tmp_path)
    samples = next(p for p in files if p.name.endswith("_samples.jsonl") and "/Qwen/" in p.as_posix())
    lines = samples.read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[4])
    del broken["evaluation"]  # a required field
    samples.write_text("\n".join([*lines[:4], json.dumps(broken, ensure_ascii=False), *lines[5:]]) + "\n")
    with pytest.raises(H2HTalkError, match=rf"{re.escape(samples.relative_to(tmp_path).as_posix())}.*evaluation"):
        write_validation(tmp_path)


def test_without_the_validator_the_export_says_how_to_get_one(tmp_path, monkeypatch):
    python = tmp_path / "python-without-it"
    python.write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv(PYTHON_ENV, str(python))
    with pytest.raises(H2HTalkError, match=r"every-eval-ever is not installed.*Python >= 3\.12.*H2HTALK_EEE_PYTHON"):
        write_validation(tmp_path)
    with pytest.raises(H2HTalkError, match="cannot run it"):
        validator_version(str(tmp_path / "no-such-python"))
