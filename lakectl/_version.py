"""The version of lakectl, in a module of its own: what needs it imports nothing else."""

__version__ = "0.1.0"
