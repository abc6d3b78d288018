"""What an offline wandb run recorded, read from its own file (``offline-run-*/run-<id>.wandb``, which `wandb sync`
uploads): wandb's records, protobuf messages in LevelDB's log format (32 KiB blocks of chunks, each a 7-byte header:
crc32, length, kind -- full, first, middle or last) after a 7-byte file header (``:W&B``, magic, version)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK, HEADER = 32768, 7
FULL, LAST = 1, 4


def records(run: Path) -> list:
    """Every record of the offline run folder ``run``, in order (wandb.proto's Record)."""
    from wandb.proto import wandb_internal_pb2

    (path,) = run.glob("run-*.wandb")
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a wandb run file"
    found, chunks, at = [], b"", HEADER
    while at + HEADER <= len(data):
        left = BLOCK - at % BLOCK
        _, length, kind = struct.unpack("<IHB", data[at : at + HEADER])
        if left < HEADER or (length == 0 and kind == 0):  # the block's zero-filled tail
            at += left
            continue
        chunks += data[at + HEADER : at + HEADER + length]
        at += HEADER + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunks)
            found.append(record)
            chunks = b""
    return found


def of_kind(run: Path, kind: str) -> list:
    return [getattr(r, kind) for r in records(run) if r.WhichOneof("record_type") == kind]


def config(run: Path) -> dict:
    """The run's config, its updates applied in order (wandb's own ``_wandb`` entry left out)."""
    values = {}
    for item in [u for r in of_kind(run, "run") for u in r.config.update] + [
        u for c in of_kind(run, "config") for u in c.update
    ]:
        values[item.key] = json.loads(item.value_json)
    values.pop("_wandb", None)
    return values


def summary(run: Path) -> dict:
    """The run's summary: its top-level keys, the last value each was given."""
    return {u.key: json.loads(u.value_json) for s in of_kind(run, "summary") for u in s.update if u.key}
