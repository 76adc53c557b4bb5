"""Configuration, set-up and health: ``/config``, ``/config/storage``, ``/config/version``,
``/config/garbage-collection``, ``/setup_lakefs`` and ``/healthcheck``; and lakeFS's telemetry
endpoints (``/statistics``, ``/usage-report/summary``, ``/setup_comm_prefs``), which answer as
lakeFS does and send nothing anywhere."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from lakectl import __version__
from server.api.bodies import CommPrefs, Setup, StatsEvents
from server.api.deps import AUTHENTICATED, PUBLIC, AuthDep, AuthFirstRoute, LakeDep, require
from server.policies import Permission

NAMESPACE_REGEX = "^(local|s3)://."
"""What lakectl.core.limits.check_storage_namespace accepts (it also refuses control characters)."""

public = APIRouter(route_class=AuthFirstRoute)
router = APIRouter(route_class=AuthFirstRoute)


def storage_config(request: Request) -> dict[str, Any]:
    """Pre-signed URLs are not offered: clients then send object data through this API."""
    return {
        "blockstore_type": request.app.state.settings.blockstore.type.value,
        "blockstore_namespace_example": "local://my-repository",
        "blockstore_namespace_ValidityRegex": NAMESPACE_REGEX,
        "default_namespace_prefix": "local://",
        "pre_sign_support": False,
        "pre_sign_support_ui": False,
        "import_support": False,
        "import_validity_regex": "^$",
        "pre_sign_multipart_upload": False,
        "blockstore_id": "",
        "blockstore_description": "lakectl content-addressed block store",
    }


def version_config() -> dict[str, Any]:
    return {"version": __version__, "version_context": "lakectl", "upgrade_recommended": False}


@public.get("/healthcheck", status_code=204, dependencies=[PUBLIC])
async def healthcheck() -> Response:
    return Response(status_code=204)


@public.get("/setup_lakefs", dependencies=[PUBLIC])
async def get_setup_state(auth: AuthDep) -> dict[str, Any]:
    state = "initialized" if auth.is_set_up() else "not_initialized"
    return {"state": state, "comm_prefs_missing": False}


@public.post("/setup_lakefs", dependencies=[PUBLIC])
async def setup(body: Setup, auth: AuthDep) -> dict[str, Any]:
    """Create the first admin user and its access key (once); the secret is shown only here."""
    key = body.key
    creds = auth.setup(
        body.username, key.access_key_id if key else None, key.secret_access_key if key else None
    )
    return creds.to_dict()


@router.get("/config", dependencies=[require(Permission.READ_REPO)])
async def get_config(request: Request) -> dict[str, Any]:
    return {"version_config": version_config(), "storage_config": storage_config(request)}


@router.get("/config/storage", dependencies=[require(Permission.READ_REPO)])
async def get_storage_config(request: Request) -> dict[str, Any]:
    return storage_config(request)


@router.get("/config/version", dependencies=[require(Permission.READ_REPO)])
async def get_version() -> dict[str, Any]:
    return version_config()


@router.get("/config/garbage-collection", dependencies=[require(Permission.READ_REPO)])
async def get_garbage_collection_config() -> dict[str, Any]:
    """lakeFS ``GarbageCollectionConfig``: objects written within ``grace_period`` seconds are
    never collected."""
    from lakectl.core.upkeep.gc import GRACE_SECONDS

    return {"grace_period": GRACE_SECONDS}


# -- telemetry: nothing is sent anywhere ------------------------------------------------------


@router.post("/statistics", status_code=204, dependencies=[AUTHENTICATED])
async def post_stats_events(body: StatsEvents) -> Response:
    """lakeFS's UI reports usage events here; they are checked and dropped."""
    return Response(status_code=204)


@router.get("/usage-report/summary", dependencies=[require(Permission.READ_REPO)])
def get_usage_report_summary(lake: LakeDep) -> dict[str, Any]:
    """lakeFS ``InstallationUsageReport``: this lake's id, and no monthly reports (no usage is
    recorded, nor sent)."""
    from lakectl.core import identity

    found = identity.get(lake.kv)
    return {"installation_id": found.lake_id if found else "", "reports": []}


@public.post("/setup_comm_prefs", dependencies=[PUBLIC])
async def setup_comm_prefs(body: CommPrefs) -> Response:
    """lakeFS's set-up asks for an e-mail address and newsletter choices: they are checked and
    not kept (``GET /setup_lakefs`` never reports them missing)."""
    return Response(status_code=200)
