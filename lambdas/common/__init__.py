"""Shared Lambda plumbing: env var names and config, AWS adapters, control-table records, event rules."""
