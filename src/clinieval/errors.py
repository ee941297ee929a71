"""Errors that name where bad input is: file, row or record, field, expectation."""

from __future__ import annotations


class ClinievalError(Exception):
    """Base class for errors clinieval reports to a user."""


class InputError(ClinievalError):
    """Bad input data. The message names the file, the row or record id, the
    field, what was expected and what was found."""

    def __init__(
        self,
        source: str,
        message: str,
        *,
        row: int | str | None = None,
        field: str | None = None,
        expected: str | None = None,
        got: object = None,
    ) -> None:
        self.source, self.row, self.field = source, row, field
        self.expected, self.got = expected, got
        # One line: messages of libraries (Arrow, pydantic) may span several.
        message = "; ".join(line.strip() for line in message.splitlines() if line.strip())
        where = [str(source)]
        if row is not None:
            where.append(f"row {row}" if isinstance(row, int) else f"record {row!r}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = f"{', '.join(where)}: "
        text = prefix + message
        if expected is not None:
            text += f" (expected {expected}"
            text += f", got {_short(got)})" if got is not None else ")"
        elif got is not None:
            text += f" (got {_short(got)})"
        self.reason = text[len(prefix):]
        """The message without the source, row and field it names (a web form
        shows it beside the field)."""
        super().__init__(text)


def from_validation(source: str, err, message: str) -> InputError:
    """An :class:`InputError` for the first problem a pydantic ``ValidationError``
    found in a file, naming the field by its path (``criteria[2].weight``)."""
    first = err.errors()[0]
    path = ""
    for part in first["loc"]:
        if part == "[key]":  # pydantic's marker for "the key itself is wrong"
            continue
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    value = first.get("input")
    got = sorted(value)[:8] if isinstance(value, dict) else value
    return InputError(source, f"{message}: {first['msg']}", field=path or None,
                      got=None if first["type"] == "missing" else got)


class ConfigError(ClinievalError):
    """A setting is missing or invalid; the message names the variable."""


def _short(value: object, limit: int = 60) -> str:
    try:
        text = repr(value)
    except RecursionError:  # a value nested deeper than Python prints (hostile JSON)
        return f"a {type(value).__name__} nested too deep to show"
    return text if len(text) <= limit else text[: limit - 3] + "..."
