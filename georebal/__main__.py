"""Entry point of ``python -m georebal`` (see :mod:`georebal.cli`)."""

try:
    from georebal.cli import main
except KeyboardInterrupt:  # Ctrl-C while the libraries load: as quiet as during the command
    raise SystemExit(130) from None

raise SystemExit(main())
