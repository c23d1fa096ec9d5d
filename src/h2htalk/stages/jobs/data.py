"""The data stages: the release fetched and curated, model and embedder files pinned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.settings import CurateOptions, UpstreamSource
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import EARLY, REGISTRY, models_in_use
from h2htalk.stages.spec import Done, Models, One, Over, Paths
from h2htalk.subtasks import SUBTASK_KEYS, get_subtask


def _upstream_files(scope, labels):
    """The 11 files of the pinned upstream release, `results/data/upstream/{file}`."""
    return [scope.results.path("upstream", file=get_subtask(key).upstream_file) for key in SUBTASK_KEYS]


def _upstream_file(scope, labels):
    """The subtask's upstream file, `results/data/upstream/{file}`."""
    return [scope.results.path("upstream", file=get_subtask(labels["subtask"]).upstream_file)]


@stage(
    "fetch", "download (or copy) and check the 11 upstream reference files",
    reads=("data", "upstream_dir"), minutes=15, options=("upstream",),
    outputs={"manifest": One("manifest"), "files": Paths(_upstream_files)},
)  # fmt: skip
def fetch(manifest: str, files: list[str], source: UpstreamSource, config: dict[str, Any]) -> Done:
    from h2htalk.data.fetch import fetch_release

    fetched = fetch_release(Path(files[0]).parent, manifest, source, config["upstream_dir"])
    lines = sum(f["lines"] for f in fetched["files"])
    return Done(f"{len(fetched['files'])} files, {lines} lines", out=manifest)


@stage(
    "prefetch_model", "fetch a model's Hugging Face weights (and LoRA adapter) and record the commit",
    reads=REGISTRY, jobs=Over(model=models_in_use), entries=lambda s, w: [w["model"]],
    outputs={"record": One("prefetched_model")}, memory_mb=2000, minutes=720,  # a 72B model is about 150 GB
)  # fmt: skip
def prefetch_model(model: str, record: str, models: Models) -> Done:
    from h2htalk.llm.engines import engine_of
    from h2htalk.prefetch import prefetch

    spec = models.entry(model, pinned=False)
    return _prefetched(prefetch("models", model, engine_of(spec).downloads(spec), record), model, record)


@stage(
    "prefetch_embedder", "fetch an embedder's Hugging Face weights and record the commit",
    reads=("embedders",), jobs=Over(embedder=lambda run: run.embedders),
    outputs={"record": One("prefetched_embedder")}, memory_mb=2000, minutes=60,
)  # fmt: skip
def prefetch_embedder(embedder: str, record: str, config: dict[str, Any]) -> Done:
    from h2htalk.prefetch import embedder_downloads, prefetch

    if embedder not in config["embedders"]:
        defined = ", ".join(config["embedders"])
        raise H2HTalkError(f"embedder {embedder!r} is not defined under 'embedders' (defined: {defined})")
    found = prefetch("embedders", embedder, embedder_downloads(config["embedders"][embedder]), record)
    return _prefetched(found, embedder, record)


def _prefetched(record: dict, name: str, out: str) -> Done:
    fetched = ", ".join(f"{d['repo']}@{d['revision'][:12]} ({d['bytes']} bytes)" for d in record["downloads"])
    return Done(fetched or "nothing to fetch", subject=name, out=out)


@stage(
    "curate", "curate one fetched upstream file into flagged JSONL",
    uses=("curation",), reads=("data",), jobs=Over(subtask=lambda run: run.subtasks), minutes=10, memory_mb=1000,
    inputs={"manifest": One("manifest"), "upstream": Paths(_upstream_file)},
    outputs={"curated": One("curated"), "report": One("curation")},
)  # fmt: skip
def curate(
    subtask: str, upstream: list[str], manifest: str, curated: str, report: str, curation: CurateOptions
) -> Done:
    from h2htalk.data.curate import curate_subtask

    (upstream_file,) = upstream
    found = curate_subtask(get_subtask(subtask), upstream_file, manifest, curated, report, curation)
    flagged = ", ".join(f"{f}={n}" for f, n in found["flags"].items() if n)
    kept = f"{found['released']} released, {found['kept']} kept" + (f" ({flagged})" if flagged else "")
    return Done(kept, subject=subtask)


@stage(
    "curation_report", "combine the curation reports", reads=("subtasks",), priority=EARLY, in_all=lambda config: True,
    inputs={"reports": One("curation", over=("subtask", "subtasks"))},
    outputs={"json": One("curation_report"), "md": One("curation_report_md")},
)  # fmt: skip
def curation_report(reports: list[str], json: str, md: str) -> Done:
    from h2htalk.data.curation_report import write_curation_report

    combined = write_curation_report(reports, json, md)
    return Done(f"{combined['totals']['released']} released, {combined['totals']['kept']} kept", out=md)
