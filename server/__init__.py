"""The lakectl server: the lakeFS-compatible REST API over the same core as the embedded CLI."""
