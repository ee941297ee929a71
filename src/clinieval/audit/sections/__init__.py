"""Report sections, one module each, in two steps: ``compute`` turns the
audit context into a typed result (or :class:`Skipped` with the reason), and
``present`` turns that result into text, tables and figures. ``section``
runs both."""
