"""Parse and check one upstream reference file: one ``{"response": "..."}`` JSON object a line."""

from __future__ import annotations

import json
from dataclasses import dataclass

from h2htalk.errors import DataError


@dataclass(frozen=True)
class ReleaseLine:
    number: int  # 1-based line number in the upstream file
    response: str


def parse_release(data: bytes, name: str) -> list[ReleaseLine]:
    """Decode ``data`` (UTF-8, optional BOM, LF or CRLF) into its lines.

    Every line must be a JSON object with a string ``response``; the first line that is not is an
    error naming ``name`` and the line number. A final line ending is optional; blank lines are
    errors (they would shift the line-order matching of model outputs to references).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{name}: line {line}: not valid UTF-8") from None
    raw_lines = text.split("\n")
    if raw_lines and raw_lines[-1] == "":
        raw_lines.pop()
    lines: list[ReleaseLine] = []
    for number, raw in enumerate(raw_lines, start=1):
        raw = raw.removesuffix("\r")
        if not raw.strip():
            raise DataError(f"{name}: line {number}: blank line")
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DataError(f"{name}: line {number}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{name}: line {number}: expected a JSON object, got {type(obj).__name__}")
        response = obj.get("response")
        if not isinstance(response, str):
            found = "missing" if "response" not in obj else type(response).__name__
            raise DataError(f"{name}: line {number}: 'response' must be a string ({found})")
        lines.append(ReleaseLine(number, response))
    return lines


def check_line_count(lines: list[ReleaseLine], name: str, expected: int) -> None:
    if len(lines) != expected:
        raise DataError(f"{name}: expected {expected} lines, found {len(lines)}")
