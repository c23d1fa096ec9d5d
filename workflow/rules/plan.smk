# The plan (h2htalk plan): what the configured run sends per model and stage, what the caches hold, and the
# tokens, GPU-hours and API cost of the rest. Not part of `all`: ask for it before a run (snakemake plan), or
# at any point of one; every cache file that changed since the last plan reruns it.


rule plan:
    input:
        plan_inputs,
    output:
        table=path("plan"),
        report=path("plan_md"),
    log:
        f"{LOGS}/plan.log",
    benchmark:
        f"{BENCHMARKS}/plan.tsv"
    conda:
        "../../envs/generation.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        settings=settings("plan"),
    shell:
        h2htalk("plan")
