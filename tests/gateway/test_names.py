"""Object names that would drive a terminal are refused wherever an object is created: REST
upload and copy, S3 put, copy and multipart upload; objects stored earlier stay addressable."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Gateway

BAD = ["esc\x1b[2J.csv", "bidi\u202egpj.exe", "c1\x9b31m", "line\u2028break", "tab\there"]


@pytest.mark.parametrize("name", BAD, ids=repr)
def test_rest_upload_and_copy_refuse_the_name(gateway: Gateway, bucket: str, name: str) -> None:
    with gateway.rest() as rest:
        objects = f"/repositories/{bucket}/branches/main/objects"
        r = rest.post(objects, params={"path": f"in/{name}"}, content=b"x")
        assert r.status_code == 400 and r.json()["code"] == "invalid_path", r.text
        assert rest.post(objects, params={"path": "in/ok.csv"}, content=b"x").status_code == 201
        r = rest.post(f"{objects}/copy", params={"dest_path": f"in/{name}"}, json={"src_path": "in/ok.csv"})
        assert r.status_code == 400 and r.json()["code"] == "invalid_path", r.text
        listed = rest.get(f"/repositories/{bucket}/refs/main/objects/ls", params={"prefix": "in/"}).json()
        assert [o["path"] for o in listed["results"]] == ["in/ok.csv"]


@pytest.mark.parametrize("name", BAD, ids=repr)
def test_s3_put_copy_and_multipart_refuse_the_name(s3: Any, bucket: str, name: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/in/ok.csv", Body=b"x")
    calls = [
        lambda: s3.put_object(Bucket=bucket, Key=f"main/in/{name}", Body=b"x"),
        lambda: s3.copy_object(
            Bucket=bucket, Key=f"main/in/{name}", CopySource={"Bucket": bucket, "Key": "main/in/ok.csv"}
        ),
        lambda: s3.create_multipart_upload(Bucket=bucket, Key=f"main/in/{name}"),
    ]
    for call in calls:
        with pytest.raises(ClientError) as exc:
            call()
        assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/in/")["Contents"]]
    assert keys == ["main/in/ok.csv"]
