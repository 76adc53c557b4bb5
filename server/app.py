"""The ASGI applications: ``create_app(settings)`` opens the lake once and mounts the REST API
and the web UI (``/ui``); ``create_gateway(app)`` is the S3 gateway over the same lake;
``Dispatch`` serves both from one uvicorn server, each on its own listening socket."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from lakectl import __version__
from lakectl.core.blocks import BlockAdapter
from lakectl.core.hostpaths import Confinement
from lakectl.core.lake import Lake
from lakectl.errors import AlreadyExists
from server import errors
from server.auth.secret import load_secret_key
from server.auth.store import Auth, lake_auth
from server.config import Settings
from server.configkeys import BlockstoreType
from server.responses import SafeJSONResponse

API_PREFIX = "/api/v1"


def open_lake(settings: Settings, create: bool = False) -> Lake:
    """The lake the settings describe: KV store by URL, blocks in the configured blockstore.

    An S3 bucket is listed once here, so that a wrong bucket, endpoint or credential stops the
    server before it listens rather than failing every request. A missing or empty metadata
    database over stored blocks stops it too (``StorageError``, :mod:`lakectl.core.identity`),
    unless ``create`` asks for a new lake over them (``lakectl server setup``).
    """
    from lakectl.core.identity import open_metadata
    from lakectl.core.journal import journal

    blocks = open_blocks(settings)
    kv, identity = open_metadata(settings.database.url, blocks, create)
    lake = Lake(kv=kv, blocks=blocks, home=settings.data_dir, identity=identity)
    lake.confinement = confinement(settings)
    journal.install(lake)
    return lake


def open_blocks(settings: Settings) -> BlockAdapter:
    """The configured blockstore; an S3 bucket is listed once (:func:`open_lake`)."""
    store = settings.blockstore
    blocks: BlockAdapter
    if store.type is BlockstoreType.S3:
        from lakectl.core.blocks.s3 import S3Adapter

        assert store.s3 is not None
        s3 = store.s3
        blocks = S3Adapter(
            s3.bucket,
            s3.prefix,
            endpoint_url=s3.endpoint,
            region=s3.region,
            access_key_id=s3.access_key_id,
            secret_access_key=s3.secret_access_key,
            session_token=s3.session_token,
            profile=s3.profile,
            credentials_file=s3.credentials_file,
        )
        next(iter(blocks.list()), None)  # one listing page proves bucket, endpoint and keys
    else:
        assert store.local is not None
        local = store.local
        if len(local.paths) == 1:
            from lakectl.core.blocks.local import LocalAdapter

            blocks = LocalAdapter(local.paths[0])
        else:
            from lakectl.core.blocks.volumes import local_volumes

            blocks = local_volumes(local.paths, local.replicas)
    return blocks


HOST_SYSTEM = ("/proc", "/sys", "/dev")
"""Never data, and the server's own environment and memory are readable there."""


def confinement(settings: Settings) -> Confinement:
    """The host paths the server may read imported objects from: under the allowed prefixes,
    never its own files (data directory, block volumes, SQLite database, configuration, S3
    credentials file, log file) nor the host's system trees; nor its block bucket's prefix."""
    own = [settings.data_dir, settings.config_file, *HOST_SYSTEM]
    if settings.blockstore.local is not None:
        own.extend(settings.blockstore.local.paths)
    if settings.blockstore.s3 is not None and settings.blockstore.s3.credentials_file:
        own.append(settings.blockstore.s3.credentials_file)
    if settings.database.url.startswith("sqlite:///"):
        db = settings.database.url.removeprefix("sqlite:///")
        own.extend(db + suffix for suffix in ("", "-wal", "-shm", "-journal"))
    if settings.logging.output not in ("-", "="):
        own.append(settings.logging.output)
    stores = []
    if settings.blockstore.s3 is not None:  # its blocks, listed by any S3 prefix that overlaps theirs
        prefix = settings.blockstore.s3.prefix  # as the S3 adapter keys them
        stores.append(
            (settings.blockstore.s3.bucket, prefix + "/" if prefix and prefix[-1] != "/" else prefix)
        )
    return Confinement.of(settings.allowed_external_prefixes, [p for p in own if p], stores)


def create_app(settings: Settings, lake: Lake | None = None) -> FastAPI:
    """The application for ``settings``; the lake is opened now (configuration errors surface
    before the server listens) and closed at shutdown. Pass ``lake`` to serve one already open."""
    from server import blocks

    lake = _served_lake(settings, lake)
    auth = _auth(settings, lake)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        from lakectl.core.importing import tasks

        tasks.stop_all(lake)  # imports still running are canceled: they must not outlive the lake
        lake.close()

    app = FastAPI(
        title="lakectl server",
        version=__version__,
        description="The lakeFS API v1 over a lakectl lake.",
        lifespan=lifespan,
        openapi_url=API_PREFIX + "/openapi.json",
        docs_url=None,
        redoc_url=None,
        default_response_class=SafeJSONResponse,
    )
    app.state.settings = settings
    app.state.lake = lake
    app.state.auth = auth
    # Small object reads answer from the event loop only when blocks are on local disk; an S3
    # round trip there would stall every other connection.
    app.state.inline_reads = settings.blockstore.type is BlockstoreType.LOCAL
    app.state.block_buffers = blocks.BlockBuffers(blocks.BLOCK_BUFFERS)
    errors.install(app)
    _include_routes(app)
    return app


def _served_lake(settings: Settings, lake: Lake | None) -> Lake:
    """The lake ``create_app`` serves: ``lake``, or the one the settings describe, confined, with
    the actions heard when they are enabled."""
    from lakectl.core.journal import journal

    lake = lake if lake is not None else open_lake(settings)
    lake.confinement = confinement(settings)  # a lake served is confined, however it was opened
    if settings.actions.enabled:
        from lakectl.core.workflow.actionruns import ActionHooks

        lake.events = ActionHooks(
            lake,
            commands=settings.actions.command_enabled,
            webhook_hosts=settings.actions.webhook_hosts,
        )
        journal.install(lake)  # again, after the actions (open_lake installed it alone)
    return lake


def _auth(settings: Settings, lake: Lake) -> Auth:
    """The users of ``lake``, the first one set up from the settings' ``installation``."""
    auth = lake_auth(lake, load_secret_key(settings.secret_key, settings.data_dir))
    installed = settings.installation
    if installed is not None and not auth.is_set_up():
        # lakeFS's installation.*: set up on the first run; a server that did meanwhile wins.
        with suppress(AlreadyExists):
            auth.setup(installed.user_name, installed.access_key_id, installed.secret_access_key)
    return auth


def _include_routes(app: FastAPI) -> None:
    """The block API, the lakeFS API v1, presigned reads and the web UI, in the order requests
    are matched against them."""
    from server import blocks, presigned, ui
    from server.api import actions as actions_api
    from server.api import annotate as annotate_api
    from server.api import auth as auth_api
    from server.api import branches, commits, config, dumps, fsck, imports, objects, refs, repositories, tags
    from server.api import internal as internal_api
    from server.api import journal as journal_api
    from server.api import protection as branch_protection
    from server.api import pulls as pulls_api
    from server.api import settings as repository_settings
    from server.api import staging as staging_api
    from server.api import tables as tables_api

    routers = (
        config,
        repositories,
        branches,
        tags,
        commits,
        objects,
        refs,
        repository_settings,
        fsck,
        dumps,
        imports,
        internal_api,
    )
    # The block API first: a request is matched against the routes in order, and a block
    # upload (one request per block or pack, thousands per recursive upload) would otherwise
    # be tried against every route of the lakeFS API first (~0.5 ms each time).
    app.include_router(blocks.blocks)
    for module in routers:
        app.include_router(module.router, prefix=API_PREFIX)
    app.include_router(branch_protection.router, prefix=API_PREFIX)
    app.include_router(staging_api.router, prefix=API_PREFIX)
    app.include_router(annotate_api.router, prefix=API_PREFIX)
    app.include_router(actions_api.router, prefix=API_PREFIX)
    app.include_router(journal_api.router, prefix=API_PREFIX)
    app.include_router(pulls_api.router, prefix=API_PREFIX)
    app.include_router(tables_api.router, prefix=API_PREFIX)
    app.include_router(blocks.api, prefix=API_PREFIX)
    app.include_router(config.public, prefix=API_PREFIX)
    app.include_router(auth_api.router, prefix=API_PREFIX)
    app.include_router(presigned.router)
    ui.mount(app)


def create_gateway(app: FastAPI) -> ASGIApp:
    """The S3 gateway over the lake and users of ``app`` (from :func:`create_app`)."""
    from server.s3.app import Gateway

    settings: Settings = app.state.settings
    state = app.state
    return Gateway(state.lake, state.auth, settings.s3, state.inline_reads, state.block_buffers)


class Dispatch:
    """One ASGI app for both listening sockets: a request that arrived on one of ``s3_ports``
    goes to the gateway, every other one (and the lifespan, which opens and closes the lake) to
    the REST API."""

    def __init__(self, api: ASGIApp, gateway: ASGIApp, s3_ports: Collection[int]) -> None:
        self.api, self.gateway, self.s3_ports = api, gateway, frozenset(s3_ports)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server") or (None, None)
        if scope["type"] == "http" and server[1] in self.s3_ports:
            await self.gateway(scope, receive, send)
        else:
            await self.api(scope, receive, send)
