"""OpenAI's Batch API as the API stand-in speaks it: files (upload, retrieve, content) and batches (create,
retrieve, list, cancel), with the statuses a batch goes through and the ways it ends.

A batch is ``validating`` for ``BatchPlan.validating_s`` after it is created, then ``in_progress`` until
``running_s`` have passed; the first look after that finishes it at once, without a thread: every line is
answered by the service's own chat route (so the scripted and seeded faults apply to batch lines too), answers
go to the output file and every other status to the error file, as OpenAI writes them. How a batch ends comes
from ``BatchPlan.outcomes``, one per created batch in order (then ``completed``): ``expired`` answers only the
first ``expired_share`` of its lines and writes ``batch_expired`` errors for the rest, ``failed`` refuses the
file (``errors``, no output), ``cancelled`` answers none.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .protocol import Reply, openai_error
from .server import Stats

FINISHED = ("completed", "expired", "failed", "cancelled")


@dataclass
class BatchPlan:
    validating_s: float = 0.0
    running_s: float = 0.0
    outcomes: list[str] = field(default_factory=list)  # consumed one per created batch; then "completed"
    expired_share: float = 0.5
    failure: tuple[str, str] = ("invalid_request", "The batch input file is not valid.")  # (code, message)


def multipart_fields(content_type: str, body: bytes) -> dict[str, bytes]:
    """The fields of a multipart/form-data body, by name."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[str(name)] = part.get_payload(decode=True) or b""
    return fields


def _result_line(custom_id: str, reply: Reply) -> dict[str, Any]:
    status = reply.status if not reply.drop and isinstance(reply.body, dict) else 500
    server_error = {"error": {"message": "server error", "type": "server_error"}}
    body = reply.body if isinstance(reply.body, dict) else server_error
    return {
        "id": f"batch_req_{uuid.uuid4().hex[:24]}",
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": uuid.uuid4().hex, "body": body},
        "error": None,
    }


def _expired_line(custom_id: str) -> dict[str, Any]:
    message = "This request could not be executed before the completion window expired."
    return {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": custom_id, "response": None,
            "error": {"code": "batch_expired", "message": message}}  # fmt: skip


class BatchService:
    """The files and batches routes; ``answer(provider, body)`` answers one line's chat request."""

    def __init__(self, answer: Callable[[str, bytes], Reply], stats: Stats, plan: BatchPlan | None = None) -> None:
        self.answer, self.stats = answer, stats
        self.plan = plan or BatchPlan()
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()  # a look finishes a batch, which writes its files

    def handle(
        self, method: str, provider: str, route: str, rest: str, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        parts = [p for p in rest.split("/") if p]
        if route == "files" and method == "POST" and not parts:
            return self.upload(headers.get("Content-Type", ""), body)
        if route == "files" and method == "GET" and len(parts) == 1 and parts[0] in self.files:
            return Reply(200, self.files[parts[0]])
        if route == "files" and method == "GET" and len(parts) == 2 and parts[1] == "content":
            if parts[0] not in self.contents:
                return openai_error(404, f"No such File object: {parts[0]}", "invalid_request_error")
            return Reply(200, self.contents[parts[0]], content_type="application/octet-stream")
        if route == "batches" and method == "POST" and not parts:
            return self.create(provider, body)
        if route == "batches" and method == "GET" and not parts:
            data = [self.look(b) for b in sorted(self.batches.values(), key=lambda b: -b["created_at"])]
            return Reply(200, {"object": "list", "data": data, "has_more": False,
                               "first_id": data[0]["id"] if data else None,
                               "last_id": data[-1]["id"] if data else None})  # fmt: skip
        if route == "batches" and parts and parts[0] in self.batches:
            batch = self.batches[parts[0]]
            if method == "POST" and parts[1:] == ["cancel"]:
                batch["_outcome"], batch["_finish_at"] = "cancelled", time.time()
            return Reply(200, self.look(batch))
        return openai_error(404, f"Unknown request URL: {method} /v1/{route}{rest}.", "invalid_request_error")

    def _file(self, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        record = {"id": file_id, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                  "filename": filename, "purpose": purpose, "status": "processed"}  # fmt: skip
        with self._lock:
            self.files[file_id], self.contents[file_id] = record, content
        return record

    def upload(self, content_type: str, body: bytes) -> Reply:
        fields = multipart_fields(content_type, body)
        if fields.get("purpose") != b"batch" or "file" not in fields:
            return openai_error(400, "Expected a 'file' and purpose 'batch'.", "invalid_request_error")
        self.stats.add("files_uploaded")
        return Reply(200, self._file(fields["file"], "requests.jsonl", "batch"))

    def create(self, provider: str, body: bytes) -> Reply:
        request = json.loads(body or b"{}")
        file_id = request.get("input_file_id")
        if file_id not in self.contents or request.get("endpoint") != "/v1/chat/completions":
            return openai_error(400, f"Invalid input_file_id or endpoint: {file_id}", "invalid_request_error")
        now = time.time()
        with self._lock:
            outcome = self.plan.outcomes.pop(0) if self.plan.outcomes else "completed"
            batch = {
                "id": f"batch_{uuid.uuid4().hex[:24]}", "object": "batch", "endpoint": request["endpoint"],
                "errors": None, "input_file_id": file_id, "completion_window": request.get("completion_window"),
                "status": "validating", "output_file_id": None, "error_file_id": None, "created_at": int(now),
                "in_progress_at": None, "expires_at": int(now) + 86400, "finalizing_at": None, "completed_at": None,
                "failed_at": None, "expired_at": None, "cancelling_at": None, "cancelled_at": None,
                "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": request.get("metadata"),
                "_provider": provider, "_outcome": outcome, "_created": now,
                "_finish_at": now + self.plan.validating_s + self.plan.running_s,
            }  # fmt: skip
            self.batches[batch["id"]] = batch
        self.stats.add("batches_created")
        return Reply(200, self.look(batch))

    def look(self, batch: dict[str, Any]) -> dict[str, Any]:
        """The batch as it is now (finished on the first look after its time), without the stand-in's own keys."""
        with self._lock:
            if batch["status"] not in FINISHED:
                now = time.time()
                if now >= batch["_finish_at"]:
                    self._finish(batch)
                elif now >= batch["_created"] + self.plan.validating_s:
                    batch["status"], batch["in_progress_at"] = "in_progress", batch["in_progress_at"] or int(now)
            return {k: v for k, v in batch.items() if not k.startswith("_")}

    def _finish(self, batch: dict[str, Any]) -> None:
        now, outcome = int(time.time()), batch["_outcome"]
        lines = [json.loads(t) for t in self.contents[batch["input_file_id"]].decode("utf-8").splitlines() if t]
        batch["request_counts"]["total"] = len(lines)
        if outcome == "failed":
            code, message = self.plan.failure
            batch.update(status="failed", failed_at=now,
                         errors={"object": "list", "data": [{"code": code, "message": message, "param": None,
                                                               "line": None}]})  # fmt: skip
            return
        answered = {"completed": len(lines), "expired": int(len(lines) * self.plan.expired_share), "cancelled": 0}
        output, errors = [], []
        for index, line in enumerate(lines):
            if index >= answered[outcome]:
                if outcome == "expired":
                    errors.append(_expired_line(line["custom_id"]))
                continue
            reply = self.answer(batch["_provider"], json.dumps(line["body"], ensure_ascii=False).encode("utf-8"))
            self.stats.add("batch_lines")
            result = _result_line(line["custom_id"], reply)
            (output if result["response"]["status_code"] == 200 else errors).append(result)
        batch["request_counts"].update(completed=len(output), failed=len(errors))
        for kind, rows in (("output_file_id", output), ("error_file_id", errors)):
            if rows:
                text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
                batch[kind] = self._file(text, f"batch_{kind[:-8]}.jsonl", f"batch_{kind[:-8]}")["id"]
        stamp = {"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}[outcome]
        batch.update(status=outcome, finalizing_at=now)
        batch[stamp] = now
