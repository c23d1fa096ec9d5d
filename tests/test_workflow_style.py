"""The workflow's own hygiene: Snakemake's linter and snakefmt, as the Snakemake workflow catalog checks them."""

from __future__ import annotations

import subprocess
import sys

from .conftest import REPO_ROOT


def test_snakemake_lint_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--lint"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Congratulations, your workflow is in a good condition!" in output, output


def test_snakefmt_formatted():
    result = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "Snakefile", "workflow"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
