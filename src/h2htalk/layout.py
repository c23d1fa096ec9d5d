"""The results tree: every result has one address.

A *cell* is what most results are about: a model, a variant, a task (a subtask, or one of the two studies)
and, for scores, an embedder. ``Layout`` maps a cell, or a stage's other labels, to its path under the
results root, and a path back to its labels. The workflow derives its path patterns from it and the
commands derive their inputs and outputs from it, so the folder layout is written down once.

Runs on different instance sets (the demo set, the reconstructed benchmark, instance files of one's own, a
limited run) live side by side: what depends on the instances lives under ``sets/{set}/`` of the root and
``paper_figures/{set}/``; what does not (the released data, the reconstruction, model files, prefetch records;
the caches, whose keys hold the prompts) is shared. A Layout without a set (a command run by hand without
``--instance-set``) keeps one set at the root.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.settings import LADDER_PARTS, STUDIES, VARIANTS
from h2htalk.subtasks import SUBTASK_KEYS

# Kind -> path pattern under the results root. A pattern's fields are the labels of what it holds.
PATTERNS: dict[str, str] = {
    "config": "config.json",
    "provenance": "provenance.json",
    "manifest": "data/manifest.json",
    "upstream": "data/upstream/{file}",
    "curated": "data/curated/{subtask}.jsonl",
    "curation": "data/curated/{subtask}.report.json",
    "curation_report": "data/curation_report.json",
    "curation_report_md": "data/curation_report.md",
    "instances": "instances/{subtask}.jsonl",
    "reconstructed": "reconstructed/{subtask}.jsonl",
    "reconstruction_report": "reconstructed/{subtask}.report.json",
    "instance_review": "review/instances/{subtask}.csv",
    "instance_review_all": "review/instances.csv",
    "prompts": "prompts/{variant}/{subtask}.jsonl",
    "study_prompts": "studies/{study}/prompts/{variant}.jsonl",
    "study_items": "studies/{study}/items/{variant}.jsonl",
    "model_file": "models/{model}.gguf",
    "prefetched_model": "prefetch/models/{model}.json",
    "prefetched_embedder": "prefetch/embedders/{embedder}.json",
    "generations": "generations/{model}/{variant}/{subtask}.jsonl",
    "study_generations": "generations/{model}/{variant}/{study}.jsonl",
    "generation_run": "generations/{model}/run.json",
    "study_generation_run": "generations/{model}/studies.run.json",
    "score_items": "scores/{embedder}/{model}/{variant}/{subtask}.items.jsonl",
    "score_summary": "scores/{embedder}/{model}/{variant}/{subtask}.summary.json",
    "study_score_items": "studies/{study}/scores/{embedder}/{model}/{variant}.items.jsonl",
    "study_score_summary": "studies/{study}/scores/{embedder}/{model}/{variant}.summary.json",
    "judge_samples": "judge_samples/{model}/{variant}/{subtask}.jsonl",
    "judge_run": "judge_samples/{model}/run.json",
    "judge_sample": "judge_sample/{model}/{variant}/{subtask}.jsonl",  # the strong judge's sample (cascade mode)
    "j_items": "j_scores/{embedder}/{model}/{variant}/{subtask}.items.jsonl",
    "j_summary": "j_scores/{embedder}/{model}/{variant}/{subtask}.summary.json",
    "review_queue": "review/queue.csv",
    "study_verdicts": "studies/{study}/verdicts/{model}/{variant}.jsonl",
    "study_judge_run": "studies/verdicts/{model}.run.json",
    "study_judge_sample": "studies/{study}/judge_sample/{model}/{variant}.jsonl",
    "judge_ladder": "judge_reliability/{model}/{part}/ladder.jsonl",
    "judge_canary": "judge_reliability/{model}/{part}/canary.json",
    "judge_ladder_run": "judge_reliability/{model}/{part}/run.json",
    "canaries": "judge_canary",  # the drift canaries, kept across runs: each role's history and its runs' verdicts
    "canary_history": "judge_canary/{role}/history.jsonl",
    "canary_run": "judge_canary/{role}/runs/{digest}.jsonl",
    "plan": "plan.csv",
    "plan_md": "plan.md",
    "logs": "logs",
    "benchmarks": "benchmarks",
}

# What a cell has (``Layout.cell_path``): its prompts and references (its task's), and its own results
CELL_KINDS = ("prompts", "references", "generations", "score_items", "score_summary", "judge_samples", "judge_sample",
              "j_items", "j_summary", "verdicts")  # fmt: skip
# Kinds that do not depend on the instance set: one copy serves every set's runs.
SHARED_KINDS = frozenset({
    "manifest", "upstream", "curated", "curation", "curation_report", "curation_report_md", "reconstructed",
    "reconstruction_report", "instance_review", "instance_review_all", "model_file", "prefetched_model",
    "prefetched_embedder",
})  # fmt: skip
FIGURES = "paper_figures"  # the tables and figures, beside the results tree

LABEL_VALUES: dict[str, tuple[str, ...]] = {  # the labels whose values are known, not the run's (its models)
    "subtask": SUBTASK_KEYS, "study": STUDIES, "variant": VARIANTS, "part": tuple(LADDER_PARTS),
}  # fmt: skip


@dataclass(frozen=True)
class Cell:
    """A model's result for one variant and one task (a subtask key, or a study), scored by ``embedder``."""

    model: str
    variant: str
    task: str
    embedder: str | None = None

    @property
    def is_study(self) -> bool:
        return self.task in STUDIES

    def scored_by(self, embedder: str) -> Cell:
        return replace(self, embedder=embedder)

    def labels(self) -> dict[str, str]:
        """The pattern fields of this cell: ``study`` or ``subtask`` for the task."""
        labels = {"model": self.model, "variant": self.variant, ("study" if self.is_study else "subtask"): self.task}
        return labels | ({"embedder": self.embedder} if self.embedder else {})


def instances_set(config: dict[str, Any]) -> str:
    """The name of the run's instance set (``instances``): ``demo``, ``reconstructed``, or ``file-`` and a digest of
    the files listed; a limited run is a set of its own (``-first{N}``)."""
    instances = config["instances"]
    name = instances["source"]
    if name == "file":
        listed = json.dumps(instances["files"], sort_keys=True).encode()
        name += "-" + hashlib.sha256(listed).hexdigest()[:8]
    if instances.get("limit") is not None:
        name += f"-first{instances['limit']}"
    return name


class Layout:
    """Paths of the results tree under ``root`` (``results`` in the workflow), for the instance set
    ``instance_set`` (None: one set at the root)."""

    def __init__(self, root: str = "results", instance_set: str | None = None, figures: str | None = None) -> None:
        self.root = PurePosixPath(root)
        self.instance_set = instance_set
        self._figures = figures  # the tables folder, where it is not the set's under paper_figures/
        self._borrowed: tuple[Layout, frozenset[str]] | None = None
        self._patterns: dict[str, str] = {}

    def the_set(self, instance_set: str | None, figures: str | None = None) -> Layout:
        """This tree in the instance set ``instance_set`` (by default the one set it holds, or none), with its tables
        in ``figures`` where given; an error where the tree holds several sets and none is named."""
        if not instance_set:
            sets = Path(str(self.root), "sets")
            found = sorted(p.name for p in sets.iterdir() if p.is_dir()) if sets.is_dir() else []
            if len(found) > 1:
                raise H2HTalkError(f"{sets} holds the results of {len(found)} instance sets ({', '.join(found)}): "
                                   "name one with --instance-set")  # fmt: skip
            instance_set = found[0] if found else None
        return Layout(str(self.root), instance_set, figures)

    def reading(self, other: Layout, kinds: frozenset[str]) -> Layout:
        """This tree, with the results of ``kinds`` at their paths in ``other`` (a plan's scratch tree reads the
        run's curated references and model files)."""
        layout = Layout(str(self.root), self.instance_set, self._figures)
        layout._borrowed = (other, kinds)
        return layout

    def pattern(self, kind: str) -> str:
        """The path pattern of ``kind`` under the root, with its labels as ``{fields}`` (Snakemake's wildcards)."""
        if self._borrowed and kind in self._borrowed[1]:
            return self._borrowed[0].pattern(kind)
        if kind not in self._patterns:  # a DAG of the paper study asks for tens of thousands of paths
            root = self.root if kind in SHARED_KINDS else PurePosixPath(self.set_root)
            self._patterns[kind] = str(root / PATTERNS[kind])
        return self._patterns[kind]

    @property
    def set_root(self) -> str:
        """The folder of the set's own results (the root itself without a set)."""
        return str(self.root if self.instance_set is None else self.root / "sets" / self.instance_set)

    @property
    def figures(self) -> str:
        """The folder of the set's tables and figures."""
        if self._figures is not None:
            return self._figures
        return FIGURES if self.instance_set is None else f"{FIGURES}/{self.instance_set}"

    def figure(self, name: str) -> str:
        return f"{self.figures}/{name}"

    def path(self, kind: str, **labels: str) -> str:
        """The path of one result of ``kind``; a label given as ``{name}`` stays a wildcard."""
        return self.pattern(kind).format(**labels)

    # --- cells ------------------------------------------------------------------------------------------

    def generations(self, cell: Cell) -> str:
        return self.path("study_generations" if cell.is_study else "generations", **cell.labels())

    def score_items(self, cell: Cell) -> str:
        return self.path("study_score_items" if cell.is_study else "score_items", **cell.labels())

    def score_summary(self, cell: Cell) -> str:
        return self.path("study_score_summary" if cell.is_study else "score_summary", **cell.labels())

    def judge_samples(self, cell: Cell) -> str:
        return self.path("judge_samples", **cell.labels())

    def judge_sample(self, cell: Cell) -> str:
        """The role's own judge's verdicts on the cell's cascade sample (empty in full mode)."""
        return self.path("study_judge_sample" if cell.is_study else "judge_sample", **cell.labels())

    def j_items(self, cell: Cell) -> str:
        return self.path("j_items", **cell.labels())

    def j_summary(self, cell: Cell) -> str:
        return self.path("j_summary", **cell.labels())

    def verdicts(self, cell: Cell) -> str:
        return self.path("study_verdicts", **cell.labels())

    def prompts(self, variant: str, task: str) -> str:
        """The rendered prompts of a subtask, or a study's, for one variant."""
        if task in STUDIES:
            return self.path("study_prompts", study=task, variant=variant)
        return self.path("prompts", subtask=task, variant=variant)

    def references(self, variant: str, task: str) -> str:
        """What answers to ``task`` are scored against: the subtask's instances, or the study's items."""
        if task in STUDIES:
            return self.path("study_items", study=task, variant=variant)
        return self.path("instances", subtask=task)

    def cell_path(self, kind: str, cell: Cell) -> str:
        """A cell's result of ``kind`` (one of ``CELL_KINDS``): one of the methods above, or ``prompts`` and
        ``references`` of its task."""
        if kind in ("prompts", "references"):
            return getattr(self, kind)(cell.variant, cell.task)
        return getattr(self, kind)(cell)
