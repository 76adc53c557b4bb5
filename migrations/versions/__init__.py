"""Alembic revisions; a package only so that setuptools ships the files with ``migrations``."""
