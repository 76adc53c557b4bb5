"""Logging of the server from ``logging.{format,level,output}``: text or JSON lines, to a stream or file."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from server.config import LoggingSettings
from server.configkeys import LogFormat

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and the exception, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def log_config(settings: LoggingSettings) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for the server's and uvicorn's loggers."""
    if settings.format is LogFormat.JSON:
        formatter: dict[str, Any] = {"()": JsonFormatter}
    else:
        formatter = {"format": TEXT_FORMAT}
    if settings.output == "-":
        handler: dict[str, Any] = {"class": "logging.StreamHandler", "stream": "ext://sys.stdout"}
    elif settings.output == "=":
        handler = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}
    else:
        handler = {"class": "logging.FileHandler", "filename": settings.output, "encoding": "utf-8"}
    handler["formatter"] = "default"
    loggers = ("lakectl", "uvicorn", "uvicorn.error", "uvicorn.access")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {"default": handler},
        "loggers": {
            name: {"handlers": ["default"], "level": settings.level, "propagate": False} for name in loggers
        },
    }
