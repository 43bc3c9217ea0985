"""Every check a configuration gets before anything runs, collected in one pass.

`check_config` is what ``check-config`` runs, and what ``export``,
``status`` and ``query`` run first: the document (`load_partial`), the
plugins and their keys (`resolve_partial`), then what needs the import
system and so stays out of the pure `resolve`: each used plugin's factory
path imports (with a did-you-mean), and each option that needs an extra has
it installed. One `ConfigError` lists every problem.

A plugin config class names what its options need by defining
``required_modules(self)``, yielding ``(key, module, extra)`` triples: ``key``
the config key that asks for it ("" for the plugin as a whole), ``module``
the top-level module to look for, ``extra`` the hypaware extra that installs
it (``"zstd"``), or a requirement with its own extra (``"acme-queue[kafka]"``).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from hypaware.core.config import HypawareConfig, SinkSpec
from hypaware.core.config_converter import join_path, structure_config
from hypaware.core.config_loader import load_partial
from hypaware.core.errors import ConfigError, Problem
from hypaware.core.manifest import PluginManifest
from hypaware.core.registry import Registry, did_you_mean
from hypaware.core.resolver import SinkPlan, resolve_partial

__all__ = ["check_config", "factory_problem", "missing_extras"]


def check_config(
    source: str | os.PathLike[str] | Mapping[str, Any] | HypawareConfig,
    registry: Registry | None = None,
) -> tuple[HypawareConfig, tuple[SinkPlan, ...]]:
    """The config and its sink plans; `ConfigError` listing every problem otherwise."""
    problems: list[Problem] = []
    if isinstance(source, HypawareConfig):
        config = source
    else:
        config, problems = load_partial(source)
    if registry is None:
        registry = Registry.from_entry_points()
    plans = resolve_partial(config, registry, problems)
    seen: set[str] = set()
    for spec in config.sinks:
        for role in ("writer", "destination", "encoder", "plugin"):
            name = getattr(spec, role)
            manifest = registry.get(name) if name is not None else None
            if manifest is None or name in seen:
                continue
            seen.add(name)
            why = factory_problem(manifest)
            if why is not None:
                problems.append(Problem(f"sinks.{spec.name}.{role}", why))
    for spec in config.sinks:
        problems.extend(missing_extras(spec, registry))
    if problems:
        raise ConfigError(_unique(problems))
    return config, plans


def _unique(problems: Iterable[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))


def factory_problem(manifest: PluginManifest) -> str | None:
    """Why `manifest`'s factory path does not import, or None; with a did-you-mean."""
    module_name, _, attr_path = manifest.factory.partition(":")
    label = f"plugin {manifest.name}: factory {manifest.factory!r}"
    try:
        module: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            parent, _, leaf = missing.rpartition(".")
            return f"{label}: no module {missing!r}{_sibling_hint(parent, leaf)}"
        return f"{label}: its module needs {missing!r}, which is not installed"
    except Exception as exc:  # a broken third-party module is named, not raised
        return f"{label}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
    obj = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("__")]
            return f"{label}: {module_name!r} has no {part!r}{did_you_mean(part, names)}"
        obj = getattr(obj, part)
    if not callable(obj):
        return f"{label}: {attr_path!r} is not callable"
    return None


def _sibling_hint(parent: str, leaf: str) -> str:
    if not parent:
        names = [m.name for m in pkgutil.iter_modules()]
    else:
        try:
            package = importlib.import_module(parent)
        except Exception:
            return ""
        names = [m.name for m in pkgutil.iter_modules(getattr(package, "__path__", []))]
    hint = did_you_mean(leaf, names)
    if hint and parent:
        return hint.replace(" '", f" '{parent}.", 1)
    return hint


def missing_extras(spec: SinkSpec, registry: Registry) -> list[Problem]:
    """A problem for each chosen option of `spec` whose module is not installed, naming the extra.

    Each plugin's config is read on its own, so an option is checked even
    when the sink has other problems.
    """
    problems = []
    for role in ("writer", "destination", "encoder", "plugin"):
        name = getattr(spec, role)
        manifest = registry.get(name) if name is not None else None
        if manifest is None or manifest.config_class is None:
            continue
        fields = {a.alias for a in attrs.fields(manifest.config_class)}
        subset = {k: v for k, v in spec.config.items() if k in fields}
        config = structure_config(manifest.config_class, subset, "", [])
        wants = getattr(config, "required_modules", None)
        if not callable(wants):
            continue
        for key, module, extra in wants():
            if _installed(module):
                continue
            path = join_path(f"sinks.{spec.name}.config", key) if key else f"sinks.{spec.name}"
            what = f"{key} = {getattr(config, key)!r}" if key else manifest.name
            # hypaware's own extras are named bare; a plugin names its own requirement.
            install = extra if "[" in extra else f"hypaware[{extra}]"
            problems.append(
                Problem(
                    path,
                    f"{what} needs {module}, which is not installed: pip install '{install}'",
                )
            )
    return problems


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
