"""The workflow's own hygiene: Snakemake's linter and snakefmt, as the Snakemake workflow catalog checks them."""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO_ROOT
from .test_workflow import copy_checkout


def test_snakemake_lint_is_clean_and_writes_nothing(tmp_path):
    checkout = copy_checkout(tmp_path / "checkout")
    before = sorted(checkout.rglob("*"))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--lint"],
        cwd=checkout, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Congratulations, your workflow is in a good condition!" in output, output
    # it reads the workflow without running it: no review store made, no stale result removed, no folder
    made = [p for p in sorted(checkout.rglob("*")) if p not in before and ".snakemake" not in p.parts]
    assert made == [], made


def test_snakefmt_formatted():
    result = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "Snakefile", "workflow"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
