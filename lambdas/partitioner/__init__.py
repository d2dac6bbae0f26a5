"""Partitioner Lambda: snapshot manifest -> candidate spec -> policy -> publish."""
