# Shared by every rule: the results tree (h2htalk.layout), the stage table's rules for this run
# (h2htalk.stages.workflow), the freshness check and what a run says when it starts and ends.
import time

from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod

from h2htalk.config import load_registry, registry_files
from h2htalk.cli import build_parser
from h2htalk.errors import ConfigError, H2HTalkError
from h2htalk.freshness import clearing_stale_first
from h2htalk.layout import Layout, instances_set
from h2htalk.run_summary import run_summary

# One results tree for every instance set: the set's own results under results/sets/{set}/ and its tables under
# paper_figures/{set}/, the data, the reconstruction and the model files shared (h2htalk.layout).
LAYOUT = Layout("results", instances_set(config))
# A stage declared wrong (@stage) fails here, as the registry loads, naming it, before any job starts; so does a
# command (@command): every job runs one.
try:
    from h2htalk.stages.table import STAGES
    from h2htalk.stages.workflow import Rules

    build_parser()
    RULES = Rules(
        config, LAYOUT, load_registry(registry_files(config)), workflow.basedir
    )
except H2HTalkError as exc:
    raise WorkflowError(str(exc)) from None
# Rules run "python -m h2htalk" from the checkout's package, in their conda env where Snakemake deploys them.
_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
shell.prefix(RULES.shell_prefix(conda=_CONDA))

if workflow.is_main_process:
    # Results whose inputs are gone (a failed job's outputs are removed; a killed forced job leaves none) are
    # removed when Snakemake runs jobs, before it plans them, so that the run rebuilds them and everything missing
    # under them; a dry run says them, and a mode that runs no job (--summary, a report) leaves them.
    workflow.execute = clearing_stale_first(workflow.execute, config, LAYOUT, logger)


RUN_STARTED = time.time()
# The run's expected time, as said when its jobs start (h2htalk.plan.timing.SaidTime).
SAID = {}


onstart:
    # Not in a dry run (it runs no job). Before the first job: the models' API keys checked, the tables the run
    # remakes removed, its configuration written, and on this machine its time said (h2htalk.stages.workflow).
    try:
        SAID["time"] = RULES.start(
            workflow.dag.needrun_jobs(), logger, local=workflow.local_exec
        )
    except ConfigError as exc:
        raise WorkflowError(str(exc)) from None


onsuccess:
    # The run ends with what it made and where, what to open first, and the warnings that matter; and the time it
    # took beside the time said, whose rates are kept for the next estimate.
    for level, line in run_summary(
        config, LAYOUT.figures, RUN_STARTED, log, LAYOUT.path("logs")
    ):
        logger.log(level, line)
    if SAID.get("time"):
        SAID["time"].say_taken(LAYOUT.path("benchmarks"), RUN_STARTED, logger)
