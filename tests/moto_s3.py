"""moto's S3 server on 127.0.0.1 as a pytest fixture: the real S3 protocol for the block adapter's
suite and for import sources. If it cannot start, tests using it are skipped with a warning, or
fail when the environment variable CI is set."""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 (a free port), shared by this module's tests."""
    server: Any = None
    try:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        # start() waits forever if the server thread dies before binding: bound it.
        starter = threading.Thread(target=server.start, daemon=True)
        starter.start()
        starter.join(20)
        if starter.is_alive():
            raise RuntimeError("the server did not start within 20 s")
        host, port = server.get_host_and_port()
    except Exception as exc:
        message = f"S3 ADAPTER TESTS NOT RUN: cannot start moto's S3 server on 127.0.0.1: {exc!r}"
        if os.environ.get("CI"):
            pytest.fail(message)
        warnings.warn(message, stacklevel=1)
        pytest.skip(message)
    yield f"http://{host}:{port}"
    server.stop()
