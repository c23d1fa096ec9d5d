# The run's provenance: git revision, validated config, data manifest, versions, hardware. Every table and
# figure points at it, with the checksums of its own inputs.


rule provenance:
    input:
        manifest=path("manifest"),
    output:
        path("provenance"),
    log:
        f"{LOGS}/provenance.log",
    benchmark:
        f"{BENCHMARKS}/provenance.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        settings=settings("provenance"),
    shell:
        h2htalk("provenance", f"--root {workflow.basedir}")
