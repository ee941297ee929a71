"""A browsable log of the automated runs (``clinieval view``): every case x
model x sample x judgment with its prompt, answer, judge output and
rationale, score and parse status, filterable by model, judge, criterion,
parse status and score.

It is a static site (``build_site``): an index, one page per answer, one
script and one style sheet, no external asset and nothing inline, so it can
be shared as a folder or served (``serve``) under a strict
Content-Security-Policy. It is for the evaluation team and names the models:
the clinician platform (``clinieval.web``) never mounts it.

Links into it are stable: ``index.html#model=M&judge=J&criterion=C&parse=P&score=S``
opens the log filtered (any subset of the keys; ``parse=not-ok`` keeps unparsed
and failed judgments), and ``answers/<page>#j-<judgment id>`` opens one
judgment, ``<page>`` being :func:`~clinieval.viewer.data.page_name` of the
answer id.
"""

from clinieval.viewer.data import page_name
from clinieval.viewer.site import build_site, serve

__all__ = ["build_site", "page_name", "serve"]
