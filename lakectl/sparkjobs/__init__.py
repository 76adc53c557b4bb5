"""The Spark jobs the backends and the server run where the lake is: garbage collection, fsck,
table diff and table merge, on executors.

Below :mod:`lakectl.client` (which calls them for ``--spark MASTER``) and :mod:`server`; they
import only the core (an import-linter contract keeps it so), and pyspark only lazily, inside the
functions that run a job: importing a job module needs no Spark. The ``lakefs`` data source,
which imports the client, is :mod:`lakectl.spark`, above it.
"""
