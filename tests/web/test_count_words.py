"""One vocabulary for counts (issue 29, section 6): a rating is one
clinician's scores of one answer, a ratings-table row one criterion score.
The report's header counted rows as "ratings" where the live view and
progress count (answer, clinician) ratings."""

from __future__ import annotations

from clinieval.report.example import small_result
from clinieval.report.render import snapshot_line


def test_the_report_header_counts_criterion_scores_not_ratings():
    result = small_result()
    result.snapshot["counts"] = {"models": 2, "ratings": 46, "preferences": 1}
    line = snapshot_line(result)
    assert "46 criterion scores" in line and "ratings" not in line, line
    result.snapshot["counts"] = {"ratings": 1}
    assert "1 criterion score ·" in snapshot_line(result)
