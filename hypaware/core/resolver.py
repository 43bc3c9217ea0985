"""From a loaded config and a registry to sink plans, and from plans to live sinks.

`resolve` is pure: it reads no file, opens no socket and constructs no
plugin, so a configuration can be checked anywhere. `build` is where plugins
are imported and constructed and secrets are read. `hypaware.core.checks`
adds what needs the import system (factories that import, extras that are
installed) for ``check-config`` and the other commands.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs

from hypaware.core.config import SINK_SETTING_KEYS, HypawareConfig, SinkSpec
from hypaware.core.config_converter import structure_config
from hypaware.core.config_loader import load_partial
from hypaware.core.errors import ConfigError, Problem
from hypaware.core.interpolation import expand_for
from hypaware.core.manifest import (
    BLOB_STORE,
    ENCODER,
    QUERYABLE,
    SINK,
    TABLE_FORMAT,
    PluginManifest,
)
from hypaware.core.registry import Registry, did_you_mean
from hypaware.core.secrets import Secret

__all__ = [
    "BlobPlan",
    "BuildContext",
    "Component",
    "RequestPlan",
    "SinkPlan",
    "needs",
    "resolve",
    "resolve_partial",
]


@attrs.frozen
class Component:
    """A resolved plugin and its structured config (None if it takes none)."""

    manifest: PluginManifest
    config: Any = None

    @property
    def name(self) -> str:
        return self.manifest.name


@attrs.frozen
class BlobPlan:
    """A blob sink's plan: a writer on a destination, checked but not yet constructed.

    `encoder` is the encoder that writes its files: the writer itself for an
    encoder such as ``@hypaware/format-parquet``, or the one resolved for a
    table format such as ``@hypaware/format-iceberg``.
    """

    spec: SinkSpec
    queryable: bool
    writer: Component
    destination: Component
    encoder: Component

    @property
    def shape(self) -> Literal["blob"]:
        return "blob"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def schedule(self) -> str:
        return self.spec.schedule

    @property
    def components(self) -> tuple[Component, ...]:
        """The writer, the destination and, for a table format, its encoder."""
        extra = () if self.encoder == self.writer else (self.encoder,)
        return (self.writer, self.destination, *extra)

    def describe(self) -> str:
        """The plugins in one phrase, e.g. ``@hypaware/format-parquet on @hypaware/local-fs``."""
        text = f"{self.writer.name} on {self.destination.name}"
        if self.encoder.manifest is not self.writer.manifest:
            text += f" (encoder {self.encoder.name})"
        return text


@attrs.frozen
class RequestPlan:
    """A request sink's plan: one sink plugin, checked but not yet constructed."""

    spec: SinkSpec
    queryable: bool
    plugin: Component

    @property
    def shape(self) -> Literal["request"]:
        return "request"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def schedule(self) -> str:
        return self.spec.schedule

    @property
    def components(self) -> tuple[Component, ...]:
        """The sink plugin alone."""
        return (self.plugin,)

    def describe(self) -> str:
        """The plugin's name, e.g. ``@hypaware/webhook``."""
        return self.plugin.name


SinkPlan: TypeAlias = BlobPlan | RequestPlan
"""Either plan `resolve` returns: tell them apart with ``isinstance`` (or ``match``).

Both have `spec`, `name`, `schedule`, `shape`, `queryable`, `components`
and `describe()`; only a `BlobPlan` has `writer`, `destination` and
`encoder`, only a `RequestPlan` has `plugin`.
"""


def resolve(
    config: HypawareConfig | Mapping[str, Any],
    registry: Registry | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> tuple[SinkPlan, ...]:
    """Check every sink against the plugins in `registry` and return their plans.

    Pure: no I/O and no plugin constructed (with ``registry=None`` the
    default registry is loaded from entry points first; pass one to stay
    pure). Raises one `ConfigError` listing every problem found in one
    pass: the document's shape and generic settings (for a mapping),
    unknown plugins (with a did-you-mean; a manifest's tags were checked
    when it was made), a writer or encoder whose requirements its
    destination does not provide (encoders and table formats always need a
    blob store), a table format with no acceptable encoder, every unknown or
    invalid plugin config key, and ``${NAME}`` references to variables that
    `env` (default ``os.environ``) does not set. Plugin config strings are
    expanded here, where their types are known; `Secret` fields keep the
    reference, read at build.
    """
    env = os.environ if env is None else env
    problems: list[Problem] = []
    if not isinstance(config, HypawareConfig):
        config, problems = load_partial(config, env=env)
    if registry is None:
        registry = Registry.from_entry_points()
    plans = resolve_partial(config, registry, problems, env=env)
    if problems:
        raise ConfigError(problems)
    return plans


def resolve_partial(
    config: HypawareConfig,
    registry: Registry,
    problems: list[Problem],
    *,
    env: Mapping[str, str] | None = None,
) -> tuple[SinkPlan, ...]:
    """Plans for the sinks that resolve; every problem found is appended to `problems`."""
    env = os.environ if env is None else env
    plans = []
    for spec in config.sinks:
        plan = _resolve_sink(spec, registry, problems, env)
        if plan is not None:
            plans.append(plan)
    return tuple(plans)


def _lookup(
    registry: Registry, name: str, path: str, problems: list[Problem]
) -> PluginManifest | None:
    manifest = registry.get(name)
    if manifest is None:
        problems.append(Problem(path, f"unknown plugin {name!r}{did_you_mean(name, registry)}"))
    return manifest


def needs(manifest: PluginManifest) -> frozenset[str]:
    """What `manifest` requires, with a blob store for every encoder and table format.

    Encoders and table formats write files, so they are blob-store users by
    kind whether or not their manifest says so.
    """
    if manifest.provides & {ENCODER, TABLE_FORMAT}:
        return manifest.requires | {BLOB_STORE}
    return manifest.requires


def _a(kind: str) -> str:
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def _caps(manifest: PluginManifest) -> str:
    return ", ".join(sorted(manifest.provides)) or "nothing"


def _resolve_sink(
    spec: SinkSpec,
    registry: Registry,
    problems: list[Problem],
    env: Mapping[str, str],
) -> SinkPlan | None:
    if spec.shape == "request":
        return _resolve_request_sink(spec, registry, problems, env)
    return _resolve_blob_sink(spec, registry, problems, env)


def _resolve_request_sink(
    spec: SinkSpec,
    registry: Registry,
    problems: list[Problem],
    env: Mapping[str, str],
) -> RequestPlan | None:
    path = f"sinks.{spec.name}"
    label = f"sink {spec.name!r}"
    before = len(problems)
    assert spec.plugin is not None
    plugin = _lookup(registry, spec.plugin, f"{path}.plugin", problems)
    if plugin is None:
        return None
    if SINK not in plugin.provides:
        problems.append(
            Problem(
                f"{path}.plugin",
                f"{label}: plugin {plugin.name} is {_a(plugin.kind)} "
                f"(provides {_caps(plugin)}), not a request sink ({SINK}); "
                f"{_a(plugin.kind)} belongs in a blob sink's 'writer' + 'destination' pair",
            )
        )
        return None
    configs = _structure_components(spec, [plugin], path, problems, env)
    if configs is None or len(problems) > before:
        return None
    return RequestPlan(spec=spec, queryable=plugin.queryable, plugin=Component(plugin, configs[0]))


def _resolve_blob_sink(
    spec: SinkSpec,
    registry: Registry,
    problems: list[Problem],
    env: Mapping[str, str],
) -> BlobPlan | None:
    path = f"sinks.{spec.name}"
    label = f"sink {spec.name!r}"
    before = len(problems)
    assert spec.writer is not None
    assert spec.destination is not None
    writer = _lookup(registry, spec.writer, f"{path}.writer", problems)
    destination = _lookup(registry, spec.destination, f"{path}.destination", problems)
    explicit_encoder = (
        _lookup(registry, spec.encoder, f"{path}.encoder", problems) if spec.encoder else None
    )
    if writer is None or destination is None or (spec.encoder and explicit_encoder is None):
        return None
    if not _check_writer_kind(writer, path, label, problems):
        return None
    encoder = _writer_encoder(spec, writer, explicit_encoder, registry, path, problems)
    _check_destination_provides(writer, encoder, destination, path, label, problems)
    if encoder is None:
        return None
    if BLOB_STORE not in destination.provides:
        # Not a blob store at all: its own keys would only add noise to the real
        # problem (the pair), so only the writer's keys are checked.
        _structure_components(spec, [writer], path, problems, env, also=_field_names(destination))
        return None
    return _blob_plan(spec, writer, destination, encoder, path, problems, env, before)


def _check_writer_kind(
    writer: PluginManifest, path: str, label: str, problems: list[Problem]
) -> bool:
    """Whether `writer` can be a blob sink's writer; a problem appended if not."""
    if writer.provides & {ENCODER, TABLE_FORMAT}:
        return True
    problems.append(
        Problem(
            f"{path}.writer",
            f"{label}: writer {writer.name} is {_a(writer.kind)} (provides {_caps(writer)}); "
            f"a writer must provide {ENCODER} or {TABLE_FORMAT}",
        )
    )
    return False


def _writer_encoder(
    spec: SinkSpec,
    writer: PluginManifest,
    explicit: PluginManifest | None,
    registry: Registry,
    path: str,
    problems: list[Problem],
) -> PluginManifest | None:
    """The encoder that writes the files: the writer itself, or one chosen for a table format."""
    label = f"sink {spec.name!r}"
    encoder: PluginManifest | None = writer if ENCODER in writer.provides else None
    if ENCODER in writer.requires:
        encoder = _choose_encoder(spec, writer, explicit, registry, path, problems)
    elif explicit is not None:
        problems.append(
            Problem(
                f"{path}.encoder",
                f"{label}: writer {writer.name} does not take an encoder (only table formats do)",
            )
        )
    return encoder


def _check_destination_provides(
    writer: PluginManifest,
    encoder: PluginManifest | None,
    destination: PluginManifest,
    path: str,
    label: str,
    problems: list[Problem],
) -> None:
    """A problem for every capability the writer or encoder needs that nothing provides."""
    available = set(destination.provides)
    if encoder is not None and encoder is not writer:
        available |= encoder.provides
    for part, role in ((writer, "writer"), (encoder, "encoder")):
        if part is None or (role == "encoder" and part is writer):
            continue
        for cap in sorted(needs(part) - available):
            problems.append(
                Problem(
                    path,
                    f"{label}: {role} {part.name} requires {cap}; "
                    f"destination {destination.name} provides {_caps(destination)}",
                )
            )


def _blob_plan(
    spec: SinkSpec,
    writer: PluginManifest,
    destination: PluginManifest,
    encoder: PluginManifest,
    path: str,
    problems: list[Problem],
    env: Mapping[str, str],
    before: int,
) -> BlobPlan | None:
    """The blob sink's plan once its parts fit, or None if any part's config has problems.

    `before` is the count of problems when the sink's resolution began: any
    found since means no plan.
    """
    parts = [writer, destination] + ([encoder] if encoder is not writer else [])
    configs = _structure_components(spec, parts, path, problems, env)
    if configs is None or len(problems) > before:
        return None
    writer_c = Component(writer, configs[0])
    encoder_c = writer_c if encoder is writer else Component(encoder, configs[2])
    return BlobPlan(
        spec=spec,
        queryable=all(QUERYABLE in p.supports for p in parts),
        writer=writer_c,
        destination=Component(destination, configs[1]),
        encoder=encoder_c,
    )


def _choose_encoder(
    spec: SinkSpec,
    writer: PluginManifest,
    explicit: PluginManifest | None,
    registry: Registry,
    path: str,
    problems: list[Problem],
) -> PluginManifest | None:
    label = f"sink {spec.name!r}"
    accepted = writer.encoders
    if explicit is not None:
        if ENCODER not in explicit.provides:
            problems.append(
                Problem(
                    f"{path}.encoder",
                    f"{label}: {explicit.name} is not an encoder (provides {_caps(explicit)})",
                )
            )
            return None
        if accepted and explicit.name not in accepted:
            problems.append(
                Problem(
                    f"{path}.encoder",
                    f"{label}: writer {writer.name} cannot write with encoder {explicit.name}; "
                    f"it accepts {', '.join(accepted)}",
                )
            )
            return None
        return explicit
    for name in accepted:
        if name in registry:
            return registry[name]
    if accepted:
        wanted = ", ".join(accepted)
        problems.append(
            Problem(
                path,
                f"{label}: writer {writer.name} requires {ENCODER}; none of the encoders it "
                f"accepts ({wanted}) is installed",
            )
        )
        return None
    candidates = sorted(n for n, m in registry.items() if ENCODER in m.provides)
    if len(candidates) == 1:
        return registry[candidates[0]]
    problems.append(
        Problem(
            f"{path}.encoder",
            f"{label}: writer {writer.name} requires {ENCODER}; name one with 'encoder' "
            f"(installed: {', '.join(candidates) or 'none'})",
        )
    )
    return None


def _field_names(manifest: PluginManifest) -> list[str]:
    if manifest.config_class is None:
        return []
    return [a.alias for a in attrs.fields(manifest.config_class)]


def _structure_components(
    spec: SinkSpec,
    parts: Iterable[PluginManifest],
    path: str,
    problems: list[Problem],
    env: Mapping[str, str],
    also: Iterable[str] = (),
) -> list[Any] | None:
    """Route each config key to every part that declares it, then structure each part.

    Keys in `also` are known but belong to no part checked here.
    """
    parts = list(parts)
    known: set[str] = set(also)
    for part in parts:
        known.update(_field_names(part))
    before = len(problems)
    for key in spec.config:
        if key not in known:
            choices = sorted(known | set(SINK_SETTING_KEYS))
            owners = " or ".join(p.name for p in parts)
            problems.append(
                Problem(
                    f"{path}.config.{key}",
                    f"unknown key for {owners}{did_you_mean(str(key), choices)}",
                )
            )
    configs: list[Any] = []
    for part in parts:
        if part.config_class is None:
            configs.append(None)
            continue
        names = set(_field_names(part))
        subset = {k: v for k, v in spec.config.items() if k in names}
        subset = expand_for(part.config_class, subset, env, f"{path}.config", problems, keep=Secret)
        configs.append(structure_config(part.config_class, subset, f"{path}.config", problems))
    return None if len(problems) > before else configs


# -------------------------------------------------------------------- build


@attrs.frozen
class BuildContext:
    """What a plugin factory gets besides its own config.

    - `sink_name`: the sink being built (for messages and deterministic names).
    - `state_dir`: a directory the plugin may keep durable state in (e.g. an
      embedded catalog); created on first use by the plugin.
    - `base_dir`: where relative paths in config are taken from.
    - `env`: the environment `${NAME}` secrets are read from.
    """

    sink_name: str
    state_dir: Path
    base_dir: Path
    env: Mapping[str, str] = attrs.field(repr=False, factory=lambda: dict(os.environ))

    def reveal(self, secret: Secret | str | None, field: str) -> str | None:
        """The text of a secret config field; `ConfigError` naming the field if unset."""
        if secret is None or isinstance(secret, str):
            return secret
        return secret.reveal(self.env, path=f"sinks.{self.sink_name}.config.{field}")

    def resolve_path(self, path: str) -> Path:
        """A path from the sink's config, as the sink must open it.

        `~` is expanded; a relative path is taken from `base_dir` (the config
        file's directory, or the embedding app's), never from the process's
        working directory, so a daemon started elsewhere finds the same files.
        """
        p = Path(path).expanduser()
        return p if p.is_absolute() else self.base_dir / p
