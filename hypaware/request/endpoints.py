"""Checking the URL of an HTTP endpoint before anything is sent to it.

Pure (no DNS, no socket), so config resolution can call it. The rule: an
``https`` URL with a host, no user:password part, no fragment; plain
``http`` only to a loopback host (``localhost``, ``127.0.0.0/8``, ``::1``)
unless insecure HTTP is explicitly allowed, since a bearer token or an HMAC
signature on a plain network is readable by anyone on the path.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["check_endpoint_url", "is_loopback_host", "safe_url"]


def is_loopback_host(host: str) -> bool:
    """Whether `host` (a name or an IP literal) is this machine's loopback."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint_url(url: str, *, allow_insecure_http: bool = False) -> str:
    """`url` without a trailing slash if it is acceptable; else `ValueError` saying why.

    The message names what is wrong without repeating the URL's query, which
    may hold a credential.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError("must be a URL such as 'https://hyp.example.com'")
    if url != url.strip() or any(c.isspace() or ord(c) < 32 for c in url):
        raise ValueError("must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        shown = parts.scheme or "none"
        raise ValueError(f"must start with https:// (scheme {shown!r} is not supported)")
    if not parts.hostname:
        raise ValueError("has no host name")
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "must not carry a user name or password; put the token in the 'token' setting"
        )
    if parts.fragment:
        raise ValueError("must not have a #fragment")
    if port == 0:
        raise ValueError("has port 0")
    if parts.scheme == "http" and not allow_insecure_http and not is_loopback_host(parts.hostname):
        raise ValueError(
            f"uses plain http to {parts.hostname}, which would send credentials unencrypted; "
            "use https://, or set allow_insecure_http: true if this network is trusted"
        )
    return url.rstrip("/")


def safe_url(url: str) -> str:
    """`url` reduced to scheme, host, port and path, for messages and logs."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<invalid url>"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}{parts.path}"
