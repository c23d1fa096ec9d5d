"""What a rule lists as its inputs: one file of each job it reads from, so that Snakemake links the same jobs
as the stage's every declared file would, and resolves a few hundred files instead of thousands."""

from __future__ import annotations

from h2htalk.config import load_config, load_registry, registry_files
from h2htalk.layout import Layout, instances_set
from h2htalk.stages.table import BY_NAME, STAGES
from h2htalk.stages.workflow import Rules

from .conftest import REPO_ROOT


def paper_rules() -> Rules:
    config = load_config(REPO_ROOT / "config" / "config.yaml")  # the paper's study
    return Rules(config, Layout("results", instances_set(config)), load_registry(registry_files(config)))


def test_a_rule_depends_on_every_job_its_stage_reads_from_through_one_file_of_each():
    rules = paper_rules()
    listed_in_all = declared_in_all = 0
    for stage in STAGES:
        for labels in stage.jobs(rules.scope.run):
            declared = [p for paths in stage.files("inputs", rules.scope, labels).values() for p in paths]
            listed = [
                p for paths in rules.one_per_job(stage.files("inputs", rules.scope, labels)).values() for p in paths
            ]
            producers = [rules.producers.get(path) for path in listed]
            assert {rules.producers.get(path) for path in declared} == set(producers), (stage.name, labels)
            made = [job for job in producers if job is not None]
            assert len(made) == len(set(made)), (stage.name, labels)  # one file of each job
            # a file no job makes (the registry, the paper's numbers, people's ratings) is always listed
            assert {p for p in declared if rules.producers.get(p) is None} <= set(listed), (stage.name, labels)
            listed_in_all, declared_in_all = listed_in_all + len(listed), declared_in_all + len(declared)
    assert listed_in_all < declared_in_all / 3


def test_table2_lists_a_file_of_each_scoring_job_and_keeps_the_names_of_its_inputs():
    rules = paper_rules()
    stage = BY_NAME["table2"]
    declared = stage.files("inputs", rules.scope, {})
    listed = rules.one_per_job(declared)
    assert listed.keys() == declared.keys()
    scoring = {rules.producers[p] for p in listed["summaries"] if rules.producers.get(p, ("",))[0] == "score"}
    assert len(scoring) == 37  # 33 models and 4 baselines, each scored once by BGE-M3
    assert sum(map(len, listed.values())) < sum(map(len, declared.values())) / 5
