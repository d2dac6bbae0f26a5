"""Entry point of ``python -m partitioner`` (see :mod:`partitioner.cli`)."""

try:
    from partitioner.cli import main
except KeyboardInterrupt:  # Ctrl-C while the libraries load: as quiet as during the command
    raise SystemExit(130) from None

raise SystemExit(main())
