"""Keeping configured secrets out of the CLI's logs, whichever library writes the record.

hypaware's own messages never hold a secret, but the libraries under it log
what they see: at DEBUG, httpcore prints request and response headers, so a
server that echoes a token in a header would put it in the log. Two
defences, installed by `install` on the root logger's handlers:

- `SecretRedactor`, a `logging.Filter` that replaces every configured secret
  value (``***``) in each record's message, arguments, exception and stack
  text and string extras. A filter on a handler sees every record the handler
  writes, including those propagated from any library's logger.
- httpx and httpcore are held at WARNING unless the caller names them for
  debugging (`debug_loggers`).

Every command gets both from `hypaware.cli.logs.configured` (the filter on
its handler, the HTTP loggers held for the length of the command); the
shared config check (`hypaware.cli.common.checked_config`) hands the filter
the secrets of the plans it resolved (`plan_secrets`), so the config is
resolved once (`retry` and `reset-progress`, which skip that check, resolve
it for this alone: `redact_config`). `install` does the same for a program's own root handlers.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.secrets import Secret

if TYPE_CHECKING:
    from hypaware.core.resolver import SinkPlan

__all__ = [
    "HTTP_LOGGERS",
    "SecretRedactor",
    "configured_secrets",
    "hold_http_loggers",
    "install",
    "plan_secrets",
    "redact_config",
    "redact_plans",
]

HTTP_LOGGERS = ("httpx", "httpcore")
MIN_SECRET_LENGTH = 4
"""Shorter values are not redacted: masking every "ab" would mangle logs more than hide."""

_MASK = "***"


class SecretRedactor(logging.Filter):
    """Replaces each of `secrets` with ``***`` in every record that passes; drops none.

    `add` takes more secrets later: the CLI installs the filter with its log
    handler, before the config is read, and adds the secrets once the
    config check has resolved them.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._secrets: tuple[str, ...] = ()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Mask `secrets` too, from the next record on."""
        found = set(self._secrets) | {s for s in secrets if len(s) >= MIN_SECRET_LENGTH}
        # Longest first, so a secret containing another is masked whole.
        self._secrets = tuple(sorted(found, key=len, reverse=True))

    def __repr__(self) -> str:
        return f"SecretRedactor({len(self._secrets)} secrets)"

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, _MASK)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: logging reports it; keep its raw text safe
            message = str(record.msg)
        record.msg = self.redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
            # The formatter would re-render exc_info only when exc_text is empty.
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        for key, value in list(vars(record).items()):
            if isinstance(value, str) and key not in ("msg", "exc_text", "stack_info"):
                redacted = self.redact(value)
                if redacted is not value:
                    setattr(record, key, redacted)
        return True


def _secrets_in(value: Any, out: list[Secret], depth: int = 0) -> None:
    if depth > 8:
        return
    if isinstance(value, Secret):
        out.append(value)
    elif attrs.has(type(value)):
        for field in attrs.fields(type(value)):
            _secrets_in(getattr(value, field.name), out, depth + 1)
    elif isinstance(value, Mapping):
        for item in value.values():
            _secrets_in(item, out, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _secrets_in(item, out, depth + 1)


def configured_secrets(config: Any, env: Mapping[str, str] | None = None) -> list[str]:
    """The text of every `Secret` in the plugin configs of `config` that can be revealed.

    Resolves `config` against the installed plugins; a config that does not
    resolve yields nothing here (the CLI reports it on its own). A secret
    whose variable is unset is skipped: there is nothing to leak.
    """
    from hypaware.core.errors import HypawareError
    from hypaware.core.registry import Registry
    from hypaware.core.resolver import resolve

    try:
        plans = resolve(config, Registry.from_entry_points())
    except HypawareError:
        return []
    return plan_secrets(plans, env)


def plan_secrets(plans: Iterable[SinkPlan], env: Mapping[str, str] | None = None) -> list[str]:
    """The text of every revealable `Secret` in the plugin configs of resolved `plans`."""
    from hypaware.core.errors import HypawareError

    found: list[Secret] = []
    for plan in plans:
        for component in (plan.writer, plan.destination, plan.encoder, plan.plugin):
            if component is not None:
                _secrets_in(component.config, found)
    source = os.environ if env is None else env
    out = []
    for secret in found:
        try:
            out.append(secret.reveal(source))
        except HypawareError:
            continue
    return out


def install(
    secrets: Iterable[str],
    *,
    debug_loggers: Iterable[str] = (),
    root: logging.Logger | None = None,
) -> SecretRedactor:
    """Add a `SecretRedactor` to every handler of the root logger; hold httpx/httpcore at WARNING.

    `debug_loggers` names loggers the user asked to see at DEBUG; httpx and
    httpcore are left alone only when named there. Returns the filter.
    """
    logger = root or logging.getLogger()
    redactor = SecretRedactor(secrets)
    for handler in logger.handlers:
        for old in [f for f in handler.filters if isinstance(f, SecretRedactor)]:
            handler.removeFilter(old)
        handler.addFilter(redactor)
    hold_http_loggers(debug_loggers)
    return redactor


def hold_http_loggers(debug_loggers: Iterable[str] = ()) -> dict[str, int]:
    """Set httpx and httpcore to WARNING unless named in `debug_loggers`; their former levels."""
    named = set(debug_loggers)
    former = {}
    for name in HTTP_LOGGERS:
        if name not in named:
            logger = logging.getLogger(name)
            former[name] = logger.level
            logger.setLevel(logging.WARNING)
    return former


def redact_plans(handler: logging.Handler | None, plans: Iterable[SinkPlan]) -> None:
    """Give the `SecretRedactor` on `handler` the secrets of `plans` (resolved already)."""
    if handler is not None:
        _add(handler, plan_secrets(plans))


def redact_config(handler: logging.Handler | None, config: Any) -> None:
    """`redact_plans` for a command that loads `config` without the full check.

    Resolves it once here (`configured_secrets`); a config that does not
    resolve gives no secrets, and the command goes on as before.
    """
    if handler is not None:
        _add(handler, configured_secrets(config))


def _add(handler: logging.Handler, secrets: list[str]) -> None:
    for found in handler.filters:
        if isinstance(found, SecretRedactor):
            found.add(secrets)
