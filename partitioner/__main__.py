"""Entry point of ``python -m partitioner`` (see :mod:`partitioner.cli`)."""

from partitioner.cli import main

raise SystemExit(main())
