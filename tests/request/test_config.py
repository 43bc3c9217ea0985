"""Request sinks from config: resolve checks every key, build reads secrets, nothing leaks."""

from __future__ import annotations

from typing import Any

import pytest

from hypaware import ConfigError, Registry, RequestPlan, build, resolve
from hypaware.core.secrets import Secret
from hypaware.plugins import central, webhook
from hypaware.request.central import CentralConfig
from hypaware.request.sink import RequestSink

REGISTRY = Registry([central.MANIFEST, webhook.MANIFEST])


def central_sink(**config: Any) -> dict[str, Any]:
    config.setdefault("token", "${HYP_TOKEN}")
    return {"sinks": {"fwd": {"plugin": "@hypaware/central", "config": config}}}


def problems(config: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        resolve(config, REGISTRY)
    return str(info.value)


async def test_resolve_and_build_central() -> None:
    cfg = central_sink(
        endpoint="https://hyp.example.com/",
        gateway_id="gw-7",
        compression="zstd",
        backoff_ladder=[1, 2],
        backoff_budget=5,
        max_chunk_rows=10,
        headers={"X-Tenant": "acme"},
        schedule="*/5 * * * *",
    )
    (plan,) = resolve(cfg, REGISTRY)
    assert isinstance(plan, RequestPlan) and plan.shape == "request" and not plan.queryable
    conf = plan.plugin.config
    assert isinstance(conf, CentralConfig)
    assert conf.token == Secret("${HYP_TOKEN}") and conf.backoff_ladder == (1.0, 2.0)
    sink = build(plan, env={"HYP_TOKEN": "very-secret-token"})
    try:
        assert isinstance(sink, RequestSink)
        assert sink.gateway == "gw-7" and sink.codec == "zstd"
        assert sink.policy.ladder == (1.0, 2.0) and sink.policy.budget == 5.0
        assert sink.limits.max_rows == 10
        assert sink.wire.url("a b/c") == "https://hyp.example.com/v1/datasets/a%20b%2Fc/rows"
        assert "very-secret-token" not in repr(sink) + repr(plan) + repr(conf)
    finally:
        await sink.close()


def test_defaults_are_the_spec() -> None:
    conf = CentralConfig(endpoint="https://h.example", token=Secret("t"))
    assert conf.backoff_ladder == (30.0, 60.0, 120.0, 300.0)
    assert conf.backoff_budget == 300.0
    assert conf.compression == "gzip" and conf.allow_insecure_http is False


@pytest.mark.parametrize(
    ("endpoint", "says"),
    [
        ("ftp://hyp.example.com", "https://"),
        ("hyp.example.com", "https://"),
        ("https://", "host"),
        ("https://hyp.example.com:99999", "valid URL"),
        ("https://hyp.example.com/#frag", "fragment"),
        (" https://hyp.example.com", "spaces"),
        ("http://hyp.example.com", "allow_insecure_http"),
        ("http://10.0.0.8:8080", "allow_insecure_http"),
    ],
)
def test_bad_endpoints_are_config_errors(endpoint: str, says: str) -> None:
    text = problems(central_sink(endpoint=endpoint))
    assert "sinks.fwd.config" in text and says in text


def test_credentials_in_the_url_are_refused_without_repeating_them() -> None:
    text = problems(central_sink(endpoint="https://user:hunter2@hyp.example.com"))
    assert "token" in text and "hunter2" not in text


@pytest.mark.parametrize(
    "endpoint", ["http://127.0.0.1:8080", "http://localhost:9000", "http://[::1]:80"]
)
def test_plain_http_to_loopback_is_fine(endpoint: str) -> None:
    resolve(central_sink(endpoint=endpoint), REGISTRY)


def test_allow_insecure_http_opts_in() -> None:
    resolve(central_sink(endpoint="http://hyp.lan", allow_insecure_http=True), REGISTRY)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"endpoint": "https://h.example", "token": 5}, "string"),
        ({"endpoint": "https://h.example", "compression": "lz4"}, "compression"),
        ({"endpoint": "https://h.example", "backoff_ladder": []}, "backoff_ladder"),
        ({"endpoint": "https://h.example", "backoff_ladder": [30, -1]}, "backoff_ladder"),
        ({"endpoint": "https://h.example", "max_chunk_rows": 0}, "max_chunk_rows"),
        ({"endpoint": "https://h.example", "read_timeout": 0}, "read_timeout"),
        ({"endpoint": "https://h.example", "headers": {"bad header": "x"}}, "header name"),
        ({"endpoint": "https://h.example", "gateway_id": "has space"}, "gateway_id"),
        (
            {"endpoint": "https://h.example", "max_chunk_bytes": 100, "hard_max_chunk_bytes": 10},
            "hard_max_chunk_bytes",
        ),
        ({"endpoint": "https://h.example", "endpont": "x"}, "did you mean 'endpoint'"),
    ],
)
def test_bad_settings_are_named(config: dict[str, Any], says: str) -> None:
    cfg = {"sinks": {"fwd": {"plugin": "@hypaware/central", "config": config}}}
    if "token" not in config and says != "token":
        config["token"] = "t"
    assert says in problems(cfg)


def test_a_reserved_header_cannot_be_overridden() -> None:
    (plan,) = resolve(
        central_sink(endpoint="https://h.example", headers={"Authorization": "Basic x"}),
        REGISTRY,
    )
    with pytest.raises(ConfigError, match=r"headers\.Authorization"):
        build(plan, env={"HYP_TOKEN": "t"})


def test_the_token_defaults_to_an_environment_variable() -> None:
    cfg = {
        "sinks": {
            "fwd": {"plugin": "@hypaware/central", "config": {"endpoint": "https://h.example"}}
        }
    }
    (plan,) = resolve(cfg, REGISTRY)
    assert isinstance(plan, RequestPlan)
    assert plan.plugin.config.token == Secret("${HYP_CENTRAL_TOKEN}")
    with pytest.raises(ConfigError, match=r"sinks\.fwd\.config\.token.*HYP_CENTRAL_TOKEN"):
        build(plan, env={})
    sink = build(plan, env={"HYP_CENTRAL_TOKEN": "tok-3f9a77"})
    assert "tok-3f9a77" not in repr(sink)


def test_a_missing_token_variable_names_the_field() -> None:
    (plan,) = resolve(central_sink(endpoint="https://h.example"), REGISTRY)
    with pytest.raises(ConfigError, match=r"sinks\.fwd\.config\.token.*HYP_TOKEN"):
        build(plan, env={})


def test_webhook_settings() -> None:
    cfg = {
        "sinks": {
            "hook": {
                "plugin": "@hypaware/webhook",
                "config": {
                    "url": "https://hooks.example.com/in",
                    "format": "json-array",
                    "signing_secret": "${HOOK_KEY}",
                },
            }
        }
    }
    (plan,) = resolve(cfg, REGISTRY)
    assert plan.plugin.config.format == "json-array"
    bad = dict(cfg["sinks"]["hook"]["config"], signature_header="X Sig")
    cfg2 = {"sinks": {"hook": {"plugin": "@hypaware/webhook", "config": bad}}}
    assert "header name" in problems(cfg2)
    same = dict(cfg["sinks"]["hook"]["config"], signature_header="Idempotency-Key")
    cfg3 = {"sinks": {"hook": {"plugin": "@hypaware/webhook", "config": same}}}
    assert "must differ" in problems(cfg3)
    insecure = {"url": "http://hooks.example.com/in"}
    cfg4 = {"sinks": {"hook": {"plugin": "@hypaware/webhook", "config": insecure}}}
    assert "allow_insecure_http" in problems(cfg4)
    # An option that does nothing under the chosen scheme is refused, saying so.
    idle = dict(cfg["sinks"]["hook"]["config"], signature_header="X-Signature")
    cfg5 = {"sinks": {"hook": {"plugin": "@hypaware/webhook", "config": idle}}}
    assert "does nothing under signature_scheme 'standard-webhooks'" in problems(cfg5)
    used = dict(idle, signature_scheme="body-hmac")
    (plan,) = resolve(
        {"sinks": {"hook": {"plugin": "@hypaware/webhook", "config": used}}}, REGISTRY
    )
    assert plan.plugin.config.signature_header == "X-Signature"


def test_request_sinks_are_not_blob_destinations() -> None:
    from hypaware.plugins import format_parquet

    registry = Registry([central.MANIFEST, webhook.MANIFEST, format_parquet.MANIFEST])
    cfg = {
        "sinks": {
            "bad": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/webhook",
                "config": {"url": "https://hooks.example.com"},
            }
        }
    }
    with pytest.raises(ConfigError) as info:
        resolve(cfg, registry)
    assert "hypaware.blob-store" in str(info.value) and "hypaware.http-endpoint" in str(info.value)


def test_registered_through_entry_points() -> None:
    registry = Registry.from_entry_points()
    for name in ("@hypaware/central", "@hypaware/webhook"):
        manifest = registry[name]
        assert manifest.kind == "sink"
        assert {"hypaware.sink", "hypaware.http-endpoint"} <= manifest.provides
