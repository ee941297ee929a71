"""The OpenAI-compatible provider against a real HTTP server on loopback that
misbehaves on purpose: rate limits with Retry-After, server errors, slow and
malformed answers, replicas and concurrency limits."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clinieval.errors import ConfigError, InputError
from clinieval.providers import CallFailed, RetryPolicy, load_model_file, make_provider, model_spec
from clinieval.providers.retry import parse_retry_after
from clinieval.providers.stub import (
    Reply,
    SharedCapacity,
    StubServer,
    answering,
    completion_body,
)

HELLO = [{"role": "user", "content": "hello"}]
FAST = RetryPolicy(max_attempts=3, base_s=0.01, cap_s=0.05)


def _spec(*servers: StubServer, **fields):
    data = {"id": "m", "version": "v1", "name": "m",
            "base_urls": [s.base_url for s in servers]} | fields
    return model_spec(data, "test.toml")


def _call(spec, times: int = 1, policy: RetryPolicy = FAST):
    async def go():
        provider = make_provider(spec, policy=policy, seed=1)
        try:
            return await asyncio.gather(*[provider.generate(HELLO, {"temperature": 0})
                                          for _ in range(times)])
        finally:
            await provider.aclose()

    return asyncio.run(go())


def _script(*replies: Reply):
    """A handler answering request i with replies[i], then plain success."""
    ok = Reply(body=completion_body("fine"))
    return lambda _req, n: replies[n] if n < len(replies) else ok


def test_a_429_is_retried_after_the_servers_retry_after():
    with StubServer(_script(Reply(429, b"{}", {"retry-after": "1"}))) as server:
        start = time.monotonic()
        [completion] = _call(_spec(server))
        waited = time.monotonic() - start
    assert completion.text == "fine" and completion.attempts == 2
    assert len(server.requests) == 2
    assert waited >= 1.0  # backoff alone would wait at most 0.05 s


def test_a_persistent_500_fails_after_every_try_with_its_error():
    with StubServer(lambda _r, _n: Reply(500, b"boom")) as server:
        with pytest.raises(CallFailed, match="HTTP 500.*after 3 tries") as err:
            _call(_spec(server))
    assert err.value.attempts == 3 and len(server.requests) == 3


def test_a_client_error_is_not_retried():
    with StubServer(lambda _r, _n: Reply(400, b'{"error": "bad model"}')) as server:
        with pytest.raises(CallFailed, match="HTTP 400.*bad model"):
            _call(_spec(server))
    assert len(server.requests) == 1


def test_a_slow_answer_times_out_and_the_retry_succeeds():
    with StubServer(_script(Reply(body=completion_body("late"), delay_s=3))) as server:
        [completion] = _call(_spec(server, timeout_s=0.5))
    assert completion.text == "fine" and completion.attempts == 2


def test_a_malformed_body_is_retried_and_never_taken_as_an_answer():
    bad = [Reply(body=b"{not json"), Reply(body=b'{"choices": []}')]
    with StubServer(_script(*bad)) as server:
        [completion] = _call(_spec(server))
    assert completion.text == "fine" and completion.attempts == 3
    with StubServer(lambda _r, _n: Reply(body=b"<html>")) as server:
        with pytest.raises(CallFailed, match="unreadable response body"):
            _call(_spec(server))


def test_connection_refused_is_retried_then_reported():
    spec = model_spec({"id": "m", "version": "v", "name": "m",
                       "base_urls": ["http://127.0.0.1:9"]}, "x")
    with pytest.raises(CallFailed, match="connection refused.*after 3 tries"):
        _call(spec)


def test_replicas_share_the_calls_and_each_keeps_its_concurrency_limit():
    with StubServer(answering(0.05)) as one, StubServer(answering(0.05)) as two:
        _call(_spec(one, two, concurrency=3), times=24)
    assert len(one.requests) == len(two.requests) == 12
    assert one.max_in_flight == two.max_in_flight == 3


class PeakCapacity(SharedCapacity):
    """Counts the requests being served over all the servers sharing it."""

    peak = 0

    def stretch(self, delay_s: float) -> float:
        stretched = super().stretch(delay_s)
        self.peak = max(self.peak, self.busy)
        return stretched


def test_max_in_flight_bounds_the_calls_over_all_replicas_not_each():
    """Each replica may take 6 and the model 8: 8 at once over both (4 each:
    fewest outstanding first), however many calls are asked for at once."""
    capacity = PeakCapacity(slots=1000)
    with StubServer(answering(0.05), capacity=capacity) as one, StubServer(
            answering(0.05), capacity=capacity) as two:
        spec = _spec(one, two, concurrency=6, max_in_flight=8)
        assert make_provider(spec).concurrency == 8 + 4  # 4 more wait for a lost replica's
        _call(spec, times=64)
    assert capacity.peak == 8 and one.max_in_flight == two.max_in_flight == 4
    assert len(one.requests) + len(two.requests) == 64


def test_without_max_in_flight_the_model_takes_every_replicas_most():
    spec = model_spec({"id": "m", "version": "v1", "name": "m", "concurrency": 3,
                       "max_concurrency": 5, "base_urls": ["http://a/v1", "http://b/v1"]},
                      "test.toml")
    assert spec.max_in_flight is None and make_provider(spec).concurrency == 10


@given(urls=st.integers(1, 4), concurrency=st.integers(-1, 9),
       maximum=st.none() | st.integers(-1, 9), in_flight=st.none() | st.integers(-1, 40))
def test_in_flight_settings_load_or_name_the_file_and_key(urls, concurrency, maximum, in_flight):
    data = {"id": "m", "version": "v", "name": "m", "concurrency": concurrency,
            "base_urls": [f"http://127.0.0.1:{8000 + i}/v1" for i in range(urls)]}
    data |= {k: v for k, v in (("max_concurrency", maximum), ("max_in_flight", in_flight))
             if v is not None}
    try:
        spec = model_spec(data, "fuzz.toml")
    except InputError as err:
        assert str(err).startswith("fuzz.toml, field '")
        assert any(f"field '{key}'" in str(err)
                   for key in ("concurrency", "max_concurrency", "max_in_flight"))
        return
    ceiling = spec.max_concurrency or spec.concurrency
    assert 1 <= spec.concurrency <= ceiling
    bound = make_provider(spec).fleet.capacity
    assert bound == (in_flight if in_flight is not None else urls * ceiling)
    assert 1 <= bound <= urls * ceiling


def test_a_run_bound_above_the_replicas_ceilings_names_the_key(tmp_path):
    path = tmp_path / "judge.toml"
    path.write_text('id = "j"\nversion = "1"\nname = "j"\nconcurrency = 8\n'
                    'base_urls = ["http://a/v1", "http://b/v1"]\nmax_in_flight = 17\n')
    with pytest.raises(InputError, match=r"judge.toml, field 'max_in_flight'.*2 x 8 = 16"
                       r".*\(got 17\)"):
        load_model_file(path)
    path.write_text('id = "j"\nversion = "1"\nname = "j"\nbase_urls = ["http://a/v1"]\n'
                    'max_in_flight = 0\n')
    with pytest.raises(InputError, match=r"field 'max_in_flight'.*greater than or equal to 1"):
        load_model_file(path)


def test_the_api_key_comes_from_the_named_variable(monkeypatch):
    monkeypatch.setenv("CLINIEVAL_TEST_KEY", "sk-secret")
    with StubServer(answering()) as server:
        _call(_spec(server, api_key_env="CLINIEVAL_TEST_KEY"))
    assert server.headers[0]["authorization"] == "Bearer sk-secret"
    monkeypatch.delenv("CLINIEVAL_TEST_KEY")
    with pytest.raises(ConfigError, match="CLINIEVAL_TEST_KEY"):
        make_provider(_spec(server, api_key_env="CLINIEVAL_TEST_KEY"))


def test_model_file_errors_name_the_file_and_field(tmp_path):
    path = tmp_path / "judge.toml"
    path.write_text('id = "j"\nversion = "1"\nname = "j"\nbase_urls = ["http://h/v1"]\n'
                    '[prices]\ninput_per_m = -1\n')
    with pytest.raises(InputError, match=r"judge.toml, field 'prices.input_per_m'"):
        load_model_file(path)
    path.write_text('id = "j"\nversion = "1"\nname = "j"\nbase_urls = ["ftp://h"]\n')
    with pytest.raises(InputError, match=r"field 'base_urls'.*http"):
        load_model_file(path)
    path.write_text('id = "j"\nname = "j"\nbase_urls = ["http://h"]\ncolour = 1\n')
    with pytest.raises(InputError, match=r"field 'version'"):
        load_model_file(path)
    path.write_text("id = ")
    with pytest.raises(InputError, match="not valid TOML"):
        load_model_file(path)


@given(attempt=st.integers(1, 30), after=st.none() | st.floats(0, 500), seed=st.integers())
def test_waits_are_jittered_capped_and_honour_retry_after(attempt, after, seed):
    policy = RetryPolicy(base_s=0.5, cap_s=30, retry_after_cap_s=120)
    wait = policy.wait_s(attempt, after, random.Random(seed))
    assert 0 <= wait <= max(30, min(after or 0, 120))
    if after is not None:
        assert wait >= min(after, 120)
    else:
        assert wait <= min(30, 0.5 * 2 ** (attempt - 1))


def test_retry_after_reads_seconds_and_http_dates():
    assert parse_retry_after("7", now=0) == 7
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470) == 10
    assert parse_retry_after("soon", now=0) is None and parse_retry_after(None, now=0) is None
