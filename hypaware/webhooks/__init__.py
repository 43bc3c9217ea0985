"""``@hypaware/webhook``'s sink (`hypaware.webhooks.sink`) and its receivers' side.

Receiving webhooks from ``@hypaware/webhook``: check that a request is genuine.

    from hypaware.webhooks import SeenMessages, verify

    seen = SeenMessages()
    hook = verify(request.headers, raw_body, secret, seen=seen)  # raises if not genuine
    store(hook.dataset, hook.id, raw_body)  # dedupe on hook.id

See ``docs/request-sinks.md`` ("Receiving webhooks"). Light: only the
standard library and attrs are imported (the sink, `hypaware.webhooks.sink`,
is imported only by the plugin that builds it); `hypaware.webhooks.signing`
holds the signature both sides share.
"""

from hypaware.webhooks.signing import (
    DEFAULT_TOLERANCE,
    SeenMessages,
    VerifiedWebhook,
    WebhookVerificationError,
    verify,
    verify_body,
)

__all__ = [
    "DEFAULT_TOLERANCE",
    "SeenMessages",
    "VerifiedWebhook",
    "WebhookVerificationError",
    "verify",
    "verify_body",
]
