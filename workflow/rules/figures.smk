# Dataset statistics figures (Figures 4-6), each a named target, each with the CSV of what it draws.


rule figure:
    input:
        provenance=PROVENANCE,
        curated=expand(CURATED, subtask=SUBTASKS),
        instances=expand(INSTANCES, subtask=SUBTASKS),
    output:
        meta=f"{FIGURE}.meta.json",
        png=report(f"{FIGURE}.png", caption="../report/figures.rst", category="Figures"),
        csv=f"{FIGURE}.csv",
    log:
        f"{LOGS}/figures/{{figure}}.log",
    benchmark:
        f"{BENCHMARKS}/figure/{{figure}}.tsv"
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        config=config_json("figures"),
        number=lambda wc: FIGURES[wc.figure],
        out=output_prefix("csv"),
    shell:
        "python -m h2htalk --log {log} figure {params.number} {params.config} --curated {input.curated} --instances {input.instances}"
        " --provenance {input.provenance} --out {params.out}"


rule fig4:
    input:
        FIGURE.format(figure="fig4_wordcloud") + ".png",


rule fig5:
    input:
        FIGURE.format(figure="fig5_verb_noun") + ".png",


rule fig6:
    input:
        FIGURE.format(figure="fig6_lengths") + ".png",
