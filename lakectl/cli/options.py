"""The root command's global options (lakeFS lakectl's persistent flags) and what they set for one run.

``-c/--config``, ``--base-uri``, ``--no-color``, ``--log-level`` and ``--verbose`` come before
the sub-command, as in lakeFS's lakectl. They set process state for one invocation only:
:func:`reset` undoes it when the command ends, so that in-process runs (tests, the contract
suite) never see another run's settings. Nothing here imports more than the standard library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakectl.errors import InvalidArgument

if TYPE_CHECKING:
    import logging

SCHEME = "lakefs://"
LOG_LEVELS = ("none", "trace", "debug", "info", "warn", "warning", "error", "fatal", "panic")
"""lakeFS's level names; trace is Python's DEBUG, fatal and panic its CRITICAL."""
_PYTHON_LEVEL = {
    "trace": 10,
    "debug": 10,
    "info": 20,
    "warn": 30,
    "warning": 30,
    "error": 40,
    "fatal": 50,
    "panic": 50,
}

_base_uri = ""
_color = True
_verbose = False
_handler: logging.Handler | None = None
_root_level = 0
"""The root logger's level before this run set one, given back by :func:`reset`."""


def apply(config_file: str | None, base_uri: str, no_color: bool, log_level: str, verbose: bool) -> None:
    """Take the global options of this run."""
    global _base_uri, _color, _verbose
    from lakectl import config

    if config_file == "":
        raise InvalidArgument("--config needs a file name")
    level = log_level.strip().lower()
    if level not in LOG_LEVELS:
        raise InvalidArgument(f"--log-level {log_level!r} is not one of {', '.join(LOG_LEVELS)}")
    if base_uri and not base_uri.startswith(SCHEME):
        raise InvalidArgument(f"--base-uri {base_uri!r} must start with {SCHEME}")
    config.use(config_file)
    _base_uri = base_uri
    _color = not no_color
    _verbose = verbose
    if level == "none" and verbose:
        level = "info"  # --verbose: say what is being done (the configuration read, each request)
    if level != "none":
        _log_to_stderr(_PYTHON_LEVEL[level])
        import os

        path = config.config_path()
        info("configuration file %s (%s)", path, "found" if os.path.exists(path) else "absent")


def reset() -> None:
    """Back to the defaults, as before :func:`apply`."""
    global _base_uri, _color, _verbose, _handler
    from lakectl import config

    config.use(None)
    _base_uri, _color, _verbose = "", True, False
    if _handler is not None:
        import logging

        root = logging.getLogger()
        root.removeHandler(_handler)
        root.setLevel(_root_level)
        _handler = None


def absolute(text: str) -> str:
    """``text`` with the base URI put before it, unless it is a full ``lakefs://`` URI (lakeFS's
    rule: plain concatenation, so ``--base-uri lakefs://repo`` and ``/main/x`` give
    ``lakefs://repo/main/x``)."""
    if _base_uri and not text.startswith(SCHEME):
        return _base_uri + text
    return text


def color() -> bool:
    """False with ``--no-color`` or a non-empty $NO_COLOR (rich alone would keep bold)."""
    import os

    return _color and not os.environ.get("NO_COLOR")


def verbose() -> bool:
    return _verbose


def _log_to_stderr(level: int) -> None:
    global _handler, _root_level
    import logging
    import sys

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    _root_level = root.level
    root.addHandler(handler)
    root.setLevel(level)
    _handler = handler


def info(message: str, *args: Any) -> None:
    """Log at INFO as ``lakectl.cli`` when a log level is set; otherwise nothing is even imported
    (logging costs start-up time)."""
    if _handler is not None:
        import logging

        logging.getLogger("lakectl.cli").info(message, *args)
