"""A real, minimal OpenAI-compatible HTTP server on the loopback interface,
for tests and benchmarks: it answers ``POST .../chat/completions`` with a
fixed reply after a delay, or misbehaves on purpose (429 with Retry-After,
500, slow answers, malformed JSON) as its handler decides.

HTTP/1.1 with keep-alive on bare asyncio streams, so that one core can serve
thousands of requests per second and the benchmark measures the client.

Run it alone: ``python -m clinieval.providers.stub --port 8099 --delay-ms 20``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Reply:
    """What the server sends for one request."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    hang: bool = False
    """Never answer (a frozen server): the connection stays open and silent."""


Handler = Callable[[dict, int], Reply]
"""(request JSON, 0-based request number) -> reply."""


class HTTPHandler:
    """A handler that also reads the request's path and headers (the native
    API stubs check both)."""

    def respond(self, path: str, headers: dict[str, str], request: dict, number: int) -> Reply:
        raise NotImplementedError


class SharedCapacity:
    """Service slots shared by several stub servers, as two model servers on
    one machine share its cores: with more requests in flight than slots
    (over all servers), each takes proportionally longer. What a frozen or
    stopped server does not use, the others can."""

    def __init__(self, slots: int) -> None:
        self.slots, self.busy = slots, 0
        self._lock = threading.Lock()

    def stretch(self, delay_s: float) -> float:
        with self._lock:
            self.busy += 1
            return delay_s * max(1.0, self.busy / self.slots)

    def done(self) -> None:
        with self._lock:
            self.busy -= 1


def frozen_after(requests: int, handler: Handler) -> Handler:
    """``handler`` for the first ``requests`` requests, then silence for good."""
    return lambda request, n: handler(request, n) if n < requests else Reply(hang=True)


def completion_body(text: str, prompt_tokens: int = 10, finish_reason: str = "stop") -> bytes:
    """A chat-completions response body carrying ``text``."""
    return json.dumps({
        "id": "stub", "object": "chat.completion", "model": "stub",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": max(1, len(text) // 4),
                  "total_tokens": prompt_tokens + max(1, len(text) // 4)},
    }).encode()


def fixed(text: str, delay_s: float = 0.0) -> Handler:
    """A handler that always answers ``text`` after ``delay_s``."""
    body = completion_body(text)
    return lambda _request, _n: Reply(body=body, delay_s=delay_s)


def schema_instance(schema: dict) -> object:
    """The simplest value valid under a JSON schema of the kinds judges use
    (objects with required properties, enums, integers, booleans, strings)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {name: schema_instance(sub) for name, sub in schema.get("properties", {}).items()}
    return {"integer": 1, "number": 1.0, "boolean": True}.get(kind, "stub reason")


def answering(delay_s: float = 0.0, text: str = "A stub answer.") -> Handler:
    """A handler that answers like a well-behaved model: JSON valid under the
    request's ``response_format`` schema when there is one, else ``text``."""
    plain = completion_body(text)

    def handle(request: dict, _n: int) -> Reply:
        schema = (request.get("response_format") or {}).get("json_schema", {}).get("schema")
        body = plain if schema is None else completion_body(json.dumps(schema_instance(schema)))
        return Reply(body=body, delay_s=delay_s)

    return handle


class StubServer:
    """The server in a background thread; ``base_url`` ends in ``/v1``."""

    def __init__(self, handler: Handler | HTTPHandler, port: int = 0,
                 capacity: SharedCapacity | None = None) -> None:
        self.handler, self.port, self.capacity = handler, port, capacity
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self._hung: list[asyncio.Future] = []
        self.frozen = False
        """Whether it has stopped answering (a handler's reply hung)."""
        self.in_flight = self.max_in_flight = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> StubServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", self.port, backlog=1024))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()
        # Open keep-alive connections end with the server, not at interpreter exit.
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        try:
            while parsed := await _read_request(reader):
                method, *parsed = parsed
                # A GET (the fleet's liveness question) is answered at once,
                # or never once the server has frozen.
                # Calls in flight count POSTs only.
                call = method != "GET"
                reply = self._reply(*parsed) if call else Reply(
                    body=b'{"object": "list", "data": []}', hang=self.frozen)
                self.in_flight += call
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    await self._wait(reply, shared=call)
                finally:
                    self.in_flight -= call
                writer.write(_response(reply))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


    def _reply(self, path: str, headers: dict[str, str], request: dict) -> Reply:
        number = len(self.requests)
        self.requests.append(request)
        self.headers.append(headers)
        self.paths.append(path)
        if isinstance(self.handler, HTTPHandler):
            return self.handler.respond(path, headers, request, number)
        return self.handler(request, number)

    async def _wait(self, reply: Reply, shared: bool = True) -> None:
        """Hang, or wait out the reply's delay (stretched by the shared slots
        for a call; a liveness GET takes no slot, as a model server answers
        it outside its decoding slots)."""
        if reply.hang:
            self.frozen = True
            # Never set: silent until the server stops. Held here, or once the
            # client gives up, nothing refers to the waiting task and the
            # garbage collector destroys it mid-wait.
            self._hung.append(self._loop.create_future())
            await self._hung[-1]
        if self.capacity is None or not shared:
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            return
        try:
            await asyncio.sleep(self.capacity.stretch(reply.delay_s))
        finally:
            self.capacity.done()


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict, dict] | None:
    """(method, path, headers, JSON body) of the next request on a connection,
    or None at its end."""
    head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
    if not head:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method = lines[0].split(" ")[0]
    path = lines[0].split(" ")[1] if lines[0].count(" ") >= 2 else ""
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", 0))
    body = await reader.readexactly(length) if length else b"{}"
    try:
        return method, path, headers, json.loads(body)
    except ValueError:
        return method, path, headers, {"unreadable": body.decode("utf-8", "replace")}


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable",
            529: "Overloaded"}


def _response(reply: Reply) -> bytes:
    headers = {"content-type": "application/json", "content-length": str(len(reply.body)),
               **reply.headers}
    lines = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + reply.body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--reply", default='{"ok": true}')
    args = parser.parse_args()
    with StubServer(fixed(args.reply, args.delay_ms / 1000), port=args.port) as server:
        print(server.base_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
