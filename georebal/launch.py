"""The ``georebal`` command as installed (``[project.scripts]``) and ``python -m georebal``: :mod:`georebal.cli`, or
one line saying what it cannot run without.

georebal ships in the distribution (``pip install .``), but not everything it runs on ships with it:

* **boto3** (and botocore): the extra ``[ops]`` (``pip install 'geo-rebalancer[ops]'``); the dev lock has it.
* **The router's code** (``lambdas/``, which ``locate``, ``replay`` and ``redrive`` reuse), and for ``smoke`` the app
  itself (``app.py``, ``cdk.json``, the CDK CLI in ``node_modules``): a checkout of this repository. The CDK app's
  settings, :mod:`infra.config`, ship in the distribution (``infra``, with the extra ``[cdk]``).

So georebal runs on a checkout: ``python -m georebal`` from its root, or the ``georebal`` command of an editable
install (``scripts/bootstrap.sh`` installs the checkout into ``.venv`` so) from any directory: it finds the checkout
beside its own package (:func:`checkout_root`) and imports ``lambdas`` from there. ``--version`` answers without
either. Lacking one, the command prints one line ``error: ...`` naming it and exits 2, no traceback.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

from georebal import __version__
from georebal.exits import EXIT_ERROR, EXIT_INTERRUPTED

__all__ = ["checkout_root", "missing", "run"]

#: The line printed when boto3 is not installed.
NO_BOTO3 = ("georebal needs boto3, which the installed distribution brings only with its extra [ops]: "
            "pip install 'geo-rebalancer[ops]'")
#: The line printed when no checkout is found.
#: What georebal imports from the checkout, not from the distribution: the CDK app's settings and the router's code
#: that ``locate``, ``replay`` and ``redrive`` reuse.
CHECKOUT_PACKAGES = ("infra", "lambdas")
NO_CHECKOUT = ("georebal runs on a checkout of the Geo Rebalancer repository (it reuses the router's code, lambdas/, "
               "which the installed distribution does not ship): clone it, run scripts/bootstrap.sh there, "
               "then use its .venv/bin/georebal (or python -m georebal from its root)")


def checkout_root(package_dir: Path | None = None) -> Path | None:
    """The checkout ``package_dir`` (default: this package's folder) sits in, None when it is not in one (a wheel
    installed into site-packages, which ships ``infra`` but not ``lambdas``): the folder above it when that holds
    every one of :data:`CHECKOUT_PACKAGES`."""
    here = (package_dir or Path(__file__).parent).resolve()
    return here.parent if all((here.parent / name / "__init__.py").is_file() for name in CHECKOUT_PACKAGES) else None


def missing(package_dir: Path | None = None) -> str | None:
    """The line naming what the CLI cannot run without, None when it has everything.

    When one of :data:`CHECKOUT_PACKAGES` is not importable but the package sits in a checkout, the checkout's root
    is appended to ``sys.path`` (last: nothing installed is shadowed), as ``python -m georebal`` from that root would
    have it.
    """
    if importlib.util.find_spec("boto3") is None:
        return NO_BOTO3
    if any(importlib.util.find_spec(name) is None for name in CHECKOUT_PACKAGES):
        root = checkout_root(package_dir)
        if root is None:
            return NO_CHECKOUT
        sys.path.append(str(root))
    return None


def run(argv: Sequence[str] | None = None) -> None:
    """Run the CLI on ``argv`` (default: the command line); exit with its status."""
    args = list(sys.argv[1:] if argv is None else argv)
    problem = missing()
    if problem is not None:
        if args[:1] == ["--version"]:
            print(f"georebal {__version__}")
            raise SystemExit(0)
        print(f"error: {problem}", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)
    try:
        from georebal.cli import main
    except KeyboardInterrupt:  # Ctrl-C while the libraries load: as quiet as during the command
        raise SystemExit(EXIT_INTERRUPTED) from None
    raise SystemExit(main(args))
