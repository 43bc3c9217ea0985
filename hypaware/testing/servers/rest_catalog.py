"""A loopback Iceberg REST catalog for tests: the endpoints pyiceberg's `RestCatalog` calls.

No Iceberg REST catalog server installs from the package registries this
project uses (Polaris, Nessie, Lakekeeper and the Java fixture are JVM or
container images), so this one speaks the REST protocol over
`http.server`, backed by pyiceberg's `SqlCatalog` on a sqlite file:

- ``GET /v1/config``; namespaces: list, create, load, exists;
  tables: list, create, load, exists, commit (``POST .../tables/{t}``), drop;
- a commit whose requirements no longer hold answers **409**
  (``CommitFailedException``), as real catalogs do on a lost race; tests
  can also script the next n commits to answer 409 (`fail_next_commits`);
- **vended credentials**: `vended` is returned as each table's ``config``
  (``s3.access-key-id``, ``s3.secret-access-key``, ...), which clients
  merge into the table's FileIO properties;
- an optional bearer `token` every request must carry.

The server's own `SqlCatalog` writes the table metadata files, so it needs
FileIO properties that reach the warehouse (`catalog_properties`, e.g.
``s3.endpoint`` for moto). Start it with `start()` (or as a context
manager); `stop()` shuts it down and joins its thread.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["RestCatalogServer"]


class _Reply(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class RestCatalogServer:
    """An Iceberg REST catalog on ``http://127.0.0.1:<port>`` over a sqlite `SqlCatalog`."""

    def __init__(
        self,
        directory: Path,
        *,
        warehouse: str | None = None,
        catalog_properties: dict[str, str] | None = None,
        vended: dict[str, str] | None = None,
        token: str | None = None,
    ) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        directory.mkdir(parents=True, exist_ok=True)
        props = {
            "uri": f"sqlite:///{directory / 'rest-catalog.db'}",
            "warehouse": warehouse or directory.as_uri(),
            **(catalog_properties or {}),
        }
        self.catalog = SqlCatalog("rest-backend", **props)
        self.vended = dict(vended or {})
        self.token = token
        self.commits = 0
        self.conflicts = 0
        self.requests: list[tuple[str, str]] = []
        self._fail_commits = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- lifecycle

    @property
    def uri(self) -> str:
        assert self._server is not None, "start() the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> RestCatalogServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="rest-catalog")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the catalog. A second call is a no-op."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        engine = getattr(self.catalog, "engine", None)
        if engine is not None:
            engine.dispose()

    def __enter__(self) -> RestCatalogServer:
        return self.start()

    def __exit__(
        self,
        exctype: type[BaseException] | None,
        excinst: BaseException | None,
        exctb: TracebackType | None,
    ) -> None:
        self.stop()

    def fail_next_commits(self, n: int) -> None:
        """Answer the next `n` table commits with 409, as if another writer won each race."""
        with self._lock:
            self._fail_commits = n

    # ---------------------------------------------------------------- handling

    def handle(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, Any]:
        """The status and JSON body (or None) for one request."""
        self.requests.append((method, path))
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            raise _Reply(401, "NotAuthorizedException", "missing or wrong bearer token")
        parts = [unquote(p) for p in urlsplit(path).path.strip("/").split("/")]
        if parts[:1] != ["v1"]:
            raise _Reply(404, "NotFoundException", f"no route {path}")
        parts = parts[1:]
        if parts == ["config"] and method == "GET":
            return 200, {"defaults": {}, "overrides": {}}
        if parts[:1] != ["namespaces"]:
            raise _Reply(404, "NotFoundException", f"no route {path}")
        if len(parts) == 1:
            return self._namespaces(method, body)
        namespace = tuple(parts[1].split("\x1f"))
        if len(parts) == 2:
            return self._namespace(method, namespace)
        if parts[2] == "tables" and len(parts) == 3:
            return self._tables(method, namespace, body)
        if parts[2] == "tables" and len(parts) == 4:
            return self._table(method, (*namespace, parts[3]), body)
        raise _Reply(404, "NotFoundException", f"no route {path}")

    def _namespaces(self, method: str, body: bytes) -> tuple[int, Any]:
        from pyiceberg.exceptions import NamespaceAlreadyExistsError

        if method == "GET":
            return 200, {"namespaces": [list(ns) for ns in self.catalog.list_namespaces()]}
        if method == "POST":
            doc = json.loads(body)
            namespace = tuple(doc["namespace"])
            try:
                self.catalog.create_namespace(namespace, doc.get("properties") or {})
            except NamespaceAlreadyExistsError as exc:
                raise _Reply(409, "AlreadyExistsException", str(exc)) from exc
            return 200, {"namespace": list(namespace), "properties": doc.get("properties") or {}}
        raise _Reply(405, "MethodNotAllowed", method)

    def _namespace(self, method: str, namespace: tuple[str, ...]) -> tuple[int, Any]:
        from pyiceberg.exceptions import NoSuchNamespaceError

        try:
            props = self.catalog.load_namespace_properties(namespace)
        except NoSuchNamespaceError as exc:
            raise _Reply(404, "NoSuchNamespaceException", str(exc)) from exc
        if method == "HEAD":
            return 204, None
        if method == "GET":
            return 200, {"namespace": list(namespace), "properties": props}
        raise _Reply(405, "MethodNotAllowed", method)

    def _tables(self, method: str, namespace: tuple[str, ...], body: bytes) -> tuple[int, Any]:
        from pyiceberg.catalog.rest import CreateTableRequest
        from pyiceberg.exceptions import NoSuchNamespaceError, TableAlreadyExistsError
        from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
        from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

        if method == "GET":
            try:
                names = self.catalog.list_tables(namespace)
            except NoSuchNamespaceError as exc:
                raise _Reply(404, "NoSuchNamespaceException", str(exc)) from exc
            return 200, {"identifiers": [{"namespace": list(n[:-1]), "name": n[-1]} for n in names]}
        if method != "POST":
            raise _Reply(405, "MethodNotAllowed", method)
        request = CreateTableRequest.model_validate_json(body)
        try:
            table = self.catalog.create_table(
                (*namespace, request.name),
                schema=request.table_schema,
                location=request.location,
                partition_spec=request.partition_spec or UNPARTITIONED_PARTITION_SPEC,
                sort_order=request.write_order or UNSORTED_SORT_ORDER,
                properties=request.properties,
            )
        except TableAlreadyExistsError as exc:
            raise _Reply(409, "AlreadyExistsException", str(exc)) from exc
        except NoSuchNamespaceError as exc:
            raise _Reply(404, "NoSuchNamespaceException", str(exc)) from exc
        return 200, self._table_response(table.metadata_location, table.metadata)

    def _table(self, method: str, ident: tuple[str, ...], body: bytes) -> tuple[int, Any]:
        from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
        from pyiceberg.table import CommitTableRequest

        try:
            table = self.catalog.load_table(ident)
        except NoSuchTableError as exc:
            raise _Reply(404, "NoSuchTableException", str(exc)) from exc
        if method == "HEAD":
            return 204, None
        if method == "GET":
            return 200, self._table_response(table.metadata_location, table.metadata)
        if method == "DELETE":
            self.catalog.drop_table(ident)
            return 204, None
        if method != "POST":
            raise _Reply(405, "MethodNotAllowed", method)
        request = CommitTableRequest.model_validate_json(body)
        with self._lock:
            scripted = self._fail_commits > 0
            if scripted:
                self._fail_commits -= 1
                self.conflicts += 1
        if scripted:
            raise _Reply(409, "CommitFailedException", "scripted conflict: another writer won")
        try:
            response = self.catalog.commit_table(table, request.requirements, request.updates)
        except CommitFailedException as exc:
            with self._lock:
                self.conflicts += 1
            raise _Reply(409, "CommitFailedException", str(exc)) from exc
        with self._lock:
            self.commits += 1
        return 200, json.loads(response.model_dump_json())

    def _table_response(self, location: str, metadata: Any) -> dict[str, Any]:
        return {
            "metadata-location": location,
            "metadata": json.loads(metadata.model_dump_json()),
            "config": dict(self.vended),
        }


def _handler(server: RestCatalogServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                status, doc = server.handle(self.command, self.path, body, headers)
            except _Reply as reply:
                status = reply.status
                doc = {"error": {"message": str(reply), "type": reply.kind, "code": status}}
            except Exception as exc:  # a bug here must reach the client, not kill the thread
                status = 500
                doc = {"error": {"message": repr(exc), "type": "ServerError", "code": 500}}
            data = b"" if doc is None else json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if data and self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_HEAD = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler
