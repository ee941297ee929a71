"""The native Gemini API (``POST {base_url}/models/{name}:generateContent``),
over plain HTTP with the key in ``x-goog-api-key``: no SDK needed.

It translates the OpenAI shape: messages become ``contents`` of ``parts``
(the assistant's role is ``model``), system messages ``systemInstruction``,
sampling settings ``generationConfig`` (``maxOutputTokens``, ``topP``,
``stopSequences``, ``seed``), a JSON-schema response format
``responseMimeType`` + ``responseJsonSchema``. ``finishReason ==
"MAX_TOKENS"`` becomes ``length``; a prompt blocked before any candidate is
an empty answer with finish reason ``content_filter``. A 429
(``RESOURCE_EXHAUSTED``) may carry its wait as a ``RetryInfo`` detail in the
body rather than a header; it is honoured either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clinieval.providers.base import Completion, Message, register
from clinieval.providers.http import HTTPProvider

_CONFIG = {"temperature": "temperature", "top_p": "topP", "top_k": "topK",
           "max_tokens": "maxOutputTokens", "seed": "seed", "stop": "stopSequences"}
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
           "RECITATION": "content_filter", "PROHIBITED_CONTENT": "content_filter"}
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


@register("gemini")
class Gemini(HTTPProvider):
    """Gemini models through ``generateContent``."""

    def headers(self, key: str | None) -> dict[str, str]:
        return {"x-goog-api-key": key} if key else {}

    def request(self, messages: Sequence[Message], settings: Mapping[str, Any]
                ) -> tuple[str, dict[str, Any]]:
        system = [{"text": m["content"]} for m in messages if m["role"] == "system"]
        body: dict[str, Any] = {"contents": [
            {"role": "model" if m["role"] == "assistant" else "user",
             "parts": [{"text": m["content"]}]} for m in messages if m["role"] != "system"]}
        if system:
            body["systemInstruction"] = {"parts": system}
        config = {_CONFIG[k]: (list(v) if k == "stop" else v)
                  for k, v in settings.items() if k in _CONFIG}
        schema = (settings.get("response_format") or {}).get("json_schema", {}).get("schema")
        if schema is not None:
            config |= {"responseMimeType": "application/json", "responseJsonSchema": schema}
        if config:
            body["generationConfig"] = config
        return f"/models/{self.spec.name}:generateContent", body

    def completion(self, data: Any, latency_s: float, attempt: int) -> Completion:
        usage = data.get("usageMetadata") or {}
        tokens = (int(usage.get("promptTokenCount") or 0),
                  int(usage.get("candidatesTokenCount") or 0))
        if not data.get("candidates"):
            if "promptFeedback" not in data:
                raise KeyError("candidates")
            return Completion("", *tokens, latency_s, "content_filter", attempt)
        candidate = data["candidates"][0]
        parts = (candidate.get("content") or {}).get("parts") or []
        reason = candidate.get("finishReason", "STOP")
        return Completion("".join(p.get("text", "") for p in parts), *tokens, latency_s,
                          _FINISH.get(reason, reason.lower()), attempt)

    def body_retry_after(self, data: Any) -> float | None:
        try:
            details = data["error"]["details"]
            delay = next(d["retryDelay"] for d in details if d.get("@type") == _RETRY_INFO)
            return float(delay.removesuffix("s"))
        except (KeyError, TypeError, StopIteration, ValueError, AttributeError):
            return None
