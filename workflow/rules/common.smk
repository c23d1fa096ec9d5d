# Shared by every rule: the results tree (h2htalk.layout), the stage table's rules for this run
# (h2htalk.stages.workflow), the freshness check and what a run says when it starts and ends.
import time

from snakemake.logging import logger
from snakemake.settings.types import DeploymentMethod

from h2htalk.config import (
    VALIDATED_DIGEST,
    check_environment,
    load_registry,
    registry_files,
    resolved_digest,
    write_resolved,
)
from h2htalk.errors import ConfigError
from h2htalk.freshness import clear_stale, remove_paths
from h2htalk.layout import Layout, instances_set
from h2htalk.llm.engines import engine_of
from h2htalk.hardware import cpu_snapshot, other_processes_cores
from h2htalk.run_summary import run_summary
from h2htalk.stages.table import STAGES
from h2htalk.stages.workflow import Rules

# Rules run "python -m h2htalk" from the checkout's package: with --software-deployment-method conda
# in the rule's conda env, otherwise with the interpreter that runs Snakemake. Their commands read the run's
# configuration file as the Snakefile validated it, by its digest, without validating it again (h2htalk.config).
_SRC = Path(workflow.basedir) / "src"
_ENV = f"export PYTHONPATH={_SRC} {VALIDATED_DIGEST}={resolved_digest(config)}; "
if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
    shell.prefix(_ENV)
else:
    shell.prefix(f"{_ENV}export PATH={Path(sys.executable).parent}:$PATH; ")

# One results tree for every instance set: the set's own results under results/sets/{set}/ and its tables under
# paper_figures/{set}/, the data, the reconstruction and the model files shared (h2htalk.layout).
LAYOUT = Layout("results", instances_set(config))
RULES = Rules(config, LAYOUT, load_registry(registry_files(config)), workflow.basedir)
# A dry run writes nothing (Snakemake's own workflow.dryrun is only known once the DAG is built).
DRY_RUN = workflow.output_settings.dryrun

if workflow.is_main_process:
    # Results whose inputs are gone (a failed job's outputs are removed; a killed forced job leaves none) are
    # removed, so that the run rebuilds them and everything missing under them (h2htalk.freshness).
    clear_stale(config, LAYOUT, logger, dry_run=DRY_RUN)
    # The review desk's store of people's ratings, an input of the rules that read ratings: made where there is none.
    if not DRY_RUN:
        RULES.make_review_store()


onstart:
    # Not in a dry run (it runs no job): the models the jobs will start find their API keys, before any starts.
    started = {
        name
        for job in workflow.dag.needrun_jobs()
        for name in RULES.started(job.rule.name, job.wildcards)
    }
    try:
        check_environment(config, started)
    except ConfigError as exc:
        raise WorkflowError(str(exc)) from None
    # The tables this run remakes go now: a run stopped before it remakes them leaves none that disagrees with the
    # results under it (the partial Table 2, made from the scores before the judge runs, says what is final).
    remove_paths(RULES.tables_of(workflow.dag.needrun_jobs()))
    # Every command reads the run's validated configuration from one file (only the keys its stage declares).
    write_resolved(config, LAYOUT.path("config"))
    # On this machine, the jobs of models on its CPU say how long they will take before the first starts (plan.timing).
    timed = [
        name
        for name in started
        if name in RULES.registry and engine_of(RULES.registry[name]).timed_on_cpu
    ]
    if workflow.local_exec and timed:
        # imported here: the plan's model calls load the API client, seconds a dry run or a cluster job need not spend
        from h2htalk.plan.calls import job_name
        from h2htalk.plan.timing import cache_line, estimate_run

        # the run's start: the load other processes put on the run is read at its end
        EXPECTED["cpu"] = cpu_snapshot()
        jobs = list(workflow.dag.needrun_jobs())
        needed = {
            job_name(job.rule.name, dict(job.wildcards.items())) for job in jobs
        }
        others = [
            job_name(job.rule.name, dict(job.wildcards.items()))
            for job in jobs
            if not RULES.started(job.rule.name, job.wildcards)
        ]
        try:
            EXPECTED["run"] = estimate_run(
                STAGES, config, LAYOUT, RULES.registry, needed, others
            )
        except Exception as exc:  # an estimate never stops a run
            logger.warning(f"No time estimate: {exc}")
        if EXPECTED.get("run"):
            logger.info(EXPECTED["run"].line())
            logger.info(cache_line(EXPECTED["run"].cache))
            EXPECTED["said_at"] = time.time()  # the time taken is counted from here


RUN_STARTED = time.time()
EXPECTED = {}


onsuccess:
    # The run ends with what it made and where, what to open first, and the warnings that matter.
    for level, line in run_summary(
        config, LAYOUT.figures, RUN_STARTED, log, LAYOUT.path("logs")
    ):
        logger.log(level, line)
    if EXPECTED.get("run"):
        from h2htalk.plan.timing import (
            actual_line,
            job_seconds_since,
            learn_from_run,
            learned_line,
        )

        seconds = job_seconds_since(LAYOUT.path("benchmarks"), RUN_STARTED)
        logger.info(
            actual_line(EXPECTED["run"], time.time() - EXPECTED["said_at"], seconds)
        )
        # what the jobs ran at is kept for the next estimate (plan.timing.learn_from_run)
        load = other_processes_cores(EXPECTED["cpu"], cpu_snapshot())
        try:
            said = learn_from_run(EXPECTED["run"], seconds, load)
        except Exception as exc:  # keeping rates never fails a finished run
            logger.warning(f"The rates this run's jobs ran at were not kept: {exc}")
        else:
            if said:
                logger.info(
                    learned_line(
                        said, load, EXPECTED["run"].cores, EXPECTED["run"].cache
                    )
                )
