"""What the geo workers run: the bundled worker image (``geo_service/Dockerfile``), with a transform package of yours
installed into it, or a container image of your own (docs/TRANSFORM.md "A transform package or an image of your own").

* :meth:`WorkerTransform.bundled`: the bundled image as it is (today's app: ``geo_transform`` names the default
  reverse geocoder or a class under ``transforms/``);
* :meth:`WorkerTransform.from_package`: the bundled image plus one pip requirement (``my-transforms==1.2``), installed
  by the Dockerfile from the build argument :data:`TRANSFORM_PACKAGE_ARG`, constrained to the versions the image
  locks (``geo_service/requirements.txt``: a package that needs other versions fails the build instead of changing
  the worker's libraries), and ``transform`` naming its class (``my_transforms.zones:Zones``);
* :meth:`WorkerTransform.from_image`: an ``ecs.ContainerImage`` of yours instead of the bundled one. It must hold the
  worker (``python -m geo_service``, the health check ``python -m geo_service.healthcheck``): build it ``FROM`` the
  bundled image.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_ecs as ecs
from packaging.requirements import InvalidRequirement, Requirement

from infra.config import TRANSFORM_RE
from infra.errors import ConfigError

#: The Dockerfile's build argument holding the transform package's pip requirement ("" installs nothing more).
TRANSFORM_PACKAGE_ARG = "TRANSFORM_PACKAGE"


@dataclass(frozen=True)
class WorkerTransform:
    """The worker image and the transform its workers run (``GEO_TRANSFORM``: ``module:Class``; None: the default
    reverse geocoder). Build one with :meth:`bundled`, :meth:`from_package` or :meth:`from_image`."""

    transform: str | None = None
    package: str | None = None
    image: ecs.ContainerImage | None = None

    def __post_init__(self) -> None:
        if self.transform is not None and not TRANSFORM_RE.match(self.transform):
            raise ConfigError(f"transform must be 'module:Class' (e.g. 'my_transforms.zones:Zones'), got {self.transform!r}")
        if self.package is not None:
            if self.image is not None:
                raise ConfigError("a transform package is installed into the bundled image: give a package or an "
                                  "image, not both")
            _check_requirement(self.package)
            if self.transform is None:
                raise ConfigError(f"the transform package {self.package!r} needs the transform it provides "
                                  "('module:Class')")

    @classmethod
    def bundled(cls, transform: str | None = None) -> WorkerTransform:
        """The bundled image; ``transform`` one of its classes (None: the default reverse geocoder)."""
        return cls(transform=transform)

    @classmethod
    def from_package(cls, requirement: str, transform: str) -> WorkerTransform:
        """The bundled image plus the pip ``requirement`` (a PEP 508 requirement: ``name==1.2``, ``name @ https://...``),
        whose class ``transform`` the workers run."""
        return cls(transform=transform, package=requirement)

    @classmethod
    def from_image(cls, image: ecs.ContainerImage, transform: str | None = None) -> WorkerTransform:
        """Your own worker ``image`` (built ``FROM`` the bundled one); ``transform`` the class it holds."""
        return cls(transform=transform, image=image)

    @property
    def build_args(self) -> dict[str, str]:
        """The bundled image's build arguments: the package's requirement, when there is one."""
        return {TRANSFORM_PACKAGE_ARG: self.package} if self.package else {}


def _check_requirement(requirement: str) -> None:
    """A PEP 508 requirement on one line: no pip option (``--index-url``), no second requirement."""
    if not requirement.strip() or "\n" in requirement or requirement.lstrip().startswith("-"):
        raise ConfigError(f"the transform package must be one pip requirement (e.g. 'my-transforms==1.2'), got {requirement!r}")
    try:
        Requirement(requirement)
    except InvalidRequirement as exc:
        raise ConfigError(f"the transform package {requirement!r} is not a pip requirement: {exc}") from None
