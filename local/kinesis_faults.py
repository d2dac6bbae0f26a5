"""The local AWS's Kinesis faults: refuse a share of whole calls, or fail a share of the records of each put.

moto never throttles and never fails single records. Real Kinesis answers a shard over its limits with
``ProvisionedThroughputExceededException``: a whole call refused (HTTP 400), or, in ``PutRecords``, single records
failed while the rest of the request is written ("A single record failure does not stop the processing of subsequent
records", https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecords.html). :class:`KinesisThrottle` is
the moto server's hook for both (``local.aws.SerialMotoServer``), started by the ``stream-throttle`` and
``put-partial`` faults (:mod:`local.faults.stream_throttle`). It runs inside the server's lock, so its counters need
no lock of their own.
"""

from __future__ import annotations

import io
import json
import random
import time
from collections.abc import Callable
from typing import Any

THROTTLED_ACTIONS = ("Kinesis_20131202.PutRecords", "Kinesis_20131202.GetRecords")


class KinesisThrottle:
    """While on, refuse ``share`` of the PutRecords/GetRecords calls on matching streams (``partial=False``: AWS FIS
    injects the same error into a share of requests,
    https://docs.aws.amazon.com/streams/latest/dev/kinesis-fis-provisioned-throughput.html), or fail ``share`` of the
    records of each PutRecords (``partial=True``) while the others are written.

    :meth:`refuse` returns the error's JSON body for a refused call, else None; :meth:`splits` says whether a request
    is a put to split, and :meth:`put_partly` answers it.
    """

    def __init__(self) -> None:
        self.until = 0.0
        self.share = 0.0
        self.partial = False
        self.stream_prefix = ""
        self.refused = 0
        self.passed = 0
        self.first_refused_at: float | None = None
        self.last_refused_at: float | None = None
        self._rng = random.Random(0)

    def start(self, stream_prefix: str, share: float, duration_s: float, seed: int = 0, *,
              partial: bool = False) -> None:
        """For ``duration_s`` from now, refuse ``share`` (0-1) of the calls on streams named ``stream_prefix...``, or
        with ``partial`` fail that share of the records of each PutRecords to them (counted per record)."""
        if not 0.0 < share <= 1.0:
            raise ValueError(f"throttle share must be in (0, 1], got {share!r}")
        self.stream_prefix, self.share, self._rng = stream_prefix, share, random.Random(seed)
        self.partial = partial
        self.first_refused_at = self.last_refused_at = None  # of this start (the counts go on: a fault takes deltas)
        self.until = time.time() + duration_s

    def _on(self, environ: dict[str, Any]) -> bool:
        return time.time() < self.until and environ.get("HTTP_X_AMZ_TARGET") in THROTTLED_ACTIONS

    def splits(self, environ: dict[str, Any]) -> bool:
        """True for a PutRecords to a matching stream while partial failures are on."""
        if not (self.partial and self._on(environ)) or environ.get("HTTP_X_AMZ_TARGET") != THROTTLED_ACTIONS[0]:
            return False
        return _stream_of(_body(environ)).startswith(self.stream_prefix)

    def put_partly(self, environ: dict[str, Any], app: Callable[[dict[str, Any], Callable[..., Any]], list[bytes]],
                   start_response: Callable[..., Any],
                   resign: Callable[[dict[str, Any], bytes], None] | None = None) -> list[bytes]:
        """Write the records not picked to fail through ``app`` (moto), and answer as Kinesis does: every record's
        result in request order, the failed ones with ``ErrorCode`` (``FailedRecordCount`` counts them).

        The request moto sees carries fewer records than the one its caller signed: with IAM enforced, ``resign``
        signs it again as the same principal (:meth:`local.iam.gate.IamGate.resign`), else moto's access control would
        refuse the signature."""
        doc = json.loads(_body(environ) or b"{}")
        records = list(doc.get("Records", []))
        fail = [self._rng.random() < self.share for _ in records]
        kept = [r for r, f in zip(records, fail, strict=True) if not f]
        written: list[dict[str, Any]] = []
        status = "200 OK"
        if kept:
            body = json.dumps({**doc, "Records": kept}).encode()
            environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
            if resign is not None:
                resign(environ, body)
            seen: list[str] = []
            chunks = app(environ, lambda s, h, exc=None: seen.append(s))
            status = seen[0] if seen else "500 INTERNAL SERVER ERROR"
            if not status.startswith("200"):
                start_response(status, [("Content-Type", "application/x-amz-json-1.1")])
                return chunks
            written = list(json.loads(b"".join(chunks)).get("Records", []))
        stream = _stream_of(_body(environ))
        now = time.time()
        results, it = [], iter(written)
        for failed in fail:
            if failed:
                self.refused += 1
                self.first_refused_at = self.first_refused_at or now
                self.last_refused_at = now
                results.append({"ErrorCode": "ProvisionedThroughputExceededException",
                                "ErrorMessage": f"Rate exceeded for shard in stream {stream} under account 123456789012."})
            else:
                self.passed += 1
                results.append(next(it))
        answer = json.dumps({"FailedRecordCount": sum(fail), "Records": results}).encode()
        start_response("200 OK", [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(answer)))])
        return [answer]

    def refuse(self, environ: dict[str, Any]) -> bytes | None:
        if self.partial or not self._on(environ):
            return None
        stream = _stream_of(_body(environ))
        if not stream.startswith(self.stream_prefix):
            return None
        if self._rng.random() >= self.share:
            self.passed += 1
            return None
        now = time.time()
        self.refused += 1
        self.first_refused_at = self.first_refused_at or now
        self.last_refused_at = now
        message = f"Rate exceeded for stream {stream} under account 123456789012."
        return json.dumps({"__type": "ProvisionedThroughputExceededException", "message": message}).encode()


def _body(environ: dict[str, Any]) -> bytes:
    """The request's body, left readable again for moto."""
    body: bytes = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    environ["wsgi.input"] = io.BytesIO(body)
    return body


def _stream_of(body: bytes) -> str:
    """The stream a PutRecords/GetRecords request names (GetRecords: inside moto's shard iterator)."""
    try:
        doc = json.loads(body or b"{}")
    except ValueError:
        return ""
    if doc.get("StreamName"):
        return str(doc["StreamName"])
    if doc.get("StreamARN"):
        return str(doc["StreamARN"]).rsplit("/", 1)[-1]
    if doc.get("ShardIterator"):
        from moto.kinesis.utils import decompose_shard_iterator

        try:
            return decompose_shard_iterator(str(doc["ShardIterator"]))[0]
        except (ValueError, IndexError):
            return ""
    return ""
