"""lakeFS's external principals through the SDK: binding AWS identities to users, and the AWS IAM
login, checked by moto's STS (its server's STS application on 127.0.0.1) as the server's STS.

moto answers a presigned ``GetCallerIdentity`` without checking its SigV4 signature, and names
every such caller ``arn:aws:sts::123456789012:user/moto`` (it identifies callers by the
``Authorization`` header, which a presigned request has not). So the login tests bind that ARN;
what STS refuses (a bad signature) and the mapping of assumed roles are tested against the
verifier with an HTTP transport that answers as STS does.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import httpx
import lakefs_sdk
import pytest
from botocore.signers import RequestSigner
from lakefs_sdk.exceptions import ApiException

from lakectl.errors import InvalidArgument, StorageError, Unauthenticated
from server.aws_iam import StsLogin, parse_identity_request, principal_ids
from server.config import load_settings
from tests.server.conftest import Live, serve, unique

MOTO_CALLER = "arn:aws:sts::123456789012:user/moto"
"""Whom moto's STS names the signer of any presigned request."""


@pytest.fixture(scope="module")
def sts_endpoint() -> Iterator[str]:
    """moto's STS application on 127.0.0.1 (a free port). Its all-services server cannot route a
    presigned request (no ``Authorization`` header) to STS, so the STS application is served alone."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server(
        "127.0.0.1", 0, create_backend_app("sts"), threaded=True, request_handler=MotoRequestHandler
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(10)


@pytest.fixture(scope="module")
def iam_live(tmp_path_factory: pytest.TempPathFactory, sts_endpoint: str) -> Iterator[Live]:
    """A server whose STS is moto's."""
    env = {"LAKECTL_SERVER_AUTH_EXTERNAL_AWS_AUTH_STS_ENDPOINT": sts_endpoint}
    with serve(load_settings(None, str(tmp_path_factory.mktemp("iam")), environ=env)) as server:
        yield server


def sdk_client(
    live: Live, key: tuple[str, str] | None = None, token: str | None = None
) -> lakefs_sdk.ApiClient:
    key_id, secret = key or (live.key_id, live.secret)
    if token is not None:
        return lakefs_sdk.ApiClient(lakefs_sdk.Configuration(host=live.url, access_token=token))
    return lakefs_sdk.ApiClient(lakefs_sdk.Configuration(host=live.url, username=key_id, password=secret))


@pytest.fixture(scope="module")
def admin(iam_live: Live) -> lakefs_sdk.AuthApi:
    return lakefs_sdk.AuthApi(sdk_client(iam_live))


def aws_session(sts_endpoint: str) -> boto3.Session:
    """An assumed role's session (a session token included), from moto's STS."""
    base = boto3.Session(
        aws_access_key_id="AKIAIOSFODNN7EXAMPLE", aws_secret_access_key="x", region_name="us-east-1"
    )
    creds = base.client("sts", endpoint_url=sts_endpoint).assume_role(
        RoleArn="arn:aws:iam::123456789012:role/Dev", RoleSessionName="john"
    )["Credentials"]
    return boto3.Session(
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        region_name="us-east-1",
    )


def presign(session: boto3.Session, sts_url: str, server_id: str | None, expires: int = 60) -> str:
    """A presigned ``GetCallerIdentity`` URL, as the ``lakefs`` package's ``from_aws_role`` signs it."""
    client = session.client("sts", endpoint_url=sts_url)
    service = client.meta.service_model.service_id
    signer = RequestSigner(service, "us-east-1", "sts", "v4", session.get_credentials(), session.events)
    headers = {"X-LakeFS-Server-ID": server_id} if server_id is not None else {}
    request = {
        "method": "POST",
        "url": f"{sts_url}/?Action=GetCallerIdentity&Version=2011-06-15",
        "body": {},
        "headers": headers,
        "context": {},
    }
    url: str = signer.generate_presigned_url(
        request, region_name="us-east-1", expires_in=expires, operation_name=""
    )
    return url


def identity_request(presigned: str, **overrides: Any) -> dict[str, str]:
    """``identityRequest`` for a presigned URL, as the ``lakefs`` package sends it."""
    url = urlsplit(presigned)
    q = {k: v[0] for k, v in parse_qs(url.query).items()}
    info = {
        "method": "POST",
        "host": url.hostname,
        "region": "us-east-1",
        "action": q["Action"],
        "date": q["X-Amz-Date"],
        "expiration_duration": q["X-Amz-Expires"],
        "access_key_id": q["X-Amz-Credential"].split("/")[0],
        "signature": q["X-Amz-Signature"],
        "signed_headers": q.get("X-Amz-SignedHeaders", "").split(";"),
        "version": q["Version"],
        "algorithm": q["X-Amz-Algorithm"],
        "security_token": q.get("X-Amz-Security-Token"),
        **overrides,
    }
    return {"identity_token": base64.b64encode(json.dumps(info).encode()).decode()}


def login(live: Live, identity: dict[str, str], ttl: int | None = 3600) -> lakefs_sdk.AuthenticationToken:
    anonymous = lakefs_sdk.AuthApi(lakefs_sdk.ApiClient(lakefs_sdk.Configuration(host=live.url)))
    info = lakefs_sdk.ExternalLoginInformation(token_expiration_duration=ttl, identityRequest=identity)
    token: lakefs_sdk.AuthenticationToken = anonymous.external_principal_login(info)
    return token


def refused(call: Any, *args: Any, **kwargs: Any) -> int:
    with pytest.raises(ApiException) as e:
        call(*args, **kwargs)
    status: int = e.value.status
    return status


# -- binding ---------------------------------------------------------------------------------


def test_bind_list_get_and_unbind(admin: lakefs_sdk.AuthApi) -> None:
    ann, bob = unique("ann"), unique("bob")
    for user in (ann, bob):
        admin.create_user(lakefs_sdk.UserCreation(id=user))
    roles = [f"arn:aws:iam::123456789012:role/{unique(r)}" for r in ("a", "b", "c")]
    settings = lakefs_sdk.ExternalPrincipalCreation(settings=[{"team": "data"}])
    created = admin.create_user_external_principal_with_http_info(ann, roles[0], settings)
    assert created.status_code == 201
    for role in roles[1:]:
        admin.create_user_external_principal(ann, role)
    # one user per principal: a second binding is refused, to anyone
    assert refused(admin.create_user_external_principal, bob, roles[0]) == 409
    assert refused(admin.create_user_external_principal, ann, roles[0]) == 409
    assert refused(admin.create_user_external_principal, "no-such-user", unique("arn")) == 404

    got = admin.get_external_principal(roles[0])
    assert (got.id, got.user_id, got.settings) == (roles[0], ann, [{"team": "data"}])
    first = admin.list_user_external_principals(ann, amount=2)
    assert [p.id for p in first.results] == sorted(roles)[:2]
    assert first.pagination.has_more and first.pagination.next_offset == sorted(roles)[1]
    rest = admin.list_user_external_principals(ann, after=first.pagination.next_offset)
    assert [p.id for p in rest.results] == sorted(roles)[2:] and not rest.pagination.has_more
    assert admin.list_user_external_principals(bob).results == []
    prefixed = admin.list_user_external_principals(ann, prefix="arn:aws:iam::123456789012:role/b")
    assert prefixed.pagination.results == 1

    assert admin.delete_user_external_principal_with_http_info(ann, roles[0]).status_code == 204
    assert refused(admin.delete_user_external_principal, ann, roles[0]) == 404
    assert refused(admin.delete_user_external_principal, bob, roles[1]) == 404  # not bob's
    assert refused(admin.get_external_principal, roles[0]) == 404
    admin.create_user_external_principal(bob, roles[0])  # free again
    assert admin.get_external_principal(roles[0]).user_id == bob


def test_deleting_a_user_deletes_its_principals(admin: lakefs_sdk.AuthApi) -> None:
    user, role = unique("gone"), f"arn:aws:iam::123456789012:role/{unique('gone')}"
    admin.create_user(lakefs_sdk.UserCreation(id=user))
    admin.create_user_external_principal(user, role)
    admin.delete_user(user)
    assert refused(admin.get_external_principal, role) == 404
    admin.create_user(lakefs_sdk.UserCreation(id=user))  # the same name again: bound to nothing
    assert admin.list_user_external_principals(user).results == []
    admin.create_user_external_principal(user, role)


def test_a_user_lists_its_own_principals_and_binds_none(iam_live: Live, admin: lakefs_sdk.AuthApi) -> None:
    user, role = unique("self"), f"arn:aws:iam::123456789012:role/{unique('self')}"
    admin.create_user(lakefs_sdk.UserCreation(id=user))
    admin.create_user_external_principal(user, role)
    creds = admin.create_credentials(user)
    own = lakefs_sdk.AuthApi(sdk_client(iam_live, (creds.access_key_id, creds.secret_access_key)))
    assert [p.id for p in own.list_user_external_principals(user).results] == [role]
    assert refused(own.list_user_external_principals, "admin") == 403
    assert refused(own.create_user_external_principal, user, unique("arn:aws:iam::1:role/x")) == 403
    assert refused(own.delete_user_external_principal, user, role) == 403
    assert refused(own.get_external_principal, role) == 403


# -- login -------------------------------------------------------------------------------------


def test_login_as_the_bound_user_with_moto_as_sts(
    iam_live: Live, admin: lakefs_sdk.AuthApi, sts_endpoint: str
) -> None:
    user = unique("iam")
    admin.create_user(lakefs_sdk.UserCreation(id=user))
    admin.create_user_external_principal(user, MOTO_CALLER)
    try:
        presigned = presign(aws_session(sts_endpoint), sts_endpoint, server_id="127.0.0.1")
        before = int(time.time())
        token = login(iam_live, identity_request(presigned), ttl=600)
        assert before + 600 <= token.token_expiration <= int(time.time()) + 600
        me = lakefs_sdk.AuthApi(sdk_client(iam_live, token=token.token)).get_current_user()
        assert me.user.id == user
        # without a lifetime asked: lakeFS's login duration, 7 days
        week = login(iam_live, identity_request(presigned), ttl=None).token_expiration
        assert week >= before + 7 * 24 * 3600
        # unbound since: nobody to log in as
        admin.delete_user_external_principal(user, MOTO_CALLER)
        admin.create_user_external_principal(user, f"arn:aws:iam::123456789012:role/{unique('other')}")
        assert refused(login, iam_live, identity_request(presigned)) == 401
    finally:
        admin.delete_user(user)


def test_login_refuses_other_hosts_and_stale_or_malformed_requests(
    iam_live: Live, admin: lakefs_sdk.AuthApi, sts_endpoint: str
) -> None:
    user = unique("iam")
    admin.create_user(lakefs_sdk.UserCreation(id=user))
    admin.create_user_external_principal(user, MOTO_CALLER)
    try:
        session = aws_session(sts_endpoint)
        # signed for another "STS": never sent there, whatever it would answer
        elsewhere = presign(session, "http://sts.attacker.example:8080", server_id="127.0.0.1")
        assert refused(login, iam_live, identity_request(elsewhere)) == 401
        aws = presign(session, "https://sts.amazonaws.com", server_id="127.0.0.1")
        assert refused(login, iam_live, identity_request(aws)) == 401
        good = presign(session, sts_endpoint, server_id="127.0.0.1")
        assert refused(login, iam_live, identity_request(good, action="AssumeRole")) == 401
        assert refused(login, iam_live, identity_request(good, date="20200101T000000Z")) == 401
        assert refused(login, iam_live, identity_request(good, signed_headers=["host", "x-other"])) == 401
        assert refused(login, iam_live, identity_request(good, signature="not hex")) == 400
        assert refused(login, iam_live, {"identity_token": "%%%"}) == 400
        assert refused(login, iam_live, {"something": "else"}) == 400
        assert refused(login, iam_live, identity_request(good), ttl=-1) == 400
        assert login(iam_live, identity_request(good)).token  # the untouched request logs in
    finally:
        admin.delete_user(user)


def test_login_with_nothing_bound_asks_sts_nothing(live: Live) -> None:
    """The default server (AWS's STS, no principals): refused before any request leaves."""
    assert refused(login, live, _token(host="sts.us-east-1.amazonaws.com")) == 401


# -- the verifier, against an STS stand-in ---------------------------------------------------------


def _token(**overrides: Any) -> dict[str, str]:
    now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    url = (
        "https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15"
        "&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIAIOSFODNN7EXAMPLE%2F"
        f"{now[:8]}%2Fus-east-1%2Fsts%2Faws4_request&X-Amz-Date={now}&X-Amz-Expires=60"
        "&X-Amz-SignedHeaders=host%3Bx-lakefs-server-id&X-Amz-Security-Token=FQoG%2Ftok%3D"
        "&X-Amz-Signature=" + "ab" * 32
    )
    return identity_request(url, **overrides)


def _sts(status: int, body: str, seen: list[httpx.Request]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, content=body.encode())

    return httpx.MockTransport(answer)


IDENTITY = (
    '<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult>'
    "<Arn>arn:aws:sts::111122223333:assumed-role/Dev/john</Arn><UserId>AROA:john</UserId>"
    "<Account>111122223333</Account></GetCallerIdentityResult></GetCallerIdentityResponse>"
)


def test_the_request_sent_to_sts_is_the_one_the_client_signed() -> None:
    seen: list[httpx.Request] = []
    token = _token()
    sts = StsLogin(transport=_sts(200, IDENTITY, seen))
    arn = sts.caller_arn(parse_identity_request(token), "lake.example")
    assert arn == "arn:aws:sts::111122223333:assumed-role/Dev/john"
    (sent,) = seen
    info = json.loads(base64.b64decode(token["identity_token"]))
    query = {k: v[0] for k, v in parse_qs(sent.url.query.decode()).items()}
    assert (sent.method, sent.url.scheme, sent.url.path) == ("POST", "https", "/")
    assert sent.url.host == info["host"]
    assert query == {
        "Action": "GetCallerIdentity",
        "Version": "2011-06-15",
        "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
        "X-Amz-Credential": f"ASIAIOSFODNN7EXAMPLE/{info['date'][:8]}/us-east-1/sts/aws4_request",
        "X-Amz-Date": info["date"],
        "X-Amz-Expires": "60",
        "X-Amz-SignedHeaders": "host;x-lakefs-server-id",
        "X-Amz-Security-Token": "FQoG/tok=",
        "X-Amz-Signature": "ab" * 32,
    }
    assert sent.headers["x-lakefs-server-id"] == "lake.example" and sent.content == b""
    # a configured server id is what is sent, and what must be signed
    seen.clear()
    StsLogin(server_id="lake-prod", transport=_sts(200, IDENTITY, seen)).caller_arn(
        parse_identity_request(token), "lake.example"
    )
    assert seen[0].headers["x-lakefs-server-id"] == "lake-prod"
    unsigned = parse_identity_request(_token(signed_headers=["host"]))
    with pytest.raises(Unauthenticated):
        StsLogin(server_id="lake-prod", transport=_sts(200, IDENTITY, seen)).caller_arn(unsigned, "x")


def test_what_sts_refuses_is_refused() -> None:
    seen: list[httpx.Request] = []
    request = parse_identity_request(_token())
    mismatch = "<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code></Error></ErrorResponse>"
    with pytest.raises(Unauthenticated, match="SignatureDoesNotMatch"):
        StsLogin(transport=_sts(403, mismatch, seen)).caller_arn(request, "x")
    with pytest.raises(StorageError):
        StsLogin(transport=_sts(503, "", seen)).caller_arn(request, "x")
    for body in ("<ListAllMyBucketsResult/>", "not xml", "<GetCallerIdentityResponse/>"):
        with pytest.raises(Unauthenticated):
            StsLogin(transport=_sts(200, body, seen)).caller_arn(request, "x")
    with pytest.raises(StorageError):
        StsLogin("http://127.0.0.1:9").caller_arn(parse_identity_request(_token(host="127.0.0.1")), "x")


def test_only_the_configured_sts_is_asked() -> None:
    seen: list[httpx.Request] = []
    sts = StsLogin("http://127.0.0.1:4566", transport=_sts(200, IDENTITY, seen))
    for host in ("127.0.0.1:4566", "127.0.0.1"):  # Go clients name the port, Python ones do not
        sts.caller_arn(parse_identity_request(_token(host=host)), "x")
        assert str(seen.pop().url).startswith("http://127.0.0.1:4566/?")
    for host in ("127.0.0.1:4567", "sts.amazonaws.com", "localhost"):
        with pytest.raises(Unauthenticated):
            sts.caller_arn(parse_identity_request(_token(host=host)), "x")
    aws = StsLogin(transport=_sts(200, IDENTITY, seen))
    for host in ("sts.amazonaws.com", "sts.us-east-2.amazonaws.com", "sts-fips.us-east-1.amazonaws.com"):
        aws.caller_arn(parse_identity_request(_token(host=host)), "x")
    for host in ("sts.amazonaws.com.evil.example", "evil.example", "sts.amazonaws.com:8443"):
        with pytest.raises((Unauthenticated, InvalidArgument)):
            aws.caller_arn(parse_identity_request(_token(host=host)), "x")
    assert len(seen) == 3  # the AWS hosts only


def test_an_assumed_role_session_logs_in_as_itself_else_as_its_role() -> None:
    assert principal_ids("arn:aws:sts::111122223333:assumed-role/Dev/john@acme.com") == (
        "arn:aws:sts::111122223333:assumed-role/Dev/john@acme.com",
        "arn:aws:sts::111122223333:assumed-role/Dev",
        "arn:aws:iam::111122223333:role/Dev",
    )
    assert principal_ids("arn:aws:iam::111122223333:user/ann") == ("arn:aws:iam::111122223333:user/ann",)


def test_the_sts_endpoint_setting_is_checked() -> None:
    key = "LAKECTL_SERVER_AUTH_EXTERNAL_AWS_AUTH_STS_ENDPOINT"
    assert load_settings(None, "/tmp/x", environ={key: "http://127.0.0.1:4566/"}).aws_iam.sts_endpoint == (
        "http://127.0.0.1:4566"
    )
    assert load_settings(None, "/tmp/x", environ={}).aws_iam.sts_endpoint is None
    for bad in ("sts.amazonaws.com", "ftp://sts", "https://sts.example/path", "http://h:99999"):
        with pytest.raises(InvalidArgument, match="sts_endpoint"):
            load_settings(None, "/tmp/x", environ={key: bad})
