"""Keeping configured secrets out of logs, whichever library writes the record.

hypaware's own messages never hold a secret, but the libraries under it log
what they see: at DEBUG, httpcore prints request and response headers, so a
server that echoes a token in a header would put it in the log. Two
defences:

- `SecretRedactor`, a `logging.Filter` that replaces every configured secret
  value (``***``) in each record's message, arguments, exception and stack
  text and string extras. A filter on a handler sees every record the handler
  writes, including those propagated from any library's logger.
- httpx and httpcore are held at WARNING unless the caller names them for
  debugging (`hold_http_loggers`).

`mask_secrets` puts both on an application's own handlers (docs/embedding.md,
"Secrets in your logs"); the CLI installs them on its handler
(`hypaware.cli.logs`, `hypaware.cli.redact`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.errors import HypawareError
from hypaware.core.secrets import Secret

if TYPE_CHECKING:
    from hypaware.core.config import HypawareConfig
    from hypaware.core.registry import Registry
    from hypaware.core.resolver import SinkPlan

__all__ = [
    "HTTP_LOGGERS",
    "MIN_SECRET_LENGTH",
    "SecretRedactor",
    "configured_secrets",
    "hold_http_loggers",
    "mask_secrets",
    "plan_secrets",
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
    try:
        return _config_secrets(config, os.environ if env is None else env, None)
    except HypawareError:
        return []


def plan_secrets(plans: Iterable[SinkPlan], env: Mapping[str, str] | None = None) -> list[str]:
    """The text of every revealable `Secret` in the plugin configs of resolved `plans`."""
    found: list[Secret] = []
    for plan in plans:
        for component in plan.components:
            _secrets_in(component.config, found)
    source = os.environ if env is None else env
    out = []
    for secret in found:
        out += _texts(secret, source)
    return list(dict.fromkeys(out))


def _texts(secret: Secret, env: Mapping[str, str]) -> list[str]:
    """The secret's whole text and each variable it refers to: ``Bearer ${TOKEN}`` masks
    the header and, alone, the token a server may echo without its ``Bearer``."""
    from hypaware.core.interpolation import references

    out = [env[name] for name in references(secret.unwrap_raw()) if name in env]
    # Unset with no default: the variable part has nothing to leak.
    with contextlib.suppress(HypawareError):
        out.append(secret.reveal(env))
    return out


def mask_secrets(
    config: HypawareConfig | Mapping[str, Any] | str | os.PathLike[str] | None = None,
    *,
    secrets: Iterable[str | Secret] = (),
    handlers: Iterable[logging.Handler] | None = None,
    env: Mapping[str, str] | None = None,
    registry: Registry | None = None,
    quiet_http: bool = True,
) -> SecretRedactor:
    """Mask the secrets of `config` (and `secrets`) in every record `handlers` write.

    For an application that embeds hypaware and logs on its own: call it
    after logging is configured. `config` is what `ExportDriver.from_config`
    or `export_once` takes (a `HypawareConfig`, a mapping or a file path);
    each plugin `Secret` in it is revealed from `env` (default
    ``os.environ``) and masked as ``***``. `secrets` adds values the
    application holds itself (plain text or `Secret`), for sinks it builds
    without a config. `handlers` defaults to the root logger's handlers;
    records reach those from every library's logger that propagates.
    Calling it again adds to the filter already there, so several configs
    can share handlers. With `quiet_http` (the default) httpx and httpcore
    are held at WARNING: their DEBUG records hold request headers, and a
    token the destination derives (an OAuth access token) is not a
    configured value the filter knows.

    Returns the filter, to add to handlers created later
    (``handler.addFilter(redactor)``). Raises `ConfigError` for a config
    that does not resolve, and `HypawareError` when there is no handler to
    mask (logging not configured yet: its last-resort handler takes no
    filters).
    """
    source = os.environ if env is None else env
    found: list[str] = []
    for secret in secrets:
        found += _texts(secret, source) if isinstance(secret, Secret) else [secret]
    if config is not None:
        found += _config_secrets(config, source, registry)
    targets = list(logging.getLogger().handlers if handlers is None else handlers)
    if not targets:
        raise HypawareError(
            "mask_secrets(): the root logger has no handlers, so nothing would be masked: "
            "configure logging first (logging.basicConfig() or dictConfig) or pass handlers="
        )
    redactor = next((f for h in targets for f in h.filters if isinstance(f, SecretRedactor)), None)
    if redactor is None:
        redactor = SecretRedactor()
    redactor.add(found)
    for handler in targets:
        if redactor not in handler.filters:
            handler.addFilter(redactor)
    if quiet_http:
        hold_http_loggers()
    return redactor


def _config_secrets(
    config: HypawareConfig | Mapping[str, Any] | str | os.PathLike[str],
    env: Mapping[str, str],
    registry: Registry | None,
) -> list[str]:
    from hypaware.core.config import HypawareConfig
    from hypaware.core.config_loader import load_config
    from hypaware.core.registry import Registry
    from hypaware.core.resolver import resolve

    loaded = config if isinstance(config, HypawareConfig) else load_config(config)
    plans = resolve(loaded, registry or Registry.from_entry_points())
    return plan_secrets(plans, env)


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
