# H2HTalk study workflow. Laptop default: snakemake --profile profiles/local
# Paper study on a SLURM GPU cluster:      snakemake --profile profiles/slurm
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")

# The rules' logic lives in the h2htalk package; make the checkout's copy importable.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from h2htalk.config import validate_config
from h2htalk.errors import ConfigError


# The paper study; --configfile(s) overlay it (config/local.yaml: the laptop), --config overrides single keys.
configfile: "config/config.yaml"


try:
    _validated = validate_config(config)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
config.clear()
config.update(_validated)


include: "workflow/rules/common.smk"


wildcard_constraints:
    subtask="|".join(SUBTASK_KEYS),
    variant="|".join(ALL_VARIANTS),
    model="|".join(map(re.escape, REGISTRY)),
    embedder="|".join(map(re.escape, config["embedders"])),
    study="|".join(STUDIES),
    figure="|".join(FIGURES),


# Small steps run where Snakemake runs (on a cluster: the submit host, which also has the network the data
# stage needs); jobs that run a model or an embedder are submitted.
localrules:
    fetch,
    prefetch_model,
    prefetch_embedder,
    curate,
    curation_report,
    instances,
    instances_review,
    prompt_messages,
    study_inputs,
    provision_model,
    baseline_answers,
    combine_j,
    review_queue,
    provenance,
    table1,
    table2,
    table3,
    agreement,
    calibration,
    figure,
    fig7,
    results_json,
    leaderboard,
    every_eval_ever,
    viewer,
    judge_reliability,
    plan,


include: "workflow/rules/data.smk"
include: "workflow/rules/instances.smk"
include: "workflow/rules/prompts.smk"
include: "workflow/rules/generation.smk"
include: "workflow/rules/scoring.smk"
include: "workflow/rules/judge.smk"
include: "workflow/rules/studies.smk"
include: "workflow/rules/provenance.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/export.smk"
include: "workflow/rules/reliability.smk"
include: "workflow/rules/plan.smk"


rule all:
    default_target: True
    input:
        rules.table1.output,
        rules.curation_report.output,
        rules.table2.output,
        rules.fig4.input,
        rules.fig5.input,
        rules.fig6.input,
        rules.table3.output,
        rules.agreement.output,
        rules.fig7.output,
        calibration_targets(),
        instance_review_targets(),
        rules.results_json.output,
        rules.leaderboard.output,
        rules.viewer.output,
        reliability_targets(),
