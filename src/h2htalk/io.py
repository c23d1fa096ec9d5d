"""Atomic file output, line-numbered JSONL and CSV input, and files and folders removed."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from io import StringIO
from pathlib import Path
from typing import Any, BinaryIO

from h2htalk.errors import DataError

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Open a temporary file beside ``path``; rename it over ``path`` only if the block succeeds.

    A reader never sees a half-written file, and an interrupted run leaves no file that a rerun
    could mistake for complete.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.chmod(tmp_name, 0o666 & ~_UMASK)  # mkstemp creates 0600; outputs get the usual permissions
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_writer(path) as handle:
        handle.write(data)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_png_atomic(figure: Any, path: str | os.PathLike[str], **savefig_options: Any) -> None:
    """Save a matplotlib figure as PNG through ``atomic_writer``."""
    with atomic_writer(path) as handle:
        figure.savefig(handle, format="png", **savefig_options)


def remove_paths(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Remove files and folders (a bundle); the ones there were."""
    removed = [Path(p) for p in paths if os.path.lexists(p)]
    for path in removed:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    return removed


def dumps_json_line(record: Any) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


def write_jsonl_atomic(path: str | os.PathLike[str], records: Iterable[Any]) -> int:
    count = 0
    with atomic_writer(path) as handle:
        for record in records:
            handle.write((dumps_json_line(record) + "\n").encode("utf-8"))
            count += 1
    return count


def read_json(path: str | os.PathLike[str]) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)``; a malformed line is an error naming file and line.

    Blank lines are skipped; a UTF-8 byte-order mark and CRLF line ends are accepted.
    """
    if not Path(path).is_file():
        raise DataError(f"{path}: file not found")
    with open(path, encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: line {number}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise DataError(f"{path}: line {number}: expected a JSON object, got {type(obj).__name__}")
            yield number, obj


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    return [obj for _, obj in iter_jsonl(path)]


def read_csv(path: str | os.PathLike[str], made_by: str = "", delimiter: str = ",") -> list[dict[str, str]]:
    """A CSV's rows by its header's names (blank lines skipped; a UTF-8 byte-order mark accepted, as ``iter_jsonl``
    does); a file not found, one that is not UTF-8, or a row with more or fewer fields than the header (which
    ``csv.DictReader`` pads with None or keeps under None), names the file and the line. ``made_by``: what writes
    the file, said where it is not found."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found" + (f" ({made_by})" if made_by else "")) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}: line {line}: not UTF-8 text ({exc.reason})") from None
    reader = csv.reader(StringIO(text, newline=""), delimiter=delimiter)
    header, rows = next(reader, []), []
    for row in (row for row in reader if row):
        if len(row) != len(header):
            raise DataError(f"{path}: line {reader.line_num}: {len(row)} fields, its header has {len(header)}")
        rows.append(dict(zip(header, row, strict=True)))
    return rows


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def join_csv(paths: Iterable[str | os.PathLike[str]], out: str | os.PathLike[str]) -> int:
    """Concatenate CSV files that share one header; return the number of data rows."""
    header: list[str] | None = None
    buffer = StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    rows = 0
    for path in paths:
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            this = next(reader, None)
            if this is None:
                continue
            if header is None:
                header = this
                writer.writerow(header)
            elif this != header:
                raise DataError(f"{path}: header differs from the first file's")
            for row in reader:
                writer.writerow(row)
                rows += 1
    write_text_atomic(out, buffer.getvalue())
    return rows


def parse_yaml(text: str) -> Any:
    """YAML as ``yaml.safe_load`` reads it, with libyaml's parser where PyYAML has it (a workflow start reads the
    schemas, the subtasks and the registry: several times faster)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
