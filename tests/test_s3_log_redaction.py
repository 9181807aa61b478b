"""Logs never hold S3 credentials (docs/object_store.md), even with botocore's DEBUG logging on.

botocore logs every signed request at DEBUG: the canonical request (with the session token), the
signature, and the prepared request's headers (Authorization, with the access key id, and
X-Amz-Security-Token). Creating an ``S3ObjectStore`` installs a filter that rewrites those
records. Checked end to end against the moto server, and on the redaction function itself.
"""

from __future__ import annotations

import logging

import pytest

from hummock.object_store import ObjectNotFoundError
from hummock.object_store.s3 import redact_credentials

ACCESS_KEY_ID = "ASIAHUMMOCKTEST7KEY1"        # shaped like a real temporary key id
PLAIN_KEY_ID = "hummock-plain-key-id"          # an S3-compatible service's free-form key id
SECRET = "hummock-secret-never-logged"
TOKEN = "IQoJb3JpZ2luX2VjEHUMMOCKSESSIONTOKEN/with+base64="


@pytest.mark.parametrize("key_id", [ACCESS_KEY_ID, PLAIN_KEY_ID], ids=["aws-shaped", "free-form"])
def test_debug_logs_of_s3_requests_hold_no_credentials(s3_server, caplog, key_id):
    store = s3_server.new_store(access_key_id=key_id, secret_access_key=SECRET, session_token=TOKEN)
    try:
        with caplog.at_level(logging.DEBUG):
            store.upload("a/b", b"payload")
            assert store.read("a/b", 1, 4) == b"ayl"
            assert store.upload_if_absent("a/c", b"x")
            assert [m.path for m in store.list("a/")] == ["a/b", "a/c"]
            store.delete(["a/b", "a/c"])
            with pytest.raises(ObjectNotFoundError):
                store.read("a/b")
    finally:
        store.close()
        s3_server.drop_bucket(store.bucket)
    botocore = [r for r in caplog.records if r.name.startswith("botocore")]
    assert any("Authorization" in r.getMessage() for r in botocore), "DEBUG logging was not on"
    assert any("x-amz-security-token" in r.getMessage().lower() for r in botocore)
    text = "\n".join(r.getMessage() for r in caplog.records) + caplog.text
    for secret in (key_id, SECRET, TOKEN, TOKEN.split("/")[0]):
        assert secret not in text
    assert "'Authorization': <redacted>" in text and "x-amz-security-token:<redacted>" in text


def test_records_with_arguments_are_redacted(s3_server, caplog):
    store = s3_server.new_store()   # installs the filter
    store.close()
    s3_server.drop_bucket(store.bucket)
    with caplog.at_level(logging.DEBUG, logger="botocore.endpoint"):
        logging.getLogger("botocore.endpoint").debug("Sending %s", {"X-Amz-Security-Token": TOKEN.encode()})
    (record,) = [r for r in caplog.records if r.name == "botocore.endpoint"]
    assert record.getMessage() == "Sending {'X-Amz-Security-Token': <redacted>}"


@pytest.mark.parametrize("text, expected", [
    ("headers={'Authorization': b'AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/"
     "s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc', 'Host': b'h'}",
     "headers={'Authorization': <redacted>, 'Host': b'h'}"),
    ("x-amz-date:20260101T000000Z\nx-amz-security-token:FQoGZXIvYXdz+/Tok=\n\nhost;x-amz-security-token",
     "x-amz-date:20260101T000000Z\nx-amz-security-token:<redacted>\n\nhost;x-amz-security-token"),
    ("GET /b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=free-key%2F20260101%2Fus-east-1%2Fs3"
     "%2Faws4_request&X-Amz-Security-Token=FQo%2Btok&X-Amz-Signature=f00d HTTP/1.1",
     "GET /b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=<redacted>&X-Amz-Security-Token="
     "<redacted>&X-Amz-Signature=<redacted> HTTP/1.1"),
    ("Authorization: AWS4-HMAC-SHA256 Credential=free-key/20260101/us-east-1/s3/aws4_request",
     "Authorization: <redacted> Credential=<redacted>"),
    ("Signature:\n0123abcd", "Signature:\n<redacted>"),
    ("key id AKIAIOSFODNN7EXAMPLE in passing", "key id <redacted> in passing"),
    ("Found credentials in environment variables.", "Found credentials in environment variables."),
    ("Response headers: {'x-amz-request-id': 'A1', 'ETag': '\"e\"'}",
     "Response headers: {'x-amz-request-id': 'A1', 'ETag': '\"e\"'}"),
])
def test_redact_credentials(text, expected):
    assert redact_credentials(text) == expected
