# The two discussion studies: the SAP safety ablation and instruction following. What each model answers comes
# from its study generation job (generate_studies), its safety answers are scored by score_studies; their
# findings are Table 3 (tables.smk) and Figure 7 (figures.smk).


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


rule study_judge:
    input:
        study_items=expand(path("study_items"), study=STUDIES, variant=ALL_VARIANTS[0]),
        generations=paths("generations", RUN.studies("{model}")),
        model=[*gguf(STUDY_JUDGE), *prefetched(STUDY_JUDGE)],
    output:
        verdicts=paths("verdicts", RUN.studies("{model}")),
        summary=path("study_judge_run"),
    log:
        main=f"{LOGS}/studies/judge_{{model}}.log",
        server=f"{LOGS}/studies/judge_{{model}}.server.log",
    benchmark:
        f"{BENCHMARKS}/study_judge/{{model}}.tsv"
    wildcard_constraints:
        model=alternatives(RUN.study_models),
    conda:
        "../../envs/generation.yaml"
    threads: threads_for(STUDY_JUDGE)
    resources:
        **job_resources(STUDY_JUDGE),
    params:
        settings=settings("study-judge", STUDY_JUDGE),
    shell:
        h2htalk(
            "study-judge",
            "--model {wildcards.model} --server-log {log.server}",
            log="{log.main}",
        )
