"""The Every Eval Ever export checked by that project's own validator: ``python -m every_eval_ever validate``, the
command its documentation gives, over every aggregate and samples file, with its repository checks (paths,
companion files, score bounds, model identity).

every-eval-ever needs Python 3.12 or later (and a huggingface-hub that the ``bge`` extra's transformers cannot
share), so it may live in another environment than the workflow: ``$H2HTALK_EEE_PYTHON`` names that Python; by
default it is the one running this, as in the rule's own conda environment (``envs/export.yaml``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.io import write_json_atomic

PYTHON_ENV = "H2HTALK_EEE_PYTHON"
PACKAGE = "every-eval-ever"
FILES = "data/*/*/*/*.json*"  # every aggregate and samples file of the datastore layout
TIMEOUT_S = 3600


def validator_python() -> str:
    return os.environ.get(PYTHON_ENV) or sys.executable


def validator_version(python: str) -> str:
    """The installed every-eval-ever of ``python``, or an error that says how to get one."""
    probe = [python, "-c", f"from importlib.metadata import version; print(version({PACKAGE!r}))"]
    try:
        found = subprocess.run(probe, capture_output=True, text=True, timeout=120, check=False)
    except OSError as exc:
        raise H2HTalkError(f"{PYTHON_ENV}={python}: cannot run it ({exc})") from None
    if found.returncode != 0:
        raise H2HTalkError(
            f"{PACKAGE} is not installed for {python}; it validates the Every Eval Ever export and needs Python"
            f" >= 3.12: run the rule with --software-deployment-method conda (envs/export.yaml), or set"
            f" {PYTHON_ENV} to a Python 3.12 that has it (pip install '{PACKAGE}==0.3.0')"
        )
    return found.stdout.strip()


def validate_export(root: str | os.PathLike[str]) -> dict[str, Any]:
    """Run the validator over every file under ``root/data``: its version, the command, and its report per file
    (``valid``, ``errors``, ``warnings``)."""
    python = validator_python()
    version = validator_version(python)
    command = [python, "-m", "every_eval_ever", "validate", "--format", "json", FILES]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    try:
        reports = json.loads(done.stdout)
    except json.JSONDecodeError:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise H2HTalkError(f"the {PACKAGE} validator failed in {root}: {detail[0]}") from None
    return {
        "validator": PACKAGE,
        "version": version,
        "command": " ".join(["python", *command[1:]]),
        "exit_status": done.returncode,
        "files": len(reports),
        "records": sum(r.get("line_count", 0) for r in reports if r.get("file_type") == "instance"),
        "reports": reports,
    }


def problems(validation: dict[str, Any]) -> list[str]:
    """Every error and warning, one line each (a warning makes a file valid but not ready to submit)."""
    lines = []
    for report in validation["reports"]:
        for kind in ("errors", "warnings"):
            for finding in report.get(kind, []):
                lines.append(f"{report['file']}: {kind[:-1]}: {finding.get('loc')}: {finding.get('msg')}")
    return lines


def write_validation(root: str | os.PathLike[str]) -> dict[str, Any]:
    """Validate the export under ``root`` and keep the validator's report beside it (``validation.json``); fail
    on any error or warning, naming each."""
    validation = validate_export(root)
    write_json_atomic(Path(root) / "validation.json", validation)
    found = problems(validation)
    if found or validation["exit_status"] != 0 or not validation["files"]:
        shown = "\n".join(f"  - {line}" for line in found[:20]) or f"  - exit status {validation['exit_status']}"
        more = f"\n  ... and {len(found) - 20} more" if len(found) > 20 else ""
        raise H2HTalkError(f"the Every Eval Ever export in {root} does not validate:\n{shown}{more}")
    return validation
