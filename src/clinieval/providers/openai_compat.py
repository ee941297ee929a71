"""The OpenAI-compatible chat-completions provider: vLLM, SGLang, llama.cpp's
server, Ollama, TGI, OpenAI and the hosted services that copy its API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clinieval.providers.base import Completion, Message, register
from clinieval.providers.http import HTTPProvider


@register("openai")
class OpenAICompatible(HTTPProvider):
    """``POST {base_url}/chat/completions`` with a bearer key."""

    def headers(self, key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def request(self, messages: Sequence[Message], settings: Mapping[str, Any]
                ) -> tuple[str, dict[str, Any]]:
        return "/chat/completions", {"model": self.spec.name, "messages": list(messages),
                                     **settings}

    def completion(self, data: Any, latency_s: float, attempt: int) -> Completion:
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        return Completion(text=choice["message"]["content"] or "",
                          input_tokens=int(usage.get("prompt_tokens") or 0),
                          output_tokens=int(usage.get("completion_tokens") or 0),
                          latency_s=latency_s, finish_reason=str(choice.get("finish_reason")),
                          attempts=attempt)
