"""KPL aggregated records: the Kinesis Producer Library's record format, decoded without a protobuf library.

The format (https://github.com/awslabs/amazon-kinesis-producer/blob/master/aggregation-format.md, also drawn in
https://github.com/awslabs/kinesis-aggregation) is the 4 magic bytes ``F3 89 9A C2``, a proto2 message ::

    message AggregatedRecord {
      repeated string partition_key_table     = 1;
      repeated string explicit_hash_key_table = 2;
      repeated Record records                 = 3;
    }
    message Record {
      required uint64 partition_key_index     = 1;
      optional uint64 explicit_hash_key_index = 2;
      required bytes  data                    = 3;
      repeated Tag    tags                    = 4;   // Tag: required string key = 1; optional string value = 2
    }

and the 16-byte MD5 of the protobuf bytes. Producers: the KPL (most Java producers) and ``aws_kinesis_agg``.
Readers: the router Lambda (``lambdas.router.handler.parse_kinesis_event``) and the Spark job
(``glue_jobs.events.deaggregate_records``), both before the JSON parse.

Notes
-----
What counts as aggregated is the KCL's test (``AggregatorUtil.deaggregate`` in awslabs/amazon-kinesis-client, and
``aws_kinesis_agg.deaggregator``): the magic, then more than 16 bytes. Anything else is one user record, unchanged.
Where they differ from this module, on purpose:

* A record with the magic whose MD5 does not match, or whose protobuf is malformed (a truncated varint or length,
  a missing required field), is handed on by the KCL unchanged as one user record; for a JSON consumer that is an
  ``unparsable_json`` quarantine with an unreadable reason. Here :func:`unpack` raises :class:`KplError` naming what
  is wrong, and both readers quarantine the whole record once, as ``corrupt_kpl_record`` (never a retry: the same
  bytes would fail again).
* A sub-record whose key index is outside its table makes the KCL log an error and drop the rest of the record;
  here it is a :class:`KplError` too, so nothing is dropped silently.
* The KCL 2.x also drops sub-records whose hash key is outside the shard being read (after a reshard). Nothing
  here reads by shard range (the router routes by position, the Spark job counts every event), so every
  sub-record is kept.

An aggregated record with no sub-records yields none (as in the KCL). Unknown protobuf fields are skipped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from geokernel.contracts.errors import ContractError

#: The first 4 bytes of every KPL aggregated record.
KPL_MAGIC = b"\xf3\x89\x9a\xc2"
#: Length of the MD5 digest that ends an aggregated record.
KPL_DIGEST_SIZE = 16
#: ``source`` of a sub-record: ``<parent source><SUB_RECORD_MARK><index>`` (index from 0, the KCL's sub-sequence).
SUB_RECORD_MARK = "/sub="

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class KplError(ContractError):
    """A record with the KPL magic that does not decode: bad MD5, malformed protobuf or a key index out of range."""


@dataclass(frozen=True, slots=True)
class UserRecord:
    """One user record of an aggregated record: its partition key, explicit hash key (or None) and payload."""

    partition_key: str
    explicit_hash_key: str | None
    data: bytes


def is_aggregated(data: bytes) -> bool:
    """True when ``data`` is a KPL aggregated record by the KCL's test: the magic, then more than 16 bytes."""
    return data[:4] == KPL_MAGIC and len(data) > len(KPL_MAGIC) + KPL_DIGEST_SIZE


def sub_record_source(parent: str, index: int) -> str:
    """The ``source`` of sub-record ``index`` of the record from ``parent`` (``<parent>/sub=<index>``)."""
    return f"{parent}{SUB_RECORD_MARK}{index}"


def deaggregate(data: bytes, where: str = "record") -> tuple[bytes, ...]:
    """The user payloads of ``data``; a record that is not aggregated is returned unchanged as a 1-tuple.

    Raises
    ------
    KplError
        ``data`` has the magic but does not decode (see the module notes); the message names ``where``.
    """
    if not is_aggregated(data):
        return (data,)
    _keys, _hash_keys, records = _decode(data, where)
    return tuple(r[2] for r in records)


def unpack(data: bytes, where: str = "record") -> tuple[UserRecord, ...]:
    """Decode an aggregated record into its user records, in order.

    Parameters
    ----------
    data : bytes
        The Kinesis record's payload.
    where : str
        Where it came from, for error messages (``<stream>/<shard>/<seq>``).

    Raises
    ------
    KplError
        ``data`` is not aggregated (:func:`is_aggregated`), its MD5 does not match, its protobuf is malformed or a
        key index is outside its table.
    """
    if not is_aggregated(data):
        raise KplError(f"{where}: not a KPL aggregated record (magic {KPL_MAGIC.hex()!r} then more than "
                       f"{KPL_DIGEST_SIZE} bytes), starts {data[:8].hex()!r} and is {len(data)} bytes long")
    keys, hash_keys, records = _decode(data, where)
    return tuple(UserRecord(keys[pk], None if ehk is None else hash_keys[ehk], payload)
                 for pk, ehk, payload in records)


def _decode(data: bytes, where: str) -> tuple[list[str], list[str], list[tuple[int, int | None, bytes]]]:
    """The key tables and ``(partition_key_index, explicit_hash_key_index, data)`` records, indices checked."""
    body, digest = data[len(KPL_MAGIC):-KPL_DIGEST_SIZE], data[-KPL_DIGEST_SIZE:]
    actual = hashlib.md5(body, usedforsecurity=False).digest()
    if actual != digest:
        raise KplError(f"{where}: KPL aggregated record's MD5 {digest.hex()!r} does not match its "
                       f"{len(body)} protobuf bytes (MD5 {actual.hex()!r})")
    keys: list[str] = []
    hash_keys: list[str] = []
    records: list[tuple[int, int | None, bytes]] = []
    starts: list[int] = []
    for field, wire, a, b, at in _fields(body, 0, len(body), where):
        if field in (1, 2, 3) and wire != _LEN:
            raise KplError(f"{where}: KPL AggregatedRecord field {field} at byte {at} has wire type {wire}, "
                           "expected 2 (length-delimited)")
        if field == 3:
            records.append(_record(body, a, b, where))
            starts.append(at)
        elif field in (1, 2):
            (keys if field == 1 else hash_keys).append(body[a:b].decode("utf-8", errors="replace"))
    for i, (pk, ehk, _) in enumerate(records):
        if pk >= len(keys):
            raise KplError(f"{where}: KPL sub-record {i} (byte {starts[i]}) has partition_key_index {pk}, "
                           f"but the partition key table has {len(keys)} entries")
        if ehk is not None and ehk >= len(hash_keys):
            raise KplError(f"{where}: KPL sub-record {i} (byte {starts[i]}) has explicit_hash_key_index {ehk}, "
                           f"but the explicit hash key table has {len(hash_keys)} entries")
    return keys, hash_keys, records


_RECORD_WIRE = {1: _VARINT, 2: _VARINT, 3: _LEN, 4: _LEN}


def _record(buf: bytes, start: int, end: int, where: str) -> tuple[int, int | None, bytes]:
    """``(partition_key_index, explicit_hash_key_index or None, data)`` of the Record in ``buf[start:end]``."""
    if end - start >= 4 and buf[start] == 0x08 and buf[start + 1] < 0x80 and buf[start + 2] == 0x1A:
        # the common layout (the KPL's and aws_kinesis_agg's): a one-byte partition_key_index, then data, nothing else
        n, pos = _varint(buf, start + 3, end, where)
        if pos + n == end:
            return buf[start + 1], None, buf[pos:end]
    pk_index: int | None = None
    ehk_index: int | None = None
    data: bytes | None = None
    for field, wire, a, b, at in _fields(buf, start, end, where):
        expected = _RECORD_WIRE.get(field, wire)
        if wire != expected:
            raise KplError(f"{where}: KPL Record field {field} at byte {at} has wire type {wire}, expected {expected}")
        if field == 3:
            data = buf[a:b]
        elif field == 1:
            pk_index = a
        elif field == 2:
            ehk_index = a
        elif field == 4 and not any(f[0] == 1 for f in _fields(buf, a, b, where)):
            raise KplError(f"{where}: KPL Tag at byte {at} has no key (field 1, required)")
    if pk_index is None or data is None:
        missing = [n for n, v in (("partition_key_index", pk_index), ("data", data)) if v is None]
        raise KplError(f"{where}: KPL Record at byte {start} lacks required field(s) {missing!r}")
    return pk_index, ehk_index, data


def _fields(buf: bytes, pos: int, end: int, where: str) -> list[tuple[int, int, int, int, int]]:
    """The fields of the protobuf message in ``buf[pos:end]``: ``(number, wire type, a, b, byte offset)``.

    ``a`` is the value of a varint or fixed-width field (``b`` 0); a length-delimited field's bytes are
    ``buf[a:b]``. Single-byte varints (tags, small indices and lengths) are read inline.
    """
    out: list[tuple[int, int, int, int, int]] = []
    while pos < end:
        at = pos
        tag = buf[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _varint(buf, pos, end, where)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise KplError(f"{where}: KPL protobuf has field number 0 at byte {at}")
        if wire in (_LEN, _VARINT):
            if pos < end and buf[pos] < 0x80:
                n = buf[pos]
                pos += 1
            else:
                n, pos = _varint(buf, pos, end, where)
            if wire == _VARINT:
                out.append((field, wire, n, 0, at))
                continue
            if pos + n > end:
                raise KplError(f"{where}: KPL protobuf field {field} at byte {at} declares {n} bytes, "
                               f"only {end - pos} remain")
            out.append((field, wire, pos, pos + n, at))
            pos += n
        elif wire in (_I64, _I32):
            width = 8 if wire == _I64 else 4
            if pos + width > end:
                raise KplError(f"{where}: KPL protobuf field {field} at byte {at} is truncated ({width}-byte value)")
            out.append((field, wire, int.from_bytes(buf[pos:pos + width], "little"), 0, at))
            pos += width
        else:
            raise KplError(f"{where}: KPL protobuf field {field} at byte {at} has unsupported wire type {wire}")
    return out


def _varint(buf: bytes, pos: int, end: int, where: str) -> tuple[int, int]:
    """The base-128 varint at ``buf[pos]`` and the position after it."""
    value = shift = 0
    start = pos
    while pos < end and shift < 64:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise KplError(f"{where}: KPL protobuf varint at byte {start} is truncated or longer than 10 bytes")
