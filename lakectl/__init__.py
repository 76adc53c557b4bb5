"""lakectl: version control for data lakes.

The public Python API (docs/python.md) is lakeFS's Python wrapper's object model: a script
written for ``lakefs`` runs here with ``import lakectl as lakefs`` and a ``lakectl.Client``.
Its modules import nothing of the lake until a call needs it, so that the CLI, the server and
Spark executors, which import this package too, pay a few milliseconds for them.
"""

from lakectl import exceptions
from lakectl._version import __version__
from lakectl.api.client import Client
from lakectl.api.objects import StoredObject, WriteableObject
from lakectl.api.references import Branch, Reference, Tag
from lakectl.api.repositories import Repository, repositories, repository

__all__ = [
    "Branch",
    "Client",
    "Reference",
    "Repository",
    "StoredObject",
    "Tag",
    "WriteableObject",
    "__version__",
    "exceptions",
    "repositories",
    "repository",
]
