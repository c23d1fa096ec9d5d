# H2HTalk study workflow. Laptop default: snakemake --profile profiles/local
# Paper study on a SLURM GPU cluster:      snakemake --profile profiles/slurm
# Every stage is declared at its function (@stage, see docs/extending.md) and is one rule made from it
# (workflow/rules/stages.smk); the targets come from the stages too.
import gc
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")

# The rules' logic lives in the h2htalk package: the checkout's copy, as in every job, even where the profile's
# logger plugin has imported one installed from another checkout first (that one keeps only the terminal).
_SOURCE = Path(workflow.basedir, "src").resolve()
sys.path.insert(0, str(_SOURCE))
_IMPORTED = sys.modules.get("h2htalk")
if _IMPORTED and not Path(_IMPORTED.__file__).resolve().is_relative_to(_SOURCE):
    for _module in [m for m in sys.modules if m.split(".")[0] == "h2htalk"]:
        del sys.modules[_module]

from h2htalk.config import check_named_files, validate_config
from h2htalk.desk_store.store import check_store
from h2htalk.errors import ConfigError


# The paper study; --configfile(s) overlay it (config/local.yaml: the laptop), --config overrides single keys.
configfile: "config/config.yaml"


try:
    _validated = validate_config(config)
    check_named_files(_validated)
    check_store(_validated["review"]["store"])
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
config.clear()
config.update(_validated)


include: "workflow/rules/common.smk"
include: "workflow/rules/stages.smk"


rule all:
    default_target: True
    input:
        RULES.default_target(),


# Named targets of more than one job, as the stages name them (a stage's own rule is the target of its outputs:
# snakemake table2): fig4-fig6, prompts, generations, scores, reconstruct.
for _target, _files in RULES.named_targets().items():

    rule:
        name:
            _target
        input:
            _files,


# What loading made lives as long as the run: Python's collector need not walk it again each time Snakemake's DAG
# adds objects (about 0.5 s of the paper's 3.8 s dry run: benchmarks/dry_run.py). Its garbage is freed first.
gc.collect()
gc.freeze()
