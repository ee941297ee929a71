"""A short description of a snapshot: what is in it and over which dates."""

from __future__ import annotations

import pyarrow.compute as pc

from clinieval.snapshot import Snapshot, current_ratings


def summarise(snap: Snapshot) -> dict[str, str]:
    counts = snap.counts()
    ratings = current_ratings(snap["ratings"])
    criteria = snap["criteria"]
    safety = criteria.filter(pc.fill_null(criteria.column("safety_critical"), False))
    return {
        "counts": ", ".join(f"{name} {n:,}" for name, n in counts.items()),
        "current ratings": f"{ratings.num_rows:,} (latest revision of each score)",
        "models": _listing(snap["models"].column("model_id").to_pylist()),
        "specialties": _listing(sorted(set(snap["cases"].column("specialty").to_pylist()))),
        "criteria": ", ".join(criteria.column("criterion_id").to_pylist())
        + f" (safety-critical: {', '.join(safety.column('criterion_id').to_pylist()) or 'none'})",
        "raters": f"{counts['raters']:,}",
        "date range": _date_range(snap),
    }


def _listing(values: list[str], limit: int = 15) -> str:
    shown = ", ".join(values[:limit])
    more = f", ... ({len(values) - limit} more)" if len(values) > limit else ""
    return f"{len(values)}: {shown}{more}"


def _date_range(snap: Snapshot) -> str:
    stamps = [c for name in ("ratings", "preferences")
              if (c := snap[name].column("created_at")).null_count < len(c)]
    if not stamps:
        return "no timestamps"
    lows = [pc.min(c).as_py() for c in stamps]
    highs = [pc.max(c).as_py() for c in stamps]
    return f"{min(lows):%Y-%m-%d} to {max(highs):%Y-%m-%d}"
