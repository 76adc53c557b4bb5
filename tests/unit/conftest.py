"""Fixtures shared by the graph tests (defined in graphkit, registered here)."""

from tests.unit.graphkit import clock, dated, history, lake

__all__ = ["clock", "dated", "history", "lake"]
