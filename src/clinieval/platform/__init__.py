"""The clinician platform's services, free of HTTP: studies, accounts,
assignment of tasks, submissions and drafts, the leak guard, the live view
and the read models a page shows.

Nothing in this package imports FastAPI or Starlette (a test imports every
module in a fresh interpreter to prove it): the command line and the live
view's worker use the services without the web application, and
:mod:`clinieval.web` calls them from its routes. This module imports nothing.
"""
