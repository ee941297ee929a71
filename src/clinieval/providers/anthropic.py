"""The native Anthropic Messages API (``POST {base_url}/messages``), over
plain HTTP: no SDK needed.

Differences from the OpenAI shape it translates: the system prompt is a
top-level ``system`` field, not a message; message content is a list of
typed blocks; ``max_tokens`` is required (1,024 when the model file sets
none); stop strings are ``stop_sequences``; there is no ``seed`` (left out:
samples at temperature > 0 differ anyway) and no JSON-schema response
format, so a judge's schema goes into the system prompt and its answer is
validated as usual. ``stop_reason == "max_tokens"`` becomes finish reason
``length`` (a cut-off answer: a judge's is unparsed). Overload is 429
(``rate_limit_error``, with ``retry-after``) or 529 (``overloaded_error``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from clinieval.providers.base import Completion, Message, register
from clinieval.providers.http import HTTPProvider

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
           "tool_use": "tool_calls", "refusal": "content_filter"}
_PASSED = ("temperature", "top_p", "top_k", "metadata")


@register("anthropic")
class Anthropic(HTTPProvider):
    """Claude models through the Messages API, with ``x-api-key``."""

    def headers(self, key: str | None) -> dict[str, str]:
        return {"anthropic-version": API_VERSION} | ({"x-api-key": key} if key else {})

    def request(self, messages: Sequence[Message], settings: Mapping[str, Any]
                ) -> tuple[str, dict[str, Any]]:
        system = [m["content"] for m in messages if m["role"] == "system"]
        schema = (settings.get("response_format") or {}).get("json_schema", {}).get("schema")
        if schema is not None:
            system.append("Answer with one JSON object only, valid under this JSON schema: "
                          + json.dumps(schema))
        body: dict[str, Any] = {
            "model": self.spec.name,
            "max_tokens": int(settings.get("max_tokens") or DEFAULT_MAX_TOKENS),
            "messages": [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]}
                         for m in messages if m["role"] != "system"]}
        if system:
            body["system"] = "\n\n".join(system)
        if settings.get("stop"):
            body["stop_sequences"] = list(settings["stop"])
        return "/messages", body | {k: settings[k] for k in _PASSED if k in settings}

    def completion(self, data: Any, latency_s: float, attempt: int) -> Completion:
        if data["type"] != "message":
            raise ValueError(f"a {data['type']!r} object, not a message")
        text = "".join(block["text"] for block in data["content"] if block["type"] == "text")
        usage = data["usage"]
        return Completion(text=text, input_tokens=int(usage["input_tokens"]),
                          output_tokens=int(usage["output_tokens"]), latency_s=latency_s,
                          finish_reason=_FINISH.get(data["stop_reason"], str(data["stop_reason"])),
                          attempts=attempt)
