"""Appends and reads over a commit range: what a ``cat --since`` reads, and what an
append followed by a commit costs next to an upload of a new object followed by a commit.

(a) A 10 GiB object (``--size-gib``) is one stored 1 MiB block named over and over in its locator
list (blocks are deduplicated by content: nothing near 10 GiB is written), committed; 1 MiB of
other bytes is appended and committed; ``cat --since`` the first commit reads the new bytes. A
counting wrapper around the lake's block adapter adds up the size of every block read (each is
read whole, to verify its md5): the figure printed next to the 2 MiB target.

(b) ``--appends`` appends of 1 KiB each to one object, each followed by a commit, against as many
uploads of new 1 KiB objects each followed by a commit, in-process through the core, in two fresh
lakes; the total times side by side with the 2x target.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from _benchutil import Table, fmt_time, print_context, temp_dir, timed, verdict

from lakectl.core import appended, opening, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks.data import object_checksum, write_bytes
from lakectl.core.lake import Lake
from lakectl.core.model import Entry

REPO = "appends"
MIB = 1024 * 1024
TARGET_READ = 2 * MIB
"""``cat --since`` of the last 1 MiB appended: at most this many bytes of blocks read."""
TARGET_RATIO = 2.0
"""1,000 appends with commits / 1,000 uploads with commits, at most."""


def big_object(lake: Lake, gib: int) -> str:
    """Commit a ``gib`` GiB object made of one stored 1 MiB block; the commit's id."""
    block = write_bytes(lake.blocks, os.urandom(MIB))
    count = gib * 1024
    digest = bytes.fromhex(block.checksum)
    checksum = object_checksum([digest] * count)
    entry = Entry(size=count * MIB, checksum=checksum, locators=block.locators * count, mtime=0)
    lake.blocks.sync()
    writes.stage_rows(lake, REPO, "main", [("big", entry.to_row())])
    return p.commit(lake, REPO, "main", f"{gib} GiB").id


def counting_reads(lake: Lake) -> list[int]:
    """The sizes of the blocks the lake's adapter reads from now on (a list that grows)."""
    sizes: list[int] = []
    get = lake.blocks.get

    def counted(locator: str, offset: int = 0, length: int | None = None) -> bytes:
        sizes.append(int(locator.rpartition("+")[2]))
        return get(locator, offset, length)

    lake.blocks.get = counted  # type: ignore[method-assign]
    return sizes


def read_since(home: str, gib: int) -> tuple[int, int, float]:
    """(bytes returned, bytes of blocks read, seconds) of the ``cat --since`` of (a)."""
    lake = opening.open_lake(home, create=True)
    try:
        p.create_repo(lake, REPO)
        first = big_object(lake, gib)
        writes.append(lake, REPO, "main", "big", os.urandom(MIB))
        p.commit(lake, REPO, "main", "1 MiB appended")
        sizes = counting_reads(lake)
        took, got = timed(lambda: sum(map(len, appended.read_since(lake, REPO, first, "main", "big"))))
        return got, sum(sizes), took
    finally:
        lake.close()


def commits_of(home: str, count: int, write: Callable[[Lake, int], object]) -> float:
    """Seconds for ``count`` writes (``write(lake, n)``), each followed by a commit."""
    lake = opening.open_lake(home, create=True)
    try:
        p.create_repo(lake, REPO)

        def run() -> None:
            for n in range(count):
                write(lake, n)
                p.commit(lake, REPO, "main", f"write {n}")

        return timed(run)[0]
    finally:
        lake.close()


def kib(n: int) -> bytes:
    return n.to_bytes(8, "big") * 128


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-gib", type=int, default=10, help="size of the object of (a)")
    parser.add_argument("--appends", type=int, default=1_000, help="appends (and uploads) of (b)")
    args = parser.parse_args()
    print_context("appends and reads over a commit range")
    with temp_dir("appends-") as work:
        got, read, took = read_since(os.path.join(work, "big"), args.size_gib)
        appends = commits_of(
            os.path.join(work, "appends"),
            args.appends,
            lambda lake, n: writes.append(lake, REPO, "main", "log", kib(n)),
        )
        uploads = commits_of(
            os.path.join(work, "uploads"),
            args.appends,
            lambda lake, n: writes.upload(lake, REPO, "main", f"o/{n:06d}", kib(n)),
        )
    table = Table("figure", "measured", "peer or floor", "target", "result")
    table.add(
        f"cat --since, last 1 MiB of {args.size_gib} GiB",
        f"{read / MIB:.2f} MiB of blocks read ({got / MIB:.2f} MiB returned) in {fmt_time(took)}",
        f"{args.size_gib * 1024:,} MiB: the whole object",
        "<= 2 MiB",
        verdict(read <= TARGET_READ),
    )
    ratio = appends / uploads
    table.add(
        f"{args.appends:,} appends of 1 KiB, each committed",
        fmt_time(appends),
        f"{fmt_time(uploads)}: as many new 1 KiB objects, each committed",
        f"<= {TARGET_RATIO:.0f}x ({ratio:.2f}x)",
        verdict(ratio <= TARGET_RATIO),
    )
    table.print()


if __name__ == "__main__":
    main()
