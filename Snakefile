# H2HTalk study workflow. Laptop default: snakemake --profile profiles/local
# Paper study on a SLURM GPU cluster:      snakemake --profile profiles/slurm
# Every stage is one entry of the stage table (src/h2htalk/stages/table.py) and one rule made from it
# (workflow/rules/stages.smk); what is written here are the targets.
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
include: "workflow/rules/stages.smk"


rule all:
    default_target: True
    input:
        rules.table1.output,
        rules.curation_report.output,
        rules.table2_partial.output,
        rules.table2.output,
        rules.table3.output,
        rules.agreement.output,
        rules.fig7.output,
        rules.results_json.output,
        rules.leaderboard.output,
        rules.viewer.output,
        expand(
            rules.figure.output,
            figure=["fig4_wordcloud", "fig5_verb_noun", "fig6_lengths"],
        ),
        # calibration needs the chance floor and the oracle among the baselines
        rules.calibration.output
        if {"baseline-random-reference", "baseline-oracle"} <= set(config["baselines"])
        else [],
        # the instances' review queue, when instances are reconstructed
        rules.instances_review.output
        if config["instances"]["source"] == "reconstructed"
        else [],
        # the judges' reliability card, when every run makes it
        rules.judge_reliability.output
        if config["judge_reliability"]["every_run"]
        else [],


# Named targets of more than one job (a stage's own rule is the target of its outputs: snakemake table2).
rule fig4:
    input:
        expand(rules.figure.output, figure="fig4_wordcloud"),


rule fig5:
    input:
        expand(rules.figure.output, figure="fig5_verb_noun"),


rule fig6:
    input:
        expand(rules.figure.output, figure="fig6_lengths"),


rule prompts:
    input:
        expand(rules.prompt_messages.output, variant=RUN.variants, subtask=RUN.subtasks),


rule generations:
    input:
        expand(rules.generate.output.summary, model=RUN.models),
        expand(rules.baseline_answers.output.summary, model=RUN.baselines),


rule scores:
    input:
        expand(
            rules.score.output.summaries, model=RUN.run_models, embedder=RUN.embedders
        ),


rule reconstruct:
    input:
        rules.reconstruct_instances.output.reports,
        rules.instances_review.output,
