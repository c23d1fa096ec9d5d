"""The data stages' work: the release fetched and curated, model and embedder files, instances and prompts."""

from __future__ import annotations

from pathlib import Path

from h2htalk.errors import H2HTalkError
from h2htalk.stages.job import Done, Job


def fetch(job: Job) -> Done:
    from h2htalk.data.fetch import fetch_release
    from h2htalk.settings import UpstreamSource

    manifest_path = job.output("manifest")
    out_dir = Path(job.outputs["files"][0]).parent
    manifest = fetch_release(out_dir, manifest_path, UpstreamSource.from_config(job.config), job.config["upstream_dir"])
    lines = sum(f["lines"] for f in manifest["files"])
    return Done(f"{len(manifest['files'])} files, {lines} lines", out=manifest_path)


def prefetch_model(job: Job) -> Done:
    from h2htalk.llm.engines import engine_of
    from h2htalk.prefetch import prefetch

    name = job.labels["model"]
    spec = job.models.entry(name, pinned=False)
    return _prefetched(prefetch("models", name, engine_of(spec).downloads(spec), job.output("record")), name, job)


def prefetch_embedder(job: Job) -> Done:
    from h2htalk.prefetch import embedder_downloads, prefetch

    name = job.labels["embedder"]
    if name not in job.config["embedders"]:
        defined = ", ".join(job.config["embedders"])
        raise H2HTalkError(f"embedder {name!r} is not defined under 'embedders' (defined: {defined})")
    record = prefetch("embedders", name, embedder_downloads(job.config["embedders"][name]), job.output("record"))
    return _prefetched(record, name, job)


def _prefetched(record: dict, name: str, job: Job) -> Done:
    fetched = ", ".join(f"{d['repo']}@{d['revision'][:12]} ({d['bytes']} bytes)" for d in record["downloads"])
    return Done(fetched or "nothing to fetch", subject=name, out=job.output("record"))


def curate(job: Job) -> Done:
    from h2htalk.data.curate import curate_subtask
    from h2htalk.settings import CurateOptions
    from h2htalk.subtasks import get_subtask

    report = curate_subtask(
        get_subtask(job.labels["subtask"]), job.input("upstream"), job.input("manifest"), job.output("curated"),
        job.output("report"), CurateOptions.from_config(job.config),
    )  # fmt: skip
    flagged = ", ".join(f"{f}={n}" for f, n in report["flags"].items() if n)
    kept = f"{report['released']} released, {report['kept']} kept" + (f" ({flagged})" if flagged else "")
    return Done(kept, subject=job.labels["subtask"])


def curation_report(job: Job) -> Done:
    from h2htalk.data.curation_report import write_curation_report

    combined = write_curation_report(job.inputs["reports"], job.output("json"), job.output("md"))
    return Done(f"{combined['totals']['released']} released, {combined['totals']['kept']} kept", out=job.output("md"))


def instances(job: Job) -> Done:
    from h2htalk.instances.sources import write_instances

    limit, source = job.config["instances"]["limit"], job.inputs["source"]
    file = source[0] if source else None
    count = write_instances(job.labels["subtask"], job.output("instances"), file=file, limit=limit)
    limited = f", the first {limit}" if limit is not None else ""
    return Done(f"{count} instances ({file or 'demo set'}{limited})", job.labels["subtask"], job.output("instances"))


def instances_review(job: Job) -> Done:
    from h2htalk.io import join_csv

    return Done(f"{join_csv(job.inputs['queues'], job.output('review'))} rows", out=job.output("review"))


def prompts(job: Job) -> Done:
    from h2htalk.instance_schema import read_instances
    from h2htalk.prompts.render import write_prompts

    out, variant = job.output("prompts"), job.labels["variant"]
    count = write_prompts(read_instances(job.input("instances")), variant, out)
    return Done(f"{count} prompts", subject=f"{job.labels['subtask']} ({variant})", out=out)


def study_inputs(job: Job) -> Done:
    from h2htalk.settings import StudySample
    from h2htalk.studies.data import scenario_file, write_study_inputs

    study, variant = job.labels["study"], job.labels["variant"]
    sample, prompts = StudySample.from_config(job.config), job.out_path("prompts")
    count = write_study_inputs(
        study, variant, prompts, job.out_path("study_items"), scenario_file(job.config["studies"], study),
        sample=sample.size(study), seed=sample.seed,
    )  # fmt: skip
    return Done(f"{count} items", subject=f"{study} ({variant})", out=prompts)


def provision_model(job: Job) -> Done:
    from h2htalk.generation.provision import provision_gguf
    from h2htalk.llm.engines import engine_of

    name = job.labels["model"]
    spec = job.models.entry(name, pinned=False)
    if not engine_of(spec).needs_model_file:
        raise H2HTalkError(f"model {name!r}: engine {spec['engine']} needs no model file")
    record = provision_gguf(spec["gguf"], job.output("gguf"))
    return Done(f"{record['size']} bytes, sha256 {record['sha256'][:12]}", subject=name, out=job.output("gguf"))
