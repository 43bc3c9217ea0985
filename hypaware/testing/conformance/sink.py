"""Conformance checks for `hypaware.core.contracts.Sink`: every check, by name.

Each check is a coroutine taking a `SinkHarness` and raising
`ContractViolation` (naming the broken promise) or `CheckSkipped`. They only
use what the contract exposes plus the harness's optional ways to observe the
destination, so they run against any sink, first- or third-party.

The checks live by promise group, in modules of this package: rows landing
exactly once in `hypaware.testing.conformance.sink_delivery`, `close()` in
`hypaware.testing.conformance.sink_lifecycle`, paths and secrets in
`hypaware.testing.conformance.sink_safety`; the harness and the calls they
share in `hypaware.testing.conformance.sink_harness`.
"""

from __future__ import annotations

from hypaware.testing.conformance.sink_delivery import (
    check_aligned_ids_from_two_caches_both_land,
    check_exports_every_partition,
    check_partition_failure_is_reported,
    check_reexport_is_idempotent,
    check_respool_into_new_batch_is_idempotent,
)
from hypaware.testing.conformance.sink_harness import SinkCheck, SinkHarness
from hypaware.testing.conformance.sink_lifecycle import (
    check_close_aborts_wait,
    check_close_during_export_is_prompt,
    check_close_is_idempotent,
    check_export_after_close_raises,
)
from hypaware.testing.conformance.sink_safety import (
    check_hostile_names_stay_under_root,
    check_no_secrets_in_reprs,
)

__all__ = ["SINK_CHECKS", "SinkCheck", "SinkHarness"]


SINK_CHECKS: dict[str, SinkCheck] = {
    "exports_every_partition": check_exports_every_partition,
    "reexport_is_idempotent": check_reexport_is_idempotent,
    "respool_into_new_batch_is_idempotent": check_respool_into_new_batch_is_idempotent,
    "aligned_ids_from_two_caches_both_land": check_aligned_ids_from_two_caches_both_land,
    "partition_failure_is_reported": check_partition_failure_is_reported,
    "export_after_close_raises": check_export_after_close_raises,
    "close_is_idempotent": check_close_is_idempotent,
    "close_during_export_is_prompt": check_close_during_export_is_prompt,
    "close_aborts_wait": check_close_aborts_wait,
    "hostile_names_stay_under_root": check_hostile_names_stay_under_root,
    "no_secrets_in_reprs": check_no_secrets_in_reprs,
}
