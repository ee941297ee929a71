"""A live terminal view of a run: done / cached / failed / unparsed, calls
per second, tokens, cost so far and time left. It reads the run's counters
a few times a second, so it costs the calls themselves nothing."""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from clinieval.providers import CauseCount, ReplicaReport
from clinieval.runs.engine import Stats


class RunView:
    def __init__(self, title: str) -> None:
        self.title = title
        self.stats = Stats()

    def watch(self, stats: Stats) -> None:
        self.stats = stats

    def __rich__(self) -> Group:
        s = self.stats
        todo = s.planned - s.skipped
        elapsed = max(time.monotonic() - s.started, 1e-9)
        rate = s.finished / elapsed
        left = (todo - s.finished) / rate if rate else float("nan")
        line = (f"{s.finished:,}/{todo:,}  done {s.done:,}  cached {s.cached:,}  "
                f"failed {s.failed:,}  unparsed {s.unparsed:,}  |  {rate:,.1f} tasks/s  |  "
                f"tokens {s.input_tokens:,} in / {s.output_tokens:,} out  |  "
                f"${s.cost_usd:,.4f}  |  left {_clock(left)}")
        return Group(Text(self.title, style="bold"),
                     ProgressBar(total=max(todo, 1), completed=s.finished), Text(line))


def _clock(seconds: float) -> str:
    if seconds != seconds:  # NaN: no rate yet
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


def live(view: RunView, console: Console) -> Live:
    return Live(view, console=console, refresh_per_second=4, transient=False)


def failures_table(title: str, causes: list[CauseCount]) -> Table:
    """Failed and unparsed calls of a run by cause, with one example each."""
    table = Table(title=title)
    for column in ("cause", "calls", "fails the run", "example"):
        table.add_column(column, justify="right" if column == "calls" else "left")
    for c in causes:
        table.add_row(c.cause, f"{c.count:,}", "yes" if c.fatal else "no (kept raw)",
                      c.example[:160])
    return table


def endpoints_table(title: str, reports: list[ReplicaReport]) -> Table:
    """Per replica: calls sent and answered, failures by cause, the
    concurrency its adaptive limit settled at, its breaker."""
    table = Table(title=title)
    for column in ("endpoint", "calls", "answered", "failures", "concurrency (lowest / max)",
                   "breaker"):
        table.add_column(column, justify="left" if column in ("endpoint", "failures") else
                         "right")
    for r in reports:
        failures = ", ".join(f"{cause} {n:,}" for cause, n in r.failures.items()) or "-"
        table.add_row(r.url, f"{r.calls:,}", f"{r.ok:,}", failures,
                      f"{r.concurrency} ({r.lowest_concurrency} / {r.max_concurrency})",
                      f"{r.breaker} (opened {r.times_opened}x)" if r.times_opened else r.breaker)
    return table
