"""Test helper: an in-process moto S3 server on 127.0.0.1 and fresh S3 stores on it.

``tests/conftest.py`` starts one :class:`MotoS3` per test session (fixture ``s3_server``) and
uses :meth:`MotoS3.new_store` for the ``object_store`` fixture. Every client made here gets the
dummy :data:`CREDENTIALS` explicitly, so tests never pick up (or send) real AWS credentials, and
every request goes to the loopback server. Moto keeps its state in this process; each store gets
its own bucket and prefix, and :meth:`MotoS3.drop_bucket` empties and removes it afterwards.

Moto enforces S3's 5 MiB minimum for every part of a multipart upload except the last
(``S3_UPLOAD_PART_MIN_SIZE``), so multipart tests really move 5 MiB parts.
"""

from __future__ import annotations

import logging
import uuid

import boto3
from botocore.config import Config
from moto.server import ThreadedMotoServer

from hummock.object_store import S3ObjectStore

CREDENTIALS = {"access_key_id": "hummock-test-key", "secret_access_key": "hummock-test-secret"}
REGION = "us-east-1"
TEST_PART_SIZE = 5 * 1024 * 1024  # the smallest part S3 (and moto) accept


class MotoS3:
    """A moto server bound to an ephemeral loopback port; ``endpoint_url`` is set by start()."""

    def __init__(self):
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint_url: str | None = None
        self._admin = None

    def start(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
        self._server.stop()

    def admin_client(self):
        """A plain boto3 client on the server, for checks behind the store's back (shared)."""
        if self._admin is None:
            self._admin = boto3.session.Session(
                aws_access_key_id=CREDENTIALS["access_key_id"],
                aws_secret_access_key=CREDENTIALS["secret_access_key"], region_name=REGION,
            ).client("s3", endpoint_url=self.endpoint_url,
                     config=Config(s3={"addressing_style": "path"}))
        return self._admin

    def new_store(self, bucket: str | None = None, prefix: str | None = None,
                  **options) -> S3ObjectStore:
        """A store on a fresh bucket (created by the store) under a fresh two-segment prefix."""
        settings = dict(endpoint_url=self.endpoint_url, region=REGION, **CREDENTIALS,
                        part_size=TEST_PART_SIZE, retry_base_delay=0.001,
                        create_bucket_if_missing=True)
        settings.update(options)
        return S3ObjectStore(bucket or new_bucket_name(),
                             f"run-{uuid.uuid4().hex[:8]}/data" if prefix is None else prefix,
                             **settings)

    def drop_bucket(self, bucket: str) -> None:
        """Abort pending multipart uploads, delete every object, then the bucket."""
        client = self.admin_client()
        for upload in client.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
            client.abort_multipart_upload(Bucket=bucket, Key=upload["Key"],
                                          UploadId=upload["UploadId"])
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
            if keys:
                client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
        client.delete_bucket(Bucket=bucket)


def new_bucket_name() -> str:
    return f"hummock-test-{uuid.uuid4().hex[:16]}"
