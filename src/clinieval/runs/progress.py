"""A live terminal view of a run: done / cached / failed / unparsed, calls
per second, tokens, cost so far and time left. It reads the run's counters
a few times a second, so it costs the calls themselves nothing."""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.text import Text

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
