"""The CLI's logs never hold a configured secret, whichever library logs it."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hypaware import ExportDriver, HypawareError, build, load_config, mask_secrets, resolve
from hypaware import Secret as hypaware_secret
from hypaware.cli import main
from hypaware.cli.redact import HTTP_LOGGERS, SecretRedactor, configured_secrets, hold_http_loggers
from hypaware.core.types import ExportOptions
from hypaware.request.sink import RequestSink
from tests.query.helpers import cache_for, config, fill, make_rows, parquet_sink
from tests.request.helpers import make_export, make_partition

TOKEN = "tok-echoed-7f3a9c2b1d"
SIGNING = "sign-key-5e6d7c8b9a"


class EchoServer:
    """Answers every POST, echoing the request's credentials back in response headers.

    The first answer is a 503 whose body also echoes them; later ones are 200.
    """

    def __init__(self) -> None:
        self.count = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                server.count += 1
                auth = self.headers.get("X-Api-Key", "")
                body = f"denied for {auth}".encode() if server.count == 1 else b""
                self.send_response(503 if server.count == 1 else 200)
                self.send_header("X-Echo-Key", auth)
                self.send_header("X-Echo-Signature", self.headers.get("webhook-signature", ""))
                self.send_header("Retry-After", "0.01")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/in"


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    thread = threading.Thread(target=server.http.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.http.shutdown()
        server.http.server_close()
        thread.join(2)


def hook_config(url: str) -> dict[str, Any]:
    return {
        "url": url,
        "signing_secret": "${HOOK_SIGNING}",
        "headers": {"X-Api-Key": "${HOOK_TOKEN}"},
        "backoff_ladder": [0.01],
        "backoff_budget": 5,
    }


def test_export_verbose_never_prints_the_echoed_token(tmp_path: Path, echo: EchoServer) -> None:
    root = tmp_path / "demo"
    assert main(["demo", "--dir", str(root)]) == 0
    config = json.loads((root / "hypaware.json").read_text())
    config["sinks"] = {"hook": {"plugin": "@hypaware/webhook", "config": hook_config(echo.url)}}
    (root / "hypaware.json").write_text(json.dumps(config))
    env = {**os.environ, "HOOK_TOKEN": TOKEN, "HOOK_SIGNING": SIGNING}
    argv = ["export", "--config", str(root / "hypaware.json"), "--once", "--backfill", "-v"]
    done = subprocess.run(
        [sys.executable, "-m", "hypaware", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert echo.count >= 2  # the 503 echoing the token, then the deliveries
    assert "retrying" in done.stderr  # -v really logged the backpressure
    for text in (done.stdout, done.stderr):
        assert TOKEN not in text and SIGNING not in text


async def test_httpcore_debug_headers_are_redacted(echo: EchoServer) -> None:
    """With httpcore at DEBUG (asked for by name), the echoed headers are logged, masked."""
    (plan,) = resolve({"sinks": {"hook": {"plugin": "@hypaware/webhook", "config": hook_config(echo.url)}}})  # fmt: skip
    secrets = configured_secrets(
        {"sinks": {"hook": {"plugin": "@hypaware/webhook", "config": hook_config(echo.url)}}},
        env={"HOOK_TOKEN": TOKEN, "HOOK_SIGNING": SIGNING},
    )
    assert sorted(secrets) == sorted([TOKEN, SIGNING])
    logger = logging.getLogger("httpcore")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    saved = {name: logging.getLogger(name).level for name in HTTP_LOGGERS}
    logger.addHandler(handler)
    try:
        mask_secrets(secrets=secrets, handlers=[handler], quiet_http=False)
        logger.setLevel(logging.DEBUG)
        sink = build(plan, env={"HOOK_TOKEN": TOKEN, "HOOK_SIGNING": SIGNING})
        assert isinstance(sink, RequestSink)
        try:
            result = await sink.export_batch(
                make_export([make_partition("p1", 0, 3)], sink="hook"), ExportOptions()
            )
        finally:
            await sink.close()
        assert result.exported == ("p1",)
    finally:
        logger.removeHandler(handler)
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
    text = stream.getvalue()
    assert "X-Echo-Key" in text and "***" in text  # the header was logged, its value masked
    assert TOKEN not in text and SIGNING not in text


def test_http_loggers_are_held_at_warning_unless_named() -> None:
    saved = {name: logging.getLogger(name).level for name in HTTP_LOGGERS}
    try:
        hold_http_loggers()
        assert all(logging.getLogger(n).level == logging.WARNING for n in HTTP_LOGGERS)
        logging.getLogger("httpx").setLevel(logging.DEBUG)
        hold_http_loggers(["httpx"])
        assert logging.getLogger("httpx").level == logging.DEBUG
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


def test_the_filter_masks_message_args_exceptions_and_extras() -> None:
    redactor = SecretRedactor(["s3cr3t-value", "ab"])
    try:
        raise ValueError("bad s3cr3t-value")
    except ValueError:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "got %s and %r", ("s3cr3t-value", b"s3cr3t-value"),
            sys.exc_info(),
        )  # fmt: skip
    record.url = "https://h/?k=s3cr3t-value"
    assert redactor.filter(record)
    text = logging.Formatter("%(message)s %(url)s").format(record)
    assert "s3cr3t-value" not in text and text.count("***") >= 3
    # "ab" is too short to mask (it would mangle every log line): only one secret counts.
    assert repr(redactor) == "SecretRedactor(1 secrets)"


LEAKY_LOGGER = "urllib3.connectionpool"


def leak(original: Any, seen: list[int], resolved: list[object]) -> Any:
    """`original`, logging the token first at DEBUG, as a chatty library under a command might.

    `seen` gets the number of resolutions of the config made by then.
    """

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen.append(len(resolved))
        logging.getLogger(LEAKY_LOGGER).debug(
            "GET https://h/in?key=%s", os.environ["HOOK_TOKEN"], extra={"auth": TOKEN}
        )
        return original(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize(
    ("argv", "module", "name"),
    [
        (["status"], "hypaware.cli.status", "collect_status"),
        (["query", "events"], "hypaware.querying.api", "plan_query"),
        (["check-config"], "hypaware.cli.check_config", "next_fire"),
        (["retry", "--dataset", "events"], "hypaware.cli.retry", "LocalCache.from_config"),
        (
            ["reset-progress", "--sink", "arch", "--from", "now", "--yes"],
            "hypaware.cli.reset_progress",
            "_high_waters",
        ),
    ],
    ids=["status", "query", "check-config", "retry", "reset-progress"],
)
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_every_command_that_reads_a_config_masks_its_secrets(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    module: str,
    name: str,
    log_format: str,
) -> None:
    import importlib

    import hypaware.core.checks
    import hypaware.core.resolver

    sinks = {
        "arch": parquet_sink(tmp_path / "out"),
        "hook": {"plugin": "@hypaware/webhook", "config": hook_config("http://127.0.0.1:9/in")},
    }
    fill(cache_for(config(tmp_path, sinks)), make_rows(0, 5))
    doc = {"state_dir": str(tmp_path / "state"), "cache": {"path": str(tmp_path / "cache")}}
    (tmp_path / "hypaware.json").write_text(json.dumps({**doc, "sinks": sinks}))
    monkeypatch.setenv("HOOK_TOKEN", TOKEN)
    monkeypatch.setenv("HOOK_SIGNING", SIGNING)
    # The leak happens in a call the command makes once its config is loaded.
    resolved: list[object] = []
    seen: list[int] = []
    target: Any = importlib.import_module(module)
    *owner, attr = name.split(".")
    for part in owner:
        target = getattr(target, part)
    monkeypatch.setattr(target, attr, leak(getattr(target, attr), seen, resolved))
    for where in (hypaware.core.checks, hypaware.core.resolver):
        original = where.resolve_partial

        def counted(*a: Any, _original: Any = original, **kw: Any) -> Any:
            resolved.append(a)
            return _original(*a, **kw)

        monkeypatch.setattr(where, "resolve_partial", counted)
    levels = {n: logging.getLogger(n).level for n in HTTP_LOGGERS}
    command, *rest = argv
    logging_args = ["--log-level", "DEBUG", "--log-format", log_format]
    code = main([command, "--config", str(tmp_path / "hypaware.json"), *rest, *logging_args])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert LEAKY_LOGGER in err and "***" in err  # the record was written, masked
    assert TOKEN not in out + err and SIGNING not in out + err
    # Resolved once before the command's own work, and masked from there on.
    assert seen and set(seen) == {1}, seen
    # The levels the command set are put back.
    assert {n: logging.getLogger(n).level for n in HTTP_LOGGERS} == levels


async def _export_with_root_at_debug(tmp_path: Path, url: str, *, masked: bool) -> str:
    """An embedding app's export with its root logger at DEBUG; what its own handler wrote."""
    sinks = {"hook": {"plugin": "@hypaware/webhook", "config": hook_config(url)}}
    cfg = config(tmp_path, sinks)
    cache = cache_for(cfg)
    fill(cache, make_rows(0, 5))
    env = {"HOOK_TOKEN": TOKEN, "HOOK_SIGNING": SIGNING}
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    root = logging.getLogger()
    saved = (root.level, {n: logging.getLogger(n).level for n in HTTP_LOGGERS})
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    for name in HTTP_LOGGERS:  # as an app leaves them: whatever held them before, not here
        logging.getLogger(name).setLevel(logging.NOTSET)
    try:
        if masked:
            # quiet_http=False keeps httpcore's DEBUG headers: the filter alone must mask them.
            redactor = mask_secrets(cfg, env=env, handlers=[handler], quiet_http=False)
            assert repr(redactor) == "SecretRedactor(2 secrets)"
        async with ExportDriver.from_config(cfg, cache=cache, env=env) as driver:
            report = await driver.run_once(backfill=True)
        assert report.ok, report.errors
    finally:
        root.removeHandler(handler)
        root.setLevel(saved[0])
        for name, level in saved[1].items():
            logging.getLogger(name).setLevel(level)
    return stream.getvalue()


async def test_an_embedding_apps_own_root_handler_is_masked(
    tmp_path: Path, echo: EchoServer
) -> None:
    plain = await _export_with_root_at_debug(tmp_path / "plain", echo.url, masked=False)
    # Without the filter the echoed token reaches the app's log: the leak is real here.
    assert "httpcore" in plain and TOKEN in plain
    masked = await _export_with_root_at_debug(tmp_path / "masked", echo.url, masked=True)
    assert "httpcore" in masked and "X-Echo-Key" in masked and "***" in masked
    assert TOKEN not in masked and SIGNING not in masked


def test_mask_secrets_adds_to_one_filter_and_refuses_to_mask_nothing(tmp_path: Path) -> None:
    first, later = logging.StreamHandler(io.StringIO()), logging.StreamHandler(io.StringIO())
    sinks = {"hook": {"plugin": "@hypaware/webhook", "config": hook_config("http://127.0.0.1:9")}}
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"sinks": sinks}))
    env = {"HOOK_TOKEN": TOKEN, "HOOK_SIGNING": SIGNING}
    redactor = mask_secrets(path, env=env, handlers=[first], quiet_http=False)
    # A second call (an app-held value, a Secret) adds to the same filter on the same handler.
    again = mask_secrets(
        secrets=["app-own-token-1234", hypaware_secret("${APP_KEY}")],
        env={"APP_KEY": "app-key-from-env"},
        handlers=[first],
        quiet_http=False,
    )
    assert again is redactor and first.filters == [redactor]
    assert repr(redactor) == "SecretRedactor(4 secrets)"
    later.addFilter(redactor)  # a handler made after the call takes the returned filter
    logging.getLogger("app").addHandler(later)
    try:
        logging.getLogger("app").error("%s %s app-key-from-env", TOKEN, "app-own-token-1234")
    finally:
        logging.getLogger("app").removeHandler(later)
    assert isinstance(later.stream, io.StringIO)
    assert later.stream.getvalue() == "*** *** ***\n"
    with pytest.raises(HypawareError, match="no handlers"):
        mask_secrets(secrets=[TOKEN], handlers=[])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"sinks": {"x": {"plugin": "@nobody/nothing"}}}))
    with pytest.raises(HypawareError, match="nothing"):
        mask_secrets(load_config(bad), handlers=[first])
