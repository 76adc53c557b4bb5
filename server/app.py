"""The ASGI application: ``create_app(settings)`` opens the lake once and mounts the REST API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from lakectl import __version__
from lakectl.core.porcelain import Lake
from server import errors
from server.auth import Auth, load_secret_key
from server.config import BlockstoreType, Settings

API_PREFIX = "/api/v1"


def open_lake(settings: Settings) -> Lake:
    """The lake the settings describe: KV store by URL, blocks in the configured blockstore."""
    from lakectl.core.blocks.local import LocalAdapter
    from lakectl.core.kv import open_store

    assert settings.blockstore.type is BlockstoreType.LOCAL
    blocks = LocalAdapter(settings.blockstore.local_path)
    kv = open_store(settings.database.url)
    return Lake(kv=kv, blocks=blocks, home=settings.data_dir)


def create_app(settings: Settings, lake: Lake | None = None) -> FastAPI:
    """The application for ``settings``; the lake is opened now (configuration errors surface
    before the server listens) and closed at shutdown. Pass ``lake`` to serve one already open."""
    from server import blocks
    from server.api import branches, commits, config, objects, refs, repositories, tags

    lake = lake if lake is not None else open_lake(settings)
    auth = Auth(lake.kv, load_secret_key(settings.secret_key, settings.data_dir))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        lake.close()

    app = FastAPI(
        title="lakectl server",
        version=__version__,
        description="The lakeFS API v1 over a lakectl lake.",
        lifespan=lifespan,
        openapi_url=API_PREFIX + "/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.lake = lake
    app.state.auth = auth
    errors.install(app)
    for module in (config, repositories, branches, tags, commits, objects, refs):
        app.include_router(module.router, prefix=API_PREFIX)
    app.include_router(blocks.api, prefix=API_PREFIX)
    app.include_router(config.public, prefix=API_PREFIX)
    app.include_router(blocks.blocks)
    return app
