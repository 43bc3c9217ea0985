"""Secret configuration values.

A config field typed `Secret` accepts a literal string or one with
environment references (``"${NAME}"``, ``"${NAME:-default}"``, ``"Bearer
${TOKEN}"``; ``$$`` is a literal ``$``, see `hypaware.core.interpolation`).
Neither the text nor a variable's value is ever shown by `repr`, `str`, logs
or errors; the reference is kept as written and read only when the plugin
that needs the text calls `reveal()` at build.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from hypaware.core.interpolation import expand

__all__ = ["Secret"]

_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


class Secret:
    """A secret string, revealed only on request.

    Two secrets are equal when their raw text (literal or reference) is equal.
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: str) -> None:
        if not isinstance(raw, str):
            raise TypeError("a secret must be a string")
        self._raw = raw

    @property
    def env_var(self) -> str | None:
        """The environment variable this secret refers to, if it is a ``${NAME}`` reference."""
        match = _ENV_REF.match(self._raw)
        return match.group(1) if match else None

    def reveal(self, env: Mapping[str, str] | None = None, *, path: str = "") -> str:
        """The secret's text, its references read from `env` (default: ``os.environ``).

        Raises `ConfigError` naming `path` and the variable when one is unset
        and has no default (the message never holds a value).
        """
        return expand(self._raw, os.environ if env is None else env, path=path)

    def unwrap_raw(self) -> str:
        """The text as written in the config (a literal or a reference), for dumping configs."""
        return self._raw

    def __repr__(self) -> str:
        var = self.env_var
        return f"Secret(${{{var}}})" if var else "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._raw == self._raw

    def __hash__(self) -> int:
        return hash(("Secret", self._raw))
