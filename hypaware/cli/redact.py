"""The CLI's side of keeping configured secrets out of logs (`hypaware.core.redact`).

Every command gets both defences from `hypaware.cli.logs.configured` (the
filter on its handler, the HTTP loggers held for the length of the command);
the shared config check (`hypaware.cli.common.checked_config`) hands the
filter the secrets of the plans it resolved (`redact_plans`), so the config
is resolved once (`retry` and `reset-progress`, which skip that check,
resolve it for this alone: `redact_config`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from hypaware.core.redact import (
    HTTP_LOGGERS,
    SecretRedactor,
    configured_secrets,
    hold_http_loggers,
    plan_secrets,
)

if TYPE_CHECKING:
    from hypaware.core.resolver import SinkPlan

__all__ = [
    "HTTP_LOGGERS",
    "SecretRedactor",
    "configured_secrets",
    "hold_http_loggers",
    "plan_secrets",
    "redact_config",
    "redact_plans",
]


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
