"""lakectl's public Python API: lakeFS's Python wrapper's object model (``lakefs``), over the
embedded lake or a lakectl server, through the same :class:`~lakectl.client.Backend` as the CLI.
Users import it from the package root: ``import lakectl`` then ``lakectl.Client()``,
``lakectl.repository("repo")`` (docs/python.md)."""
