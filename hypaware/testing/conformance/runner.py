"""How the conformance suite runs its checks: outcomes, opt-outs, and pytest's view of them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Literal, TypeVar

import attrs
import pytest

from hypaware.testing.conformance.promises import (
    CheckSkipped,
    ContractViolation,
    HookMissing,
    Promise,
)

__all__ = ["CheckOutcome"]

H = TypeVar("H")


@attrs.frozen
class CheckOutcome:
    """The result of one check: ``passed``, ``failed`` (with the message) or ``skipped``."""

    name: str
    status: Literal["passed", "failed", "skipped"]
    message: str = ""
    promise: Promise | None = None


def _opted_out(checks: Mapping[str, object], skip: Mapping[str, str]) -> None:
    unknown = sorted(set(skip) - set(checks))
    if unknown:
        raise ValueError(f"skip_checks names unknown checks {unknown}; known: {sorted(checks)}")
    for name, reason in skip.items():
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"skip_checks[{name!r}]: give the reason the check is skipped")


def _skip_reason(name: str, skip: Mapping[str, str]) -> str:
    return f"{name}: opted out by the author: {skip[name]}"


async def _run(
    checks: Mapping[str, Callable[[H], Awaitable[None]]],
    harness: H,
    only: Iterable[str] | None,
    skip: Mapping[str, str] | None = None,
    known: Mapping[str, object] | None = None,
) -> list[CheckOutcome]:
    names = list(checks) if only is None else list(only)
    unknown = [n for n in names if n not in checks]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; known: {sorted(checks)}")
    skip = dict(skip or {})
    _opted_out(known if known is not None else checks, skip)
    outcomes: list[CheckOutcome] = []
    for name in names:
        if name in skip:
            outcomes.append(CheckOutcome(name, "skipped", _skip_reason(name, skip)))
            continue
        try:
            await checks[name](harness)
        except HookMissing as exc:
            outcomes.append(CheckOutcome(name, "failed", str(exc)))
        except ContractViolation as exc:
            outcomes.append(CheckOutcome(name, "failed", str(exc), exc.promise))
        except CheckSkipped as exc:
            outcomes.append(CheckOutcome(name, "skipped", str(exc)))
        except AssertionError:
            raise  # the harness itself is wrong, not the object under test
        except Exception as exc:
            outcomes.append(CheckOutcome(name, "failed", f"raised {type(exc).__name__}: {exc}"))
        else:
            outcomes.append(CheckOutcome(name, "passed"))
    return outcomes


async def _as_test(
    check: Callable[[H], Awaitable[None]], harness: H, skip: Mapping[str, str] | None = None
) -> None:
    name = getattr(check, "__name__", "").removeprefix("check_")
    if skip and name in skip:
        pytest.skip(_skip_reason(name, skip))
    try:
        await check(harness)
    except CheckSkipped as exc:
        pytest.skip(str(exc))
    except HookMissing as exc:
        pytest.fail(str(exc), pytrace=False)


def _overrides(obj: object, base: type, name: str) -> bool:
    return getattr(type(obj), name) is not getattr(base, name)
