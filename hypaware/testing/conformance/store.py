"""Conformance checks for `hypaware.core.contracts.BlobStore`.

Each check is a coroutine taking a `StoreHarness` and raising
`ContractViolation` (naming the broken promise) or `CheckSkipped`. Checks
write under their own top-level directory, so they can share one store.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from pathlib import Path

import attrs

from hypaware.core.contracts import BlobStore
from hypaware.core.errors import AlreadyExistsError, NotFoundError, PathError
from hypaware.testing.conformance.promises import CheckSkipped, ContractViolation, Promise

__all__ = ["BAD_PATHS", "STORE_CHECKS", "StoreCheck", "StoreHarness"]

# Paths every store must refuse: each names why in the contract's words.
BAD_PATHS: tuple[str, ...] = (
    "",
    "/etc/passwd",
    "../outside",
    "a/../../outside",
    "a/..",
    "./a",
    "a//b",
    "a/",
    "a\\..\\b",
    "a\x00b",
)


def _strs(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@attrs.frozen
class StoreHarness:
    """How the checks reach one blob store under test.

    - `make_store`: builds the store (sync or async); every store it returns
      shares one root.
    - `local_root`: the local directory the store's root maps to, if it is
      on local disk; lets the path check see files written outside it.
    - `secrets`: secret values (keys, tokens) the store was configured with.
    - `close_timeout`: how long `close()` may take.
    """

    make_store: Callable[[], BlobStore | Awaitable[BlobStore]]
    local_root: Path | None = None
    secrets: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    close_timeout: float = 5.0


StoreCheck = Callable[[StoreHarness], Awaitable[None]]


async def _build(h: StoreHarness) -> BlobStore:
    made = h.make_store()
    store = await made if inspect.isawaitable(made) else made
    if not isinstance(store, BlobStore):
        raise ContractViolation(
            Promise.SHAPE,
            f"make_store() returned a {type(store).__name__}, which lacks put/get/get_range/"
            "list/head/delete/close",
        )
    return store


@contextlib.asynccontextmanager
async def _open(h: StoreHarness) -> AsyncIterator[BlobStore]:
    store = await _build(h)
    try:
        yield store
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(store.close(), h.close_timeout)


async def _paths(store: BlobStore, prefix: str) -> list[str]:
    return sorted([meta.path async for meta in store.list(prefix)])


async def _expect_missing(store: BlobStore, path: str, doing: str) -> None:
    for op, call in (
        ("get", lambda: store.get(path)),
        ("head", lambda: store.head(path)),
        ("get_range", lambda: store.get_range(path, 0, 1)),
    ):
        try:
            await call()
        except NotFoundError:
            continue
        except Exception as exc:
            raise ContractViolation(
                Promise.NOT_FOUND,
                f"{op}({path!r}) {doing} raised {type(exc).__name__}: {exc}",
            ) from exc
        raise ContractViolation(Promise.NOT_FOUND, f"{op}({path!r}) {doing} returned a value")


async def check_roundtrip(h: StoreHarness) -> None:
    """put / get / get_range / head / overwrite read back exactly."""
    data = bytes(range(256)) * 40
    path = "conformance-roundtrip/dir/object.bin"
    async with _open(h) as store:
        meta = await store.put(path, data)
        if meta.path != path or meta.size != len(data):
            raise ContractViolation(
                Promise.ROUNDTRIP,
                f"put({path!r}) of {len(data)} bytes returned ObjectMeta(path={meta.path!r}, "
                f"size={meta.size})",
            )
        got = await store.get(path)
        if got != data:
            raise ContractViolation(
                Promise.ROUNDTRIP,
                f"get({path!r}) returned {len(got)} bytes that differ from the {len(data)} put",
            )
        part = await store.get_range(path, 100, 356)
        if part != data[100:356]:
            raise ContractViolation(
                Promise.ROUNDTRIP, f"get_range({path!r}, 100, 356) did not return bytes [100, 356)"
            )
        head = await store.head(path)
        if head.size != len(data) or head.path != path:
            raise ContractViolation(
                Promise.ROUNDTRIP,
                f"head({path!r}) reported path={head.path!r} size={head.size}, "
                f"expected {path!r} and {len(data)}",
            )
        await store.put(path, b"replaced")
        if await store.get(path) != b"replaced":
            raise ContractViolation(
                Promise.ROUNDTRIP, f"a second put({path!r}) did not replace the object"
            )


async def check_streamed_put(h: StoreHarness) -> None:
    """put accepts an iterable and an async iterable of chunks, in order."""
    chunks = [b"alpha-", b"beta-", b"", b"gamma"]

    async def agen() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async with _open(h) as store:
        for label, data in (("an iterable", iter(chunks)), ("an async iterable", agen())):
            path = f"conformance-stream/{label.replace(' ', '-')}.bin"
            await store.put(path, data)
            got = await store.get(path)
            if got != b"".join(chunks):
                raise ContractViolation(
                    Promise.ROUNDTRIP,
                    f"put({path!r}) from {label} of chunks read back as {got!r}",
                )


async def check_missing_objects(h: StoreHarness) -> None:
    """Reading a missing object raises NotFoundError; deleting one is not an error."""
    async with _open(h) as store:
        await _expect_missing(store, "conformance-missing/nothing-here", "of a missing object")
        try:
            await store.delete("conformance-missing/nothing-here")
        except Exception as exc:
            raise ContractViolation(
                Promise.DELETE, f"delete() of a missing object raised {type(exc).__name__}: {exc}"
            ) from exc
        path = "conformance-missing/doomed"
        await store.put(path, b"x")
        await store.delete(path)
        await _expect_missing(store, path, "after delete()")
        if path in await _paths(store, "conformance-missing"):
            raise ContractViolation(Promise.DELETE, f"list() still shows {path!r} after delete()")


async def check_if_absent(h: StoreHarness) -> None:
    """put(if_absent=True) creates once and then refuses, leaving the object as it was."""
    path = "conformance-if-absent/once"
    async with _open(h) as store:
        await store.delete(path)
        await store.put(path, b"first", if_absent=True)
        try:
            await store.put(path, b"second", if_absent=True)
        except AlreadyExistsError:
            pass
        except Exception as exc:
            raise ContractViolation(
                Promise.IF_ABSENT,
                f"the second put({path!r}, if_absent=True) raised {type(exc).__name__}: {exc}",
            ) from exc
        else:
            raise ContractViolation(
                Promise.IF_ABSENT, f"the second put({path!r}, if_absent=True) succeeded"
            )
        if await store.get(path) != b"first":
            raise ContractViolation(
                Promise.IF_ABSENT, f"a refused put({path!r}, if_absent=True) changed the object"
            )


async def check_list_prefix(h: StoreHarness) -> None:
    """list(prefix) yields exactly the objects under the directory-like prefix."""
    base = "conformance-list"
    inside = [f"{base}/p/x", f"{base}/p/y/z"]
    outside = [f"{base}/px", f"{base}/q/p"]
    async with _open(h) as store:
        for path in inside + outside:
            await store.put(path, path.encode())
        for prefix in (f"{base}/p", f"{base}/p/"):
            got = await _paths(store, prefix)
            if got != sorted(inside):
                raise ContractViolation(
                    Promise.LIST, f"list({prefix!r}) yielded {got}, expected {sorted(inside)}"
                )
        every = await _paths(store, base)
        if every != sorted(inside + outside):
            raise ContractViolation(
                Promise.LIST, f"list({base!r}) yielded {every}, expected {sorted(inside + outside)}"
            )
        whole = await _paths(store, "")
        if not set(inside + outside) <= set(whole):
            raise ContractViolation(
                Promise.LIST, "list('') did not yield every object, as paths relative to the root"
            )


def _files(root: Path) -> set[Path]:
    return set(root.rglob("*")) if root.exists() else set()


_PATH_OPS = ("put", "put bytes", "get", "get_range", "head", "delete")


async def _path_op(
    store: BlobStore, op: str, path: str, produce: Callable[[], Iterator[bytes]]
) -> object:
    if op == "put":
        return await store.put(path, produce())
    if op == "put bytes":
        return await store.put(path, b"escaped")
    if op == "get":
        return await store.get(path)
    if op == "get_range":
        return await store.get_range(path, 0, 1)
    if op == "head":
        return await store.head(path)
    await store.delete(path)
    return None


async def check_paths_stay_under_root(h: StoreHarness) -> None:
    """Every unsafe path is refused with PathError, and nothing is read or written for it."""
    async with _open(h) as store:
        await store.put("conformance-paths/keep", b"keep")
        watch = h.local_root.resolve().parent if h.local_root is not None else None
        files_before = _files(watch) if watch is not None else set()
        listed_before = await _paths(store, "")
        for bad in BAD_PATHS:
            consumed: list[bytes] = []

            def produce(consumed: list[bytes] = consumed) -> Iterator[bytes]:
                consumed.append(b"x")
                yield b"escaped"

            for op in _PATH_OPS:
                try:
                    await _path_op(store, op, bad, produce)
                except PathError:
                    continue
                except Exception as exc:
                    raise ContractViolation(
                        Promise.PATHS,
                        f"{op}({bad!r}) raised {type(exc).__name__}: {exc} instead of PathError",
                    ) from exc
                raise ContractViolation(Promise.PATHS, f"{op}({bad!r}) was accepted")
            if consumed:
                raise ContractViolation(
                    Promise.PATHS, f"put({bad!r}) read its data before refusing the path"
                )
        for bad in ("../outside", "/abs", "a//b"):
            try:
                await _paths(store, bad)
            except PathError:
                continue
            except Exception as exc:
                raise ContractViolation(
                    Promise.PATHS,
                    f"list({bad!r}) raised {type(exc).__name__}: {exc} instead of PathError",
                ) from exc
            raise ContractViolation(Promise.PATHS, f"list({bad!r}) was accepted")
        if await _paths(store, "") != listed_before:
            raise ContractViolation(Promise.PATHS, "refused paths changed what list('') yields")
        if watch is not None:
            new = sorted(str(p) for p in _files(watch) - files_before)
            if new:
                raise ContractViolation(Promise.PATHS, f"refused paths created files: {new[:3]}")


async def check_close_is_idempotent(h: StoreHarness) -> None:
    """close() twice returns promptly and raises nothing."""
    store = await _build(h)
    await store.put("conformance-close/x", b"x")
    for label in ("close()", "a second close()"):
        started = time.monotonic()
        try:
            await asyncio.wait_for(store.close(), h.close_timeout)
        except TimeoutError:
            raise ContractViolation(
                Promise.CLOSE_PROMPT, f"{label} did not return within {h.close_timeout:g} s"
            ) from None
        except Exception as exc:
            raise ContractViolation(
                Promise.CLOSE_IDEMPOTENT, f"{label} raised {type(exc).__name__}: {exc}"
            ) from exc
        if time.monotonic() - started > h.close_timeout:
            raise ContractViolation(
                Promise.CLOSE_PROMPT, f"{label} blocked for more than {h.close_timeout:g} s"
            )


async def check_no_secrets_in_reprs(h: StoreHarness) -> None:
    """The configured secrets appear in no repr, str or error message."""
    secrets = [s for s in h.secrets if s]
    if not secrets:
        raise CheckSkipped("the harness declares no secrets to look for")
    texts: list[tuple[str, str]] = []
    async with _open(h) as store:
        texts += [("repr of the store", repr(store)), ("str of the store", str(store))]
        for op, path in (
            ("get of a missing object", "conformance-secrets/missing"),
            ("a refused path", "../x"),
        ):
            try:
                await store.get(path)
            except Exception as exc:
                texts.append((f"the error of {op}", str(exc)))
    for where, text in texts:
        for secret in secrets:
            if secret in text:
                raise ContractViolation(
                    Promise.SECRETS, f"a configured secret appears in {where}: {text[:200]!r}"
                )


STORE_CHECKS: dict[str, StoreCheck] = {
    "roundtrip": check_roundtrip,
    "streamed_put": check_streamed_put,
    "missing_objects": check_missing_objects,
    "if_absent": check_if_absent,
    "list_prefix": check_list_prefix,
    "paths_stay_under_root": check_paths_stay_under_root,
    "close_is_idempotent": check_close_is_idempotent,
    "no_secrets_in_reprs": check_no_secrets_in_reprs,
}
