"""The schema changes between two sides of a table, and which columns compare with which."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lakectl.core.tables.records import ColumnChange, ColumnChangeType


@dataclass(frozen=True, slots=True)
class SchemaDiff:
    changes: tuple[ColumnChange, ...]
    pairs: tuple[tuple[str, str], ...]
    """(left name, right name) of every column present on both sides, renamed ones mapped, in
    the right side's order: the columns whose values are compared."""

    def left_name(self, right: str) -> str | None:
        return next((ln for ln, rn in self.pairs if rn == right), None)


def compare_schemas(left: pa.Schema, right: pa.Schema) -> SchemaDiff:
    """Added, removed and retyped columns by name; a left column absent on the right and a right
    column absent on the left at the same position with the same type are one RENAMED."""
    lnames, rnames = list(left.names), list(right.names)
    lset, rset = set(lnames), set(rnames)
    renamed: dict[str, str] = {}  # right -> left
    for i in range(min(len(lnames), len(rnames))):
        ln, rn = lnames[i], rnames[i]
        if ln not in rset and rn not in lset and left.field(i).type == right.field(i).type:
            renamed[rn] = ln
    changes: list[ColumnChange] = []
    pairs: list[tuple[str, str]] = []
    for field in right:
        name, new_type = field.name, str(field.type)
        if name in renamed:
            changes.append(ColumnChange(ColumnChangeType.RENAMED, name, new_type, new_type, renamed[name]))
            pairs.append((renamed[name], name))
        elif name not in lset:
            changes.append(ColumnChange(ColumnChangeType.ADDED, name, None, new_type))
        else:
            old_type = str(left.field(name).type)
            if old_type != new_type:
                changes.append(ColumnChange(ColumnChangeType.RETYPED, name, old_type, new_type))
            pairs.append((name, name))
    gone = set(renamed.values())
    for field in left:
        if field.name not in rset and field.name not in gone:
            changes.append(ColumnChange(ColumnChangeType.REMOVED, field.name, str(field.type), None))
    return SchemaDiff(tuple(changes), tuple(pairs))
