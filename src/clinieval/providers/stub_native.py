"""Local stand-ins for the native Anthropic Messages and Gemini
generateContent APIs, for tests: each checks a request against the API's
documented schema (path, headers, required and known fields) and answers
with the documented response shape, or with the documented error body
(invalid request, missing key, rate limit, overload) when the request is
wrong or a script says so. Run under :class:`clinieval.providers.stub.StubServer`.

``script`` maps a 0-based request number to a misbehaviour: ``"rate_limit"``
(429 with a 1-second wait), ``"overloaded"`` (Anthropic's 529, Gemini's 503)
or ``"max_tokens"`` (an answer cut off at the token limit).
"""

from __future__ import annotations

import json
from typing import Any

from clinieval.providers.stub import HTTPHandler, Reply

ANTHROPIC_ROLES = ("user", "assistant")
GEMINI_ROLES = ("user", "model")
GEMINI_CONFIG = {"temperature", "topP", "topK", "maxOutputTokens", "seed", "stopSequences",
                 "responseMimeType", "responseJsonSchema", "responseSchema", "candidateCount"}


class AnthropicStub(HTTPHandler):
    """``POST /v1/messages`` as Anthropic documents it."""

    def __init__(self, text: str = "A stub answer.", key: str | None = None,
                 script: dict[int, str] | None = None) -> None:
        self.text, self.key, self.script = text, key, script or {}

    def respond(self, path: str, headers: dict[str, str], request: dict, number: int) -> Reply:
        problem = self._problem(path, headers, request)
        if problem:
            return _anthropic_error(*problem)
        act = self.script.get(number)
        if act == "rate_limit":
            return _anthropic_error(429, "rate_limit_error", "Number of request tokens has"
                                    " exceeded your per-minute rate limit", {"retry-after": "1"})
        if act == "overloaded":
            return _anthropic_error(529, "overloaded_error", "Overloaded")
        text = self.text if act != "max_tokens" else self.text[:5]
        return Reply(body=json.dumps({
            "id": f"msg_stub{number}", "type": "message", "role": "assistant",
            "model": request["model"], "content": [{"type": "text", "text": text}],
            "stop_reason": "max_tokens" if act == "max_tokens" else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": _words(request), "output_tokens": len(text.split())},
        }).encode())

    def _problem(self, path: str, headers: dict, request: dict) -> tuple | None:
        if not path.endswith("/v1/messages"):
            return 404, "not_found_error", f"no route {path}"
        if self.key is not None and headers.get("x-api-key") != self.key:
            return 401, "authentication_error", "invalid x-api-key"
        if "anthropic-version" not in headers:
            return 400, "invalid_request_error", "anthropic-version: header is required"
        for name in ("model", "max_tokens", "messages"):
            if name not in request:
                return 400, "invalid_request_error", f"{name}: Field required"
        return _anthropic_messages(request["messages"])


def _anthropic_messages(messages: Any) -> tuple | None:
    if not isinstance(messages, list) or not messages:
        return 400, "invalid_request_error", "messages: at least one message is required"
    for i, message in enumerate(messages):
        if message.get("role") not in ANTHROPIC_ROLES:
            return 400, "invalid_request_error", (
                f"messages.{i}.role: Input should be 'user' or 'assistant'")
        content = message.get("content")
        if not isinstance(content, str) and not all(
                isinstance(b, dict) and b.get("type") == "text" and "text" in b
                for b in content or [None]):
            return 400, "invalid_request_error", f"messages.{i}.content: invalid content block"
    if messages[0]["role"] != "user":
        return 400, "invalid_request_error", "messages: first message must use the user role"
    return None


def _anthropic_error(status: int, kind: str, message: str,
                     headers: dict[str, str] | None = None) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply(status, json.dumps(body).encode(), headers or {})


class GeminiStub(HTTPHandler):
    """``POST /v1beta/models/{model}:generateContent`` as Google documents it."""

    def __init__(self, text: str = "A stub answer.", key: str | None = None,
                 script: dict[int, str] | None = None) -> None:
        self.text, self.key, self.script = text, key, script or {}

    def respond(self, path: str, headers: dict[str, str], request: dict, number: int) -> Reply:
        problem = self._problem(path, headers, request)
        if problem:
            return _gemini_error(*problem)
        act = self.script.get(number)
        if act == "rate_limit":
            return _gemini_error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted"
                                 " (e.g. check quota).", retry_s=1)
        if act == "overloaded":
            return _gemini_error(503, "UNAVAILABLE", "The model is overloaded.")
        text = self.text if act != "max_tokens" else self.text[:5]
        prompt, out = _words(request), len(text.split())
        return Reply(body=json.dumps({
            "candidates": [{"content": {"parts": [{"text": text}], "role": "model"},
                            "finishReason": "MAX_TOKENS" if act == "max_tokens" else "STOP",
                            "index": 0}],
            "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": out,
                              "totalTokenCount": prompt + out},
            "modelVersion": path.rsplit("/", 1)[-1].split(":")[0],
        }).encode())

    def _problem(self, path: str, headers: dict, request: dict) -> tuple | None:
        if not (path.startswith("/v1beta/models/") and path.endswith(":generateContent")):
            return 404, "NOT_FOUND", f"no route {path}"
        if self.key is not None and headers.get("x-goog-api-key") != self.key:
            return 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."
        unknown = set(request) - {"contents", "systemInstruction", "generationConfig",
                                  "safetySettings", "tools"}
        unknown |= set(request.get("generationConfig", {})) - GEMINI_CONFIG
        if unknown:
            return 400, "INVALID_ARGUMENT", (f"Invalid JSON payload received. Unknown name"
                                             f" \"{sorted(unknown)[0]}\": Cannot find field.")
        return _gemini_contents(request.get("contents"))


def _gemini_contents(contents: Any) -> tuple | None:
    if not isinstance(contents, list) or not contents:
        return 400, "INVALID_ARGUMENT", ("* GenerateContentRequest.contents: contents is not"
                                         " specified")
    for i, content in enumerate(contents):
        if content.get("role") not in GEMINI_ROLES or not all(
                isinstance(p, dict) and "text" in p for p in content.get("parts") or [None]):
            return 400, "INVALID_ARGUMENT", f"* GenerateContentRequest.contents[{i}]: invalid"
    return None


def _gemini_error(status: int, kind: str, message: str, retry_s: int | None = None) -> Reply:
    error: dict[str, Any] = {"code": status, "message": message, "status": kind}
    if retry_s is not None:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                             "retryDelay": f"{retry_s}s"}]
    return Reply(status, json.dumps({"error": error}).encode())


def _words(request: dict) -> int:
    """A token count for the stub's usage figures: words in the request."""
    return len(json.dumps(request).split())
