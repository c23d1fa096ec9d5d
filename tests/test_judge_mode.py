"""Each judge role's mode (``rubric_judge.mode``, ``study_judge.mode``) is read in one place, ``settings.JudgeMode``,
which says who judges the role's items; everything else asks it."""

from __future__ import annotations

import ast
from dataclasses import replace

from h2htalk.config import default_config
from h2htalk.settings import JUDGE_SECTION_NAMES, JudgeMode, JudgeSettings, StudyJudgeSettings

from .conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "src" / "h2htalk"


def test_the_mode_says_who_judges_in_the_order_a_job_starts_them():
    config = default_config()
    for section in JUDGE_SECTION_NAMES:
        own = config[section]["model"]
        full = JudgeMode.from_config(config, section)
        assert (full.mode, full.cascade, full.judges) == ("full", False, (own,))
        config[section].update(mode="cascade", cheap_model="cheap-judge")
        cascade = JudgeMode.from_config(config, section)
        assert cascade.cascade and cascade.judges == ("cheap-judge", own)  # the cheap judge first: every item
        judge = {"rubric_judge": JudgeSettings, "study_judge": StudyJudgeSettings}[section].from_config(config)
        assert cascade.every_item_judge(judge) == replace(judge, model="cheap-judge")
        assert full.every_item_judge(judge) == judge
        config[section]["cheap_model"] = own
        assert JudgeMode.from_config(config, section).judges == (own,)  # one model, started once


def _is_get(node: ast.AST, key: str) -> bool:
    """``node`` is ``x.get(key, ...)``."""
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
        and bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == key
    )  # fmt: skip


def _reads_of_mode(tree: ast.AST) -> list[int]:
    """Lines reading a key ``mode`` (``x["mode"]``, ``x.get("mode")``), but a judge run's summary's record of its
    cascade (``summary.get("cascade", {}).get("mode")``)."""

    def read(node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            return isinstance(node.slice, ast.Constant) and node.slice.value == "mode"
        return _is_get(node, "mode") and not _is_get(node.func.value, "cascade")

    return [node.lineno for node in ast.walk(tree) if read(node)]


def test_no_module_but_settings_reads_a_mode_from_the_config():
    found = [
        f"{path.relative_to(REPO_ROOT)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "settings.py"
        for line in _reads_of_mode(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, "read a judge's mode through settings.JudgeMode:\n" + "\n".join(found)
    assert _reads_of_mode(ast.parse('c["rubric_judge"]["mode"]\nc["x"].get("mode")\nc.get("cascade", {}).get("mode")'))
    assert len(_reads_of_mode(ast.parse('c["rubric_judge"]["mode"]\nc["x"].get("mode")'))) == 2
