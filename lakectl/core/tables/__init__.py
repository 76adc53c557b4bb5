"""The parts of the table diff (:mod:`lakectl.core.tablediff`): its records, how a table's objects
are found and read between two refs, and how schemas and rows are compared."""
