"""What the benchmark-run tests share: model files for stub servers and the CLI."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.providers.stub import StubServer

runner = CliRunner()
PROBE = [{"role": "user", "content": "ping"}]


def model_file(folder: Path, server: StubServer, model_id: str, name: str | None = None,
               seed: int | None = 3, **extra) -> Path:
    lines = [f'id = "{model_id}"', f'version = "stub-{model_id}"', f'name = "{name or model_id}"',
             f'base_urls = ["{server.base_url}"]', "concurrency = 4",
             *[f"{k} = {v}" for k, v in extra.items()], "[prices]", "input_per_m = 1.0",
             "output_per_m = 2.0", "[generation]", "max_tokens = 30"]
    if seed is not None:
        lines.append(f"seed = {seed}")
    path = folder / f"{model_id}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def calls(server: StubServer) -> list[dict]:
    """The run's requests, without the pre-flight probe."""
    return [r for r in server.requests if r.get("messages") != PROBE]


def invoke(*args) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, " ".join(result.output.split())


def rows(url: str, sql: str) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()
