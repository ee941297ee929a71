"""Automated runs: candidate answers and LLM judgments, cached and resumable."""

from clinieval.runs.engine import Call, Stats, Task
from clinieval.runs.generate import GenerateJob
from clinieval.runs.judges import (
    JUDGES,
    JuryJudge,
    PairwiseJudge,
    RubricJudge,
    Rule,
    RuleJudge,
    pairs_within_cases,
    resolve_pair,
)
from clinieval.runs.multi import execute_many
from clinieval.runs.rules import load_rules
from clinieval.runs.runner import DryRun, RunOptions, estimate, execute, failed_runs, plan_run_id

__all__ = [
    "Call",
    "DryRun",
    "GenerateJob",
    "JUDGES",
    "JuryJudge",
    "PairwiseJudge",
    "RubricJudge",
    "Rule",
    "RuleJudge",
    "RunOptions",
    "Stats",
    "Task",
    "estimate",
    "execute",
    "execute_many",
    "failed_runs",
    "load_rules",
    "pairs_within_cases",
    "plan_run_id",
    "resolve_pair",
]
