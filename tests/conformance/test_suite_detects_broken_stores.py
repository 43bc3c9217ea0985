"""The blob store checks pass a correct store and name the promise a broken one breaks."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

from hypaware.core.errors import AlreadyExistsError, NotFoundError
from hypaware.core.paths import check_list_prefix, check_path
from hypaware.core.types import ObjectMeta
from hypaware.testing.conformance import Promise, StoreHarness, run_store_checks


class DictStore:
    """A small, correct in-memory BlobStore."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def _check(self, path: str) -> str:
        return check_path(path)

    async def put(
        self,
        path: str,
        data: bytes | Iterable[bytes] | AsyncIterable[bytes],
        *,
        if_absent: bool = False,
    ) -> ObjectMeta:
        self._check(path)
        if if_absent and path in self.objects:
            raise AlreadyExistsError(f"{path!r} exists", path=path)
        if isinstance(data, bytes):
            body = data
        elif isinstance(data, AsyncIterable):
            body = b"".join([chunk async for chunk in data])
        else:
            body = b"".join(data)
        self.objects[path] = body
        return ObjectMeta(path, len(body))

    async def get(self, path: str) -> bytes:
        self._check(path)
        try:
            return self.objects[path]
        except KeyError:
            raise NotFoundError(f"{path!r} not found", path=path) from None

    async def get_range(self, path: str, start: int, end: int) -> bytes:
        return (await self.get(path))[start:end]

    def list(self, prefix: str = "") -> AsyncIterator[ObjectMeta]:
        check_list_prefix(prefix)
        return self._list(prefix.rstrip("/"))

    async def _list(self, prefix: str) -> AsyncIterator[ObjectMeta]:
        for path, body in sorted(self.objects.items()):
            if not prefix or path.startswith(prefix + "/"):
                yield ObjectMeta(path, len(body))

    async def head(self, path: str) -> ObjectMeta:
        return ObjectMeta(path, len(await self.get(path)))

    async def delete(self, path: str) -> None:
        self._check(path)
        self.objects.pop(path, None)

    async def close(self) -> None:
        pass


class TrustingStore(DictStore):
    """Takes every path as given, '..' and all."""

    def _check(self, path: str) -> str:
        return path

    def list(self, prefix: str = "") -> AsyncIterator[ObjectMeta]:
        return self._list(prefix.rstrip("/"))


class OverwritingStore(DictStore):
    """Ignores if_absent."""

    async def put(self, path: str, data: Any, *, if_absent: bool = False) -> ObjectMeta:
        return await super().put(path, data)


class StrictDeleteStore(DictStore):
    """Raises when deleting a missing object, as a raw local filesystem does."""

    async def delete(self, path: str) -> None:
        self._check(path)
        if path not in self.objects:
            raise NotFoundError(f"{path!r} not found", path=path)
        del self.objects[path]


def harness(cls: type[DictStore]) -> StoreHarness:
    objects: dict[str, bytes] = {}
    return StoreHarness(make_store=lambda: cls(objects))


async def test_a_correct_store_passes() -> None:
    outcomes = await run_store_checks(harness(DictStore))
    assert {o.name: o.status for o in outcomes if o.status == "failed"} == {}
    assert [o.name for o in outcomes if o.status == "skipped"] == ["no_secrets_in_reprs"]


async def test_unsafe_paths_are_caught() -> None:
    (outcome,) = await run_store_checks(harness(TrustingStore), only=["paths_stay_under_root"])
    assert outcome.promise is Promise.PATHS
    assert outcome.message.startswith(
        "put('') was accepted: paths must stay under the store's root"
    )


async def test_ignored_if_absent_is_caught() -> None:
    (outcome,) = await run_store_checks(harness(OverwritingStore), only=["if_absent"])
    assert outcome.promise is Promise.IF_ABSENT
    assert "the second put('conformance-if-absent/once', if_absent=True) succeeded" in (
        outcome.message
    )


async def test_delete_of_a_missing_object_must_be_quiet() -> None:
    (outcome,) = await run_store_checks(harness(StrictDeleteStore), only=["missing_objects"])
    assert outcome.promise is Promise.DELETE
    assert "delete() of a missing object raised NotFoundError" in outcome.message


async def test_an_unexpected_error_is_a_failure_not_a_crash() -> None:
    outcomes = await run_store_checks(harness(StrictDeleteStore), only=["if_absent"])
    assert [(o.status, o.promise) for o in outcomes] == [("failed", None)]
    assert outcomes[0].message.startswith("raised NotFoundError:")
