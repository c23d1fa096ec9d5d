"""The scoring stages: BLEU-1..4, ROUGE-1/L, SS and S of a job's cells, with one embedder loaded once (the metric
libraries are imported when a job runs, not when the registry loads). They are declared here, not beside
``score_generation_file`` in ``score_files``: that module imports the metric libraries (numpy, nltk, scipy) as it
loads, and the registry imports every module that declares a stage."""

from __future__ import annotations

import argparse
from typing import Any

from h2htalk.config import embedder_settings
from h2htalk.layout import Cell
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import FIRST, REGISTRY
from h2htalk.stages.spec import Done, Each, EachFile, Grows, Over, Paths, Stage


def _embedder_prefetched(scope, labels):
    """The embedder's prefetch record, where its weights come from the Hugging Face hub."""
    from h2htalk.prefetch import embedder_downloads

    downloads = embedder_downloads(scope.config["embedders"][labels["embedder"]])
    return [scope.results.path("prefetched_embedder", embedder=labels["embedder"])] if downloads else []


FILES = {
    "inputs": {
        "generations": Each("generations"), "references": Each("references"),
        "prefetched": Paths(_embedder_prefetched),
    },
    "outputs": {"scored": Each("score_items"), "summaries": Each("score_summary")},
}  # fmt: skip


@stage(
    "score", "score every Table 2 cell of one model with one embedder", priority=FIRST, targets="scores",
    reads=("scoring", "embedders", "subtasks", "variants", *REGISTRY),
    jobs=Over(model=lambda run: run.run_models, embedder=lambda run: run.embedders),
    cells=lambda run, w: run.scoring(w["model"], w["embedder"]), where="embedder", env="metrics",
    memory_mb=8000, minutes=240, options=("scoring",), **FILES,
    grows=Grows("answer_scored_s", ("generate", "baseline_answers")),  # each answer of its model
)  # fmt: skip
@stage(
    "score_studies",
    "score the safety study's answers of every study model against the safe references, with one embedder",
    reads=("scoring", "embedders", "variants", "studies.models", "models"),
    jobs=Over(embedder=lambda run: run.embedders), cells=lambda run, w: run.study_scoring(w["embedder"]),
    where="embedder", env="metrics", memory_mb=8000, minutes=60, options=("scoring",), **FILES,
    grows=Grows("study_answer_scored_s", ("study.answers",)),  # both studies' answers, though it scores the safety's
)  # fmt: skip
def score_cells(
    embedder: str, prefetched: list[str], config: dict[str, Any], cells: list[Cell], each: EachFile, stage: Stage,
    options: argparse.Namespace,
) -> Done:  # fmt: skip
    """A model's Table 2 cells (score), or every study model's safety answers (score_studies), scored with
    ``embedder``: each cell's generations against its references, its items and summary written."""
    from h2htalk.scoring.score_files import ScoringSetup, mean_s_by_variant, score_generation_file

    definition = embedder_settings(config, embedder, prefetched)
    setup = ScoringSetup.from_config(config, embedder, definition, cache=not getattr(options, "no_cache", False))
    setup.embedder.check()
    summaries = [
        score_generation_file(
            each("generations", cell), each("references", cell), each("scored", cell), each("summaries", cell),
            setup, cell.labels(),
        )
        for cell in cells
    ]  # fmt: skip
    subject = f"{cells[0].model} with {embedder}" if "model" in stage.labels else f"safety study with {embedder}"
    items = sum(s["n"] for s in summaries)
    return Done(f"{len(summaries)} cells, {items} items; {mean_s_by_variant(summaries)}", subject=subject)
