"""The scoring stages: BLEU-1..4, ROUGE-1/L, SS and S of the job's cells, with one embedder loaded once."""

from __future__ import annotations

from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.stages.job import Done, Job


def score(job: Job) -> Done:
    """A model's Table 2 cells (score), or every study model's safety answers (score_studies)."""
    from h2htalk.scoring.score_files import ScoringSetup, mean_s_by_variant, score_generation_file

    name = job.labels["embedder"]
    setup = ScoringSetup.from_config(job.config, name, embedder(job, name), cache=not job.option("no_cache", False))
    setup.embedder.check()
    summaries = [
        score_generation_file(
            job.each("generations", cell), job.each("references", cell), job.each("scored", cell),
            job.each("summaries", cell), setup, cell.labels(),
        )
        for cell in job.cells
    ]  # fmt: skip
    model = job.labels.get("model")
    subject = f"{model} with {name}" if model else f"safety study with {name}"
    items = sum(s["n"] for s in summaries)
    return Done(f"{len(summaries)} cells, {items} items; {mean_s_by_variant(summaries)}", subject=subject)


def embedder(job: Job, name: str) -> dict[str, Any]:
    """An embedder's definition, at the commit its prefetch record names (then the job runs offline)."""
    from h2htalk.prefetch import embedder_downloads, pinned_embedder, read_records

    embedders = job.config["embedders"]
    if name not in embedders:
        raise H2HTalkError(f"embedder {name!r} is not defined under 'embedders' (defined: {', '.join(embedders)})")
    settings = embedders[name]
    if not embedder_downloads(settings):
        return settings
    record = read_records(job.inputs["prefetched"])
    return pinned_embedder(settings, record[("embedders", name)])
