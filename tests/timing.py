"""The one wall-clock limit tests use for "at once", and why it can be wide.

Each such test sets up an alternative that takes far longer: a 3600 s sleep,
a Retry-After of 30 s or more, a sink that hangs until closed. The limit only
has to tell "promptly" from that, so it leaves a wide margin for a loaded
2-core machine shared with other work; what the test proves does not change.
"""

from __future__ import annotations

# Seconds. Keep it well under the shortest alternative the tests set up (30 s).
PROMPT = 10.0
