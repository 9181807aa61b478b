"""Store locations for the relational-table tests: one opener per kind (memory, local, S3).

``opener(kind, tmp_path, request)`` returns a zero-argument function that opens (and after a
close, reopens) one HummockStorage location of that kind (``location`` gives its URL and
options, e.g. for a read-only opener); S3 starts the session's moto server
only when an S3 case runs. Small shared buffers make spills happen in small tests.
"""

import itertools
import uuid

from hummock import HummockStorage, StorageOptions

OPTIONS = StorageOptions(shared_buffer_capacity=256 * 1024, block_size=1024, target_sst_size=16 * 1024,
                         block_cache_capacity=1 << 20, meta_cache_capacity=1 << 20, compactor="none")
_counter = itertools.count()


def opener(kind: str, tmp_path, request, options: StorageOptions = OPTIONS):
    url, options = location(kind, tmp_path, request, options)
    return lambda: HummockStorage.open(url, options)


def location(kind: str, tmp_path, request, options: StorageOptions = OPTIONS):
    """``(url, options)`` of a new, empty store location of ``kind``."""
    if kind == "memory":
        url = f"memory://rel-{uuid.uuid4().hex[:8]}"
    elif kind == "local":
        url = str(tmp_path / f"store-{next(_counter)}")
    else:
        from s3_server import CREDENTIALS, REGION, new_bucket_name
        server = request.getfixturevalue("s3_server")
        bucket = new_bucket_name()
        server.admin_client().create_bucket(Bucket=bucket)
        options = options.replace(s3_access_key_id=CREDENTIALS["access_key_id"],
                                  s3_secret_access_key=CREDENTIALS["secret_access_key"])
        url = f"s3://{bucket}/rel?endpoint={server.endpoint_url}&region={REGION}"
    return url, options
