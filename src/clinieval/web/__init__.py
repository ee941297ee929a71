"""The clinician platform: invitations, profiles, blinded rating and pairwise
tasks with leases, drafts and revisions (FastAPI + Jinja2, no CDN).

Start it with ``clinieval serve``; in Python, ``create_app(engine)`` gives the
ASGI application on a migrated database.
"""

from clinieval.web.app import create_app

__all__ = ["create_app"]
