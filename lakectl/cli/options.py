"""The root command's global options (lakeFS lakectl's persistent flags) and what they set for one run.

``-c/--config``, ``--base-uri``, ``--no-color``, ``--log-level``, ``--log-format``,
``--log-output`` and ``--verbose`` come before the sub-command, as in lakeFS's lakectl. They set
process state for one invocation only: :func:`reset` undoes it when the command ends, so that
in-process runs (tests, the contract suite) never see another run's settings. Nothing here
imports more than the standard library, and logging only when a level asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
LOG_FORMATS = ("text", "json")


@dataclass
class Globals:
    """The global options of one run, as given on the command line."""

    config_file: str | None = None
    base_uri: str = ""
    no_color: bool = False
    log_level: str = "none"
    log_format: str = "text"
    log_outputs: list[str] = field(default_factory=list)
    verbose: bool = False


_base_uri = ""
_color = True
_handlers: list[logging.Handler] = []
_root_level = 0
"""The root logger's level before this run set one, given back by :func:`reset`."""


def apply(given: Globals) -> None:
    """Take the global options of this run (all checked before any takes effect)."""
    global _base_uri, _color
    from lakectl import config

    if given.config_file == "":
        raise InvalidArgument("--config needs a file name")
    level = given.log_level.strip().lower()
    if level not in LOG_LEVELS:
        raise InvalidArgument(f"--log-level {given.log_level!r} is not one of {', '.join(LOG_LEVELS)}")
    log_format = given.log_format.strip().lower()
    if log_format not in LOG_FORMATS:
        raise InvalidArgument(f"--log-format {given.log_format!r} is not one of {', '.join(LOG_FORMATS)}")
    if given.base_uri and not given.base_uri.startswith(SCHEME):
        raise InvalidArgument(f"--base-uri {given.base_uri!r} must start with {SCHEME}")
    config.use(given.config_file)
    _base_uri = given.base_uri
    _color = not given.no_color
    if level == "none" and given.verbose:
        level = "info"  # --verbose: say what is being done (the configuration read, each request)
    if level != "none":
        _log(_PYTHON_LEVEL[level], log_format, given.log_outputs)
        import os

        path = config.config_path()
        info("configuration file %s (%s)", path, "found" if os.path.exists(path) else "absent")


def reset() -> None:
    """Back to the defaults, as before :func:`apply`."""
    global _base_uri, _color
    from lakectl import config

    config.use(None)
    _base_uri, _color = "", True
    if _handlers:
        import logging

        root = logging.getLogger()
        for handler in _handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(_root_level)
        _handlers.clear()


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


def info(message: str, *args: Any) -> None:
    """Log at INFO as ``lakectl.cli`` when a log level is set; otherwise nothing is even imported
    (logging costs start-up time)."""
    if _handlers:
        import logging

        logging.getLogger("lakectl.cli").info(message, *args)


def _log(level: int, log_format: str, outputs: list[str]) -> None:
    """Send the records of ``level`` and above to each output: ``-`` is stdout (as lakeFS's),
    a path a file appended to, none stderr."""
    global _root_level
    import logging
    import sys

    handlers: list[logging.Handler] = []
    try:
        for output in outputs or [""]:
            if output == "-":
                handlers.append(logging.StreamHandler(sys.stdout))
            elif output:
                handlers.append(logging.FileHandler(output, encoding="utf-8"))
            else:
                handlers.append(logging.StreamHandler(sys.stderr))
    except OSError as e:
        for handler in handlers:
            handler.close()
        raise InvalidArgument(f"cannot open the log output {e.filename}: {e.strerror}") from e
    formatter: Any = _JsonFormatter() if log_format == "json" else _text_formatter()
    root = logging.getLogger()
    _root_level = root.level
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(level)
    _handlers.extend(handlers)


def _text_formatter() -> logging.Formatter:
    import logging

    return logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")


class _JsonFormatter:
    """One JSON object a line, with logrus's field names (time, level, msg) as lakeFS logs."""

    def format(self, record: logging.LogRecord) -> str:
        import json
        import time

        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(record.created))
        out = {
            "time": stamp,
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            import traceback

            out["error"] = "".join(traceback.format_exception_only(record.exc_info[1])).strip()
        return json.dumps(out, ensure_ascii=False)
