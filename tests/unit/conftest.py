"""Fixtures shared by the graph tests (defined in graphkit, registered here)."""

from tests.unit.graphkit import clock, history, lake

__all__ = ["clock", "history", "lake"]
