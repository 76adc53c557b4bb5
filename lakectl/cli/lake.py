"""``lakectl init``: the lake itself."""

from __future__ import annotations

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend


def init(json_: JsonFlag = False) -> None:
    """Create the lake and print where it is.

    The embedded lake lives in $LAKECTL_HOME, else in lakectl's directory under the user data
    directory. Any command creates it on first use, except over a block directory that holds
    blocks but whose lake.db is missing or empty: that is refused (exit 9), and init is how to
    create a new lake there anyway. Garbage collection then refuses to run until told
    (gc run --allow-preexisting-blocks).
    """
    created = backend().init()
    home = created["home"]
    over = created.get("created_over_blocks")
    if over and not json_:
        render.note(over_blocks_warning(over))
    render.emit({**created, "message": f"Lake at {home}"}, json_, render.message)


def over_blocks_warning(count: int) -> str:
    """What a user is told when a new metadata database was created over stored blocks."""
    return (
        f"warning: created a new metadata database over {count} blocks already stored: nothing "
        "in it refers to them, so garbage collection refuses to run until you have imported what "
        "you want to keep and run `lakectl gc run --allow-preexisting-blocks`"
    )
