"""Every package has one exception base, and every exception a package defines derives from it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASES = {"geokernel": "geokernel.errors.PartitionerError", "partitioner": "geokernel.errors.PartitionerError",
         "lambdas": "lambdas.runtime.errors.LambdaError",
         "geo_service": "geo_service.errors.GeoServiceError", "glue_jobs": "glue_jobs.errors.AggregationError",
         "local": "local.errors.LocalRunError", "infra": "infra.errors.InfraError"}
SKIP = {"glue_jobs.glue_entry", "glue_jobs.emr_entry", "infra.app"}  # need the Glue runtime / run the CDK app
#: Not errors but signals, as KeyboardInterrupt is: raised by a signal handler wherever the main thread is, they
#: must get past every ``except Exception`` (botocore's retry around a request among them), so they derive from
#: BaseException and not from the package's base.
SIGNALS = {"local.run.Interrupted"}


def _modules(package: str) -> list[str]:
    names = [package]
    for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
        if info.name not in SKIP and not info.name.endswith("__main__"):
            names.append(info.name)
    return names


@pytest.mark.parametrize("package", sorted(BASES))
def test_every_exception_derives_from_the_package_base(package: str) -> None:
    # GIVEN the package's base exception
    mod_name, _, cls_name = BASES[package].rpartition(".")
    base = getattr(importlib.import_module(mod_name), cls_name)
    # WHEN every exception class its modules define is listed
    strays = []
    for name in _modules(package):
        module = importlib.import_module(name)
        for obj in vars(module).values():
            defined_here = inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == name
            if not defined_here or issubclass(obj, base):
                continue
            if not (f"{name}.{obj.__name__}" in SIGNALS and not issubclass(obj, Exception)):
                strays.append(f"{name}.{obj.__name__}")
    # THEN none is outside the base
    assert not strays, strays
