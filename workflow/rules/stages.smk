# One rule per stage of the stage table (h2htalk.stages.table): its files, logs, resources, the params that
# rerun it when what it reads changes, and its command with the digest of its code; everything here comes from the
# table.


for _stage in STAGES:

    rule:
        name:
            _stage.name
        input:
            unpack(RULES.inputs(_stage)),
        output:
            **RULES.rule_outputs(_stage, directory, report),
        log:
            **RULES.logs(_stage),
        benchmark:
            RULES.benchmark(_stage)
        wildcard_constraints:
            **RULES.constraints(_stage),
        priority: _stage.priority
        localrule: _stage.where == "local"
        conda:
            f"../../envs/{_stage.env}.yaml"
        threads: RULES.threads(_stage)
        resources:
            **RULES.resources(_stage),
        params:
            **RULES.params(_stage),
        shell:
            RULES.shell(_stage)
