"""The clinician platform: invitations, profiles, blinded rating and pairwise
tasks with leases, drafts and revisions (FastAPI + Jinja2, no CDN).

Start it with ``clinieval serve``; in Python, ``create_app(engine)`` gives the
ASGI application on a migrated database. The package imports FastAPI only
when ``create_app`` is asked for (the services it calls are in
:mod:`clinieval.platform`), so importing a submodule such as
:mod:`clinieval.web.testing` does not build the app.
"""

from clinieval import _lazy

_EXPORTS = {"create_app": "clinieval.web.app"}

__getattr__, __dir__ = _lazy.lazy_exports(__name__, globals(), _EXPORTS)

__all__ = ["create_app"]
