"""Render the chat messages a model under test sees: system = persona (+ the SAP layer), user = task.

Templates are the project's own, in Chinese, one per subtask (``template`` in its definition,
``resources/subtasks/{key}.yaml``), rendered with Jinja2 in strict mode: a field the template needs but the
instance lacks is an error, never an empty string. The two variants differ only by the SAP layer appended to
the system prompt.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from h2htalk.errors import DataError
from h2htalk.instance_schema import read_instances
from h2htalk.io import write_jsonl_atomic
from h2htalk.layout import Cell
from h2htalk.settings import VARIANTS, WITHOUT_SAP
from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, Each, Over
from h2htalk.subtasks import get_subtask

SPEAKERS = {"user": "用户", "companion": "竹内遥斗"}


def _prompt_dir() -> Path:
    return Path(str(resources.files("h2htalk.resources").joinpath("prompts")))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def format_dialogue(turns: Iterable[dict[str, str]]) -> str:
    """One line per turn, ``用户：…`` or ``竹内遥斗：…``, oldest first."""
    return "\n".join(f"{SPEAKERS[turn['speaker']]}：{turn['text']}" for turn in turns)


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,  # plain text for a language model, not HTML
    )
    env.filters["dialogue"] = format_dialogue
    return env


@cache
def persona_text() -> str:
    return (_prompt_dir() / "persona.md").read_text(encoding="utf-8").strip()


@cache
def sap_text() -> str:
    return (_prompt_dir() / "sap.md").read_text(encoding="utf-8").strip()


@cache
def task_assistant_text() -> str:
    return (_prompt_dir() / "task_assistant.md").read_text(encoding="utf-8").strip()


def system_prompt(variant: str, persona: bool = True) -> str:
    """The persona (or, for subtasks whose upstream template carries none, a neutral task line), followed in
    the ``sap`` variant by the SAP layer: the two variants differ only by that layer, subtask by subtask."""
    if variant not in VARIANTS:
        raise DataError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    base = persona_text() if persona else task_assistant_text()
    return base if variant == WITHOUT_SAP else f"{base}\n\n{sap_text()}"


@dataclass(frozen=True)
class RenderedPrompt:
    id: str
    subtask: str
    variant: str
    system: str
    user: str
    template_sha256: str

    @property
    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]

    def record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "subtask": self.subtask,
            "variant": self.variant,
            "messages": self.messages,
            "hashes": {
                "system_sha256": sha256_text(self.system),
                "user_sha256": sha256_text(self.user),
                "template_sha256": self.template_sha256,
            },
        }


@cache
def _template(subtask: str) -> jinja2.Template:
    return _environment().from_string(get_subtask(subtask).template)


def render_instance(instance: dict[str, Any], variant: str) -> RenderedPrompt:
    subtask = instance["subtask"]
    try:
        template = _template(subtask)
    except KeyError as exc:
        raise DataError(f"instance {instance['id']}: {exc.args[0]}") from None
    try:
        user = template.render(**instance["fields"]).strip()
    except jinja2.UndefinedError as exc:
        raise DataError(f"instance {instance['id']}: the {subtask} template needs a field it lacks: {exc}") from None
    source = get_subtask(subtask).template
    system = system_prompt(variant, get_subtask(subtask).persona)
    return RenderedPrompt(instance["id"], subtask, variant, system, user, sha256_text(source))


def write_prompts(instances: Iterable[dict[str, Any]], variant: str, out: str | os.PathLike[str]) -> int:
    return write_jsonl_atomic(out, (render_instance(instance, variant).record() for instance in instances))


@stage(
    "prompt_messages", "render the chat messages of one subtask's instances",
    uses=("prompts", "subtasks"), planned=True,
    command="prompts", targets="prompts",
    jobs=Over(variant=lambda run: run.variants, subtask=lambda run: run.subtasks),
    cells=lambda run, w: [Cell("-", w["variant"], w["subtask"])],
    inputs={"instances": Each("references")}, outputs={"prompts": Each("prompts")},
)  # fmt: skip
def prompt_messages(variant: str, subtask: str, instances: list[str], prompts: list[str]) -> Done:
    """The messages of the subtask's instances (``instances``, its one file) in ``variant``, into ``prompts``."""
    (out,) = prompts
    count = write_prompts(read_instances(instances[0]), variant, out)
    return Done(f"{count} prompts", subject=f"{subtask} ({variant})", out=out)
