"""Cron schedules: standard 5-field expressions, evaluated in UTC."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["check_schedule", "next_fire"]


def check_schedule(expr: object) -> str | None:
    """Why `expr` is not a usable 5-field cron expression, or None if it is."""
    if not isinstance(expr, str):
        return f"schedule must be a string such as '*/5 * * * *', got {type(expr).__name__}"
    fields = expr.split()
    if len(fields) != 5:
        return (
            f"schedule {expr!r} must have 5 fields (minute hour day-of-month month "
            f"day-of-week), it has {len(fields)}"
        )
    from croniter import CroniterBadDateError, croniter

    if not croniter.is_valid(expr):
        return f"schedule {expr!r} is not a valid cron expression"
    try:
        croniter(expr, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except CroniterBadDateError:
        return f"schedule {expr!r} never fires"
    except (ValueError, KeyError, OverflowError) as exc:
        return f"schedule {expr!r} is not a valid cron expression ({exc})"
    return None


def next_fire(expr: str, after: datetime) -> datetime:
    """The first time strictly after `after` (UTC) at which `expr` fires.

    A naive `after` is taken as UTC. Raises `ValueError` for an expression
    `check_schedule` rejects.
    """
    problem = check_schedule(expr)
    if problem is not None:
        raise ValueError(problem)
    from croniter import croniter

    if after.tzinfo is None:
        after = after.replace(tzinfo=UTC)
    fire = croniter(expr, after.astimezone(UTC)).get_next(datetime)
    assert isinstance(fire, datetime)
    return fire.astimezone(UTC)
