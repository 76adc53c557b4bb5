"""``lakectl init``: the lake itself."""

from __future__ import annotations

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend


def init(json_: JsonFlag = False) -> None:
    """Create the lake and print where it is.

    The embedded lake lives in $LAKECTL_HOME, else in lakectl's directory under the user data
    directory. Any command creates it on first use; init only makes that explicit.
    """
    home = backend().init()
    render.emit({"home": home, "message": f"Lake at {home}"}, json_, render.message)
