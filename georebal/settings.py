"""The deployment's settings as ``cdk synth`` reads them: the ``context`` of ``cdk.json`` with ``-c key=value``
overrides (values as text, like the CDK CLI passes them), parsed once by :func:`infra.config.load_config`.

Unknown keys are refused like at synth (``-c max-load=5`` would otherwise check the default ``max_load``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from georebal.errors import SettingsError
from infra.config import GeoConfig, load_config, reject_unknown
from infra.errors import ConfigError

CDK_JSON = Path("cdk.json")


def context_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """``["max_load=5000", ...]`` (the ``-c`` options) as a mapping; a pair without ``=`` is named."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SettingsError(f"-c {pair!r}: expected key=value, like the CDK CLI's -c")
        out[key] = value
    return out


def cdk_context(path: Path) -> dict[str, Any]:
    """The ``context`` object of the cdk.json at ``path``."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise SettingsError(f"--cdk-json {str(path)!r}: cannot read it ({exc.strerror}); run from the repository, "
                            f"or give the deployment's cdk.json") from None
    except json.JSONDecodeError as exc:
        raise SettingsError(f"--cdk-json {str(path)!r}: not JSON ({exc})") from None
    context = doc.get("context", {}) if isinstance(doc, dict) else None
    if not isinstance(context, dict):
        raise SettingsError(f"--cdk-json {str(path)!r}: 'context' must be an object, got {context!r}")
    return context


def load_settings(path: Path, overrides: Mapping[str, str]) -> GeoConfig:
    """The deployment's :class:`~infra.config.GeoConfig` from cdk.json at ``path`` and ``-c`` ``overrides``."""
    context = {**cdk_context(path), **overrides}
    try:
        reject_unknown(context)  # its message names cdk.json and -c
    except ConfigError as exc:
        raise SettingsError(str(exc)) from None
    try:
        return load_config(context)
    except ConfigError as exc:
        raise SettingsError(f"{exc} (in {str(path)!r} or -c)") from None


def add_settings_arguments(p: argparse.ArgumentParser) -> None:
    """``--cdk-json PATH`` and ``-c key=value`` (repeatable), read by :func:`settings_of`."""
    p.add_argument("--cdk-json", type=Path, default=CDK_JSON, metavar="PATH",
                   help="the deployment's cdk.json (default: ./cdk.json)")
    p.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE",
                   help="override a cdk.json setting, like `cdk deploy -c` (repeatable)")


def settings_of(args: argparse.Namespace) -> GeoConfig:
    """The settings :func:`add_settings_arguments` asked for."""
    return load_settings(args.cdk_json, context_overrides(args.context))
