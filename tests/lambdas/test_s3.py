"""lambdas.runtime.s3.SpecStore: parsed specs are cached, at most SPEC_CACHE of them (a large spec is ~84 MB parsed)."""

from __future__ import annotations

from lambdas.runtime.s3 import SPEC_CACHE, SpecStore
from tests.lambdas.conftest import Aws, make_spec


def test_the_store_keeps_the_most_recently_used_specs_only(aws: Aws) -> None:
    # GIVEN four published specs and a fresh store (a new Lambda container) that counts its reads of S3
    for v in range(1, 5):
        aws.specs.put_new(make_spec(v))
    store = SpecStore(aws.clients.s3, aws.cfg.specs_bucket)
    reads: list[str] = []
    aws.clients.s3.meta.events.register("provide-client-params.s3.GetObject", lambda params, **kw: reads.append(params["Key"]))
    # WHEN v1..v4 are read, then v4 and v3 again, then v1
    for v in (1, 2, 3, 4):
        store.get(f"specs/v{v:08d}.json")
    before = len(reads)
    store.get("specs/v00000004.json")
    store.get("specs/v00000003.json")
    cached = len(reads) == before
    store.get("specs/v00000001.json")
    # THEN the recent ones came from the cache, and v1 (the least recently used, beyond SPEC_CACHE) was read again
    assert SPEC_CACHE == 3 and before == 4 and cached
    assert reads[-1] == "specs/v00000001.json" and len(reads) == 5
