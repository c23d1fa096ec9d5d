"""The chat messages of the instances: declared here, as their work (``h2htalk.prompts.render``) is in a module below
the stage declarations."""

from __future__ import annotations

from h2htalk.layout import Cell
from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, Each, Over


@stage(
    "prompt_messages", "render the chat messages of one subtask's instances",
    uses=("prompts", "subtasks"), planned=True,
    command="prompts", targets="prompts",
    jobs=Over(variant=lambda run: run.variants, subtask=lambda run: run.subtasks),
    cells=lambda run, w: [Cell("-", w["variant"], w["subtask"])],
    inputs={"instances": Each("references")}, outputs={"prompts": Each("prompts")},
)  # fmt: skip
def prompts(variant: str, subtask: str, instances: list[str], prompts: list[str]) -> Done:
    from h2htalk.instance_schema import read_instances
    from h2htalk.prompts.render import write_prompts

    (out,) = prompts
    count = write_prompts(read_instances(instances[0]), variant, out)
    return Done(f"{count} prompts", subject=f"{subtask} ({variant})", out=out)
