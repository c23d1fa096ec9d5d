# The two discussion studies: the SAP safety ablation and instruction following. One study job per study model
# answers both studies' conversations and has the study judge judge them (a target that needs no study, such as
# table2, runs none); its safety answers are scored by score_studies; their findings are Table 3 (tables.smk) and
# Figure 7 (figures.smk).


rule study_inputs:
    input:
        study_scenarios,
    output:
        prompts=path("study_prompts"),
        study_items=path("study_items"),
    log:
        f"{LOGS}/studies/{{study}}/inputs_{{variant}}.log",
    benchmark:
        f"{BENCHMARKS}/study_inputs/{{study}}/{{variant}}.tsv"
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    params:
        settings=settings("study-inputs"),
    shell:
        h2htalk("study-inputs", "{wildcards.study} --variant {wildcards.variant}")


rule study:
    input:
        prompts=[LAYOUT.prompts(c.variant, c.task) for c in RUN.studies("-")],
        study_items=expand(path("study_items"), study=STUDIES, variant=ALL_VARIANTS[0]),
        models=study_model_inputs,
    output:
        responses=paths("generations", RUN.studies("{model}")),
        summary=path("study_generation_run"),
        verdicts=paths("verdicts", RUN.studies("{model}")),
        judge_summary=path("study_judge_run"),
    log:
        main=f"{LOGS}/studies/{{model}}.log",
        server=f"{LOGS}/studies/{{model}}.server.log",
    benchmark:
        f"{BENCHMARKS}/study/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(RUN.study_models),
    conda:
        "../../envs/generation.yaml"
    threads: lambda wc: threads_for(wc.model, STUDY_JUDGE)
    resources:
        **per_job(lambda wc: job_resources(wc.model, STUDY_JUDGE)),
    params:
        settings=settings("study", "model", STUDY_JUDGE),
    shell:
        h2htalk(
            "study",
            "--model {wildcards.model} --server-log {log.server}",
            log="{log.main}",
        )
