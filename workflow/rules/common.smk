# Shared helpers for the rules. Logic lives in the h2htalk package; rules only wire files together.
from h2htalk.config import load_registry
from h2htalk.instances import demo_instances_path
from h2htalk.subtasks import SUBTASK_KEYS, get_subtask

from snakemake.settings.types import DeploymentMethod

# Every rule runs the checkout's package: with --software-deployment-method conda, in the rule's
# conda env ("python" there); otherwise in the interpreter that runs Snakemake.
_PYTHON = (
    "python"
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    else sys.executable
)
H2HTALK = f"PYTHONPATH={Path(workflow.basedir) / 'src'} {_PYTHON} -m h2htalk"

SUBTASKS = list(config["subtasks"])
VARIANTS = list(config["variants"])
MODELS = load_registry(config["model_registry"])
RUN_MODELS = [*config["models"], *config["baselines"]]  # everything that gets generations, scores, rows
UPSTREAM_DIR = "results/data/upstream"
CURATED_DIR = "results/data/curated"
INSTANCES_DIR = "results/instances"
LOG_DIR = "results/logs"


wildcard_constraints:
    subtask="|".join(SUBTASK_KEYS),
    variant="sap|nosap",
    model="|".join(map(re.escape, MODELS)),
    embedder="|".join(map(re.escape, config["embedders"])),


def upstream_file(subtask):
    return f"{UPSTREAM_DIR}/{get_subtask(subtask).upstream_file}"


def shell_list(values):
    """Comma-separated, quoted for the shell: the form the h2htalk command takes for list options."""
    import shlex

    return shlex.quote(",".join(values))


def shell_mapping(mapping):
    import shlex

    return shlex.quote(",".join(f"{k}={v}" for k, v in mapping.items()))
