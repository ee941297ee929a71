"""The native Anthropic and Gemini providers against local servers that check
each request against the API's documented schema and answer in its
documented shapes, errors and rate limits included; and the lazy registry."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from clinieval.errors import InputError
from clinieval.providers import CallFailed, RetryPolicy, load_model_file, make_provider, model_spec
from clinieval.providers.stub import StubServer
from clinieval.providers.stub_native import AnthropicStub, GeminiStub

MESSAGES = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is the first step for chest pain?"}]
FAST = RetryPolicy(max_attempts=3, base_s=0.01, cap_s=0.05)
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}},
          "required": ["score"], "additionalProperties": False}


def _spec(provider: str, server: StubServer, **fields):
    base = {"anthropic": "/v1", "gemini": "/v1beta"}[provider]
    return model_spec({"id": "m", "version": "v1", "name": "native-model", "provider": provider,
                       "api_key_env": "CLINIEVAL_NATIVE_KEY",
                       "base_urls": [f"http://127.0.0.1:{server.port}{base}"]} | fields, "x")


def _generate(spec, settings=None, times: int = 1):
    async def go():
        provider = make_provider(spec, policy=FAST, seed=1)
        try:
            return await asyncio.gather(*[provider.generate(MESSAGES, settings or {})
                                          for _ in range(times)])
        finally:
            await provider.aclose()

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("CLINIEVAL_NATIVE_KEY", "secret-key")


def test_anthropic_request_and_answer_follow_the_messages_api():
    with StubServer(AnthropicStub("Call an ambulance.", key="secret-key")) as server:
        [done] = _generate(_spec("anthropic", server),
                           {"temperature": 0.5, "max_tokens": 64, "stop": ["\n\n"], "seed": 3})
    [request], [headers] = server.requests, server.headers
    assert headers["x-api-key"] == "secret-key" and headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert request["system"] == "You are terse." and request["max_tokens"] == 64
    assert request["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": MESSAGES[1]["content"]}]}]
    assert request["stop_sequences"] == ["\n\n"] and "seed" not in request
    assert (done.text, done.finish_reason, done.attempts) == ("Call an ambulance.", "stop", 1)
    assert done.input_tokens > 0 and done.output_tokens == 3


def test_gemini_request_and_answer_follow_generate_content():
    with StubServer(GeminiStub("Call an ambulance.", key="secret-key")) as server:
        [done] = _generate(_spec("gemini", server),
                           {"temperature": 0.5, "max_tokens": 64, "seed": 3,
                            "response_format": {"type": "json_schema",
                                                "json_schema": {"schema": SCHEMA}}})
    [request], [path] = server.requests, server.paths
    assert path == "/v1beta/models/native-model:generateContent"
    assert server.headers[0]["x-goog-api-key"] == "secret-key"
    assert request["systemInstruction"] == {"parts": [{"text": "You are terse."}]}
    assert request["contents"] == [{"role": "user", "parts": [{"text": MESSAGES[1]["content"]}]}]
    assert request["generationConfig"] == {
        "temperature": 0.5, "maxOutputTokens": 64, "seed": 3,
        "responseMimeType": "application/json", "responseJsonSchema": SCHEMA}
    assert (done.text, done.finish_reason) == ("Call an ambulance.", "stop")
    assert done.input_tokens > 0 and done.output_tokens == 3


@pytest.mark.parametrize("provider, stub", [("anthropic", AnthropicStub), ("gemini", GeminiStub)])
def test_a_rate_limit_waits_as_told_and_an_overload_is_retried(provider, stub):
    with StubServer(stub(script={0: "rate_limit", 1: "overloaded"})) as server:
        start = time.monotonic()
        [done] = _generate(_spec(provider, server))
        waited = time.monotonic() - start
    assert done.attempts == 3 and len(server.requests) == 3
    assert waited >= 1.0  # Anthropic's retry-after header, Gemini's RetryInfo in the body


@pytest.mark.parametrize("provider, stub", [("anthropic", AnthropicStub), ("gemini", GeminiStub)])
def test_an_answer_cut_at_the_token_limit_says_length(provider, stub):
    with StubServer(stub(script={0: "max_tokens"})) as server:
        [done] = _generate(_spec(provider, server))
    assert done.finish_reason == "length"


@pytest.mark.parametrize("provider, stub, status", [("anthropic", AnthropicStub, 401),
                                                    ("gemini", GeminiStub, 400)])
def test_a_wrong_key_fails_at_once_with_the_apis_message(provider, stub, status):
    with StubServer(stub(key="another-key")) as server:
        with pytest.raises(CallFailed, match=f"HTTP {status}.*(invalid x-api-key|API key not)"
                           ) as err:
            _generate(_spec(provider, server))
    assert err.value.cause == f"HTTP {status}" and len(server.requests) == 1


def test_anthropic_has_a_default_url_and_max_tokens(tmp_path):
    path = tmp_path / "claude.toml"
    path.write_text('id = "c"\nversion = "claude-x-2025"\nprovider = "anthropic"\n'
                    'name = "claude-x"\napi_key_env = "CLINIEVAL_NATIVE_KEY"\n')
    spec = load_model_file(path)
    assert spec.base_urls == ("https://api.anthropic.com/v1",)
    _, body = make_provider(spec).request(MESSAGES, {})
    assert body["max_tokens"] == 1024


def test_a_model_file_naming_two_providers_or_an_unknown_one_is_refused(tmp_path):
    path = tmp_path / "two.toml"
    path.write_text('id = "c"\nversion = "1"\nprovider = ["openai", "anthropic"]\nname = "n"\n'
                    'base_urls = ["http://h/v1"]\n')
    with pytest.raises(InputError, match=r"two.toml, field 'provider'.*one provider per"):
        load_model_file(path)
    path.write_text('id = "c"\nversion = "1"\nprovider = "cohere"\nname = "n"\n'
                    'base_urls = ["http://h/v1"]\n')
    with pytest.raises(InputError, match=r"field 'provider'.*unknown provider 'cohere'.*gemini"):
        load_model_file(path)


def test_a_duplicate_endpoint_is_refused(tmp_path):
    path = tmp_path / "dup.toml"
    path.write_text('id = "c"\nversion = "1"\nname = "n"\n'
                    'base_urls = ["http://h:1/v1", "http://h:2/v1", "http://h:1/v1/"]\n')
    with pytest.raises(InputError, match=r"dup.toml, field 'base_urls'.*h:1/v1' is listed twice"):
        load_model_file(path)


def test_a_providers_module_is_imported_only_when_a_model_file_names_it():
    code = ("import sys\nfrom clinieval.providers import make_provider, model_spec\n"
            "import clinieval.runs\n"
            "spec = model_spec({'id': 'm', 'version': '1', 'name': 'm', 'provider': 'gemini',"
            " 'base_urls': ['http://h/v1beta']}, 'x')\n"
            "loaded = lambda: sorted(m.rsplit('.', 1)[1] for m in sys.modules"
            " if m in ('clinieval.providers.openai_compat', 'clinieval.providers.anthropic',"
            " 'clinieval.providers.gemini'))\n"
            "print(loaded()); make_provider(spec); print(loaded())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[:2] == ["[]", "['gemini']"]
