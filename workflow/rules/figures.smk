# The paper's figures, each a named target with the CSV of what it draws: the dataset statistics (Figures
# 4-6) and instruction following (Figure 7).


rule figure:
    input:
        provenance=path("provenance"),
        curated=expand(path("curated"), subtask=RUN.subtasks),
        instances=expand(path("instances"), subtask=RUN.subtasks),
    output:
        meta=f"{PAPER_FIGURES}/{{figure}}.meta.json",
        png=report(
            f"{PAPER_FIGURES}/{{figure}}.png",
            caption="../report/figures.rst",
            category="Figures",
        ),
        csv=f"{PAPER_FIGURES}/{{figure}}.csv",
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
        settings=settings("figure"),
        number=lambda wc: FIGURES[wc.figure],
    shell:
        h2htalk("figure", "{params.number}")


rule fig4:
    input:
        f"{PAPER_FIGURES}/fig4_wordcloud.png",


rule fig5:
    input:
        f"{PAPER_FIGURES}/fig5_verb_noun.png",


rule fig6:
    input:
        f"{PAPER_FIGURES}/fig6_lengths.png",


rule fig7:
    input:
        provenance=path("provenance"),
        verdicts=paths(
            "verdicts",
            [
                c
                for m in RUN.study_models
                for c in RUN.studies(m, ("instruction_following",))
            ],
        ),
        store=ancient(STORE),
    output:
        meta=f"{PAPER_FIGURES}/fig7_instruction_following.meta.json",
        png=report(
            f"{PAPER_FIGURES}/fig7_instruction_following.png",
            caption="../report/fig7.rst",
            category="Figures",
        ),
        csv=f"{PAPER_FIGURES}/fig7_instruction_following.csv",
    log:
        f"{LOGS}/figures/fig7.log",
    benchmark:
        f"{BENCHMARKS}/fig7.tsv"
    conda:
        "../../envs/figures.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        settings=settings("fig7"),
        ratings=ratings_param(NEED_VERDICTS),
    shell:
        h2htalk("fig7")
