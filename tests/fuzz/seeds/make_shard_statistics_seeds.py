#!/usr/bin/python3
"""Writes the seed corpus of shard_statistics_fuzzer: shard statistics files
(core/pipeline/shard_statistics_io.h) for K = 4 with damp: auto's split and
AWQ's sums, a calibration shard and a held-out one. Run from the repository
root; the files are committed."""
import json
import os
import struct

K = 4
TRI = K * (K + 1) // 2
OUT = "tests/fuzz/seeds/shard_statistics"


def triangle(scale):
    # Lower triangle of a positive definite matrix, row by row.
    values = []
    for r in range(K):
        for c in range(r + 1):
            values.append(scale * (4.0 if r == c else 0.5))
    return values


def write(name, tensors, metadata):
    header = {"__metadata__": metadata}
    data = b""
    for tname, dtype, values in tensors:
        fmt = "<%d%s" % (len(values), "f" if dtype == "F32" else "d")
        raw = struct.pack(fmt, *values)
        header[tname] = {"dtype": dtype, "shape": [len(values)],
                         "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


os.makedirs(OUT, exist_ok=True)
write("calibration.safetensors",
      [("calibration", "F32", triangle(3.0)),
       ("split.train", "F32", triangle(2.0)),
       ("split.validation", "F32", triangle(1.0)),
       ("mean_abs.sum", "F64", [1.0, 2.0, 3.0, 4.0])],
      {"format": "quant-shard-statistics/1", "k": "4",
       "calibration_tokens": "12", "heldout_tokens": "0",
       "split.first_token": "16", "split.next_token": "28",
       "split.train_tokens": "9", "split.validation_tokens": "3",
       "split.validation_fraction": "0.25", "mean_abs.tokens": "12"})
write("heldout.safetensors",
      [("heldout", "F32", triangle(1.5)),
       ("mean_abs.sum", "F64", [0.0] * K)],
      {"format": "quant-shard-statistics/1", "k": "4",
       "calibration_tokens": "0", "heldout_tokens": "7",
       "split.first_token": "0", "split.next_token": "0",
       "split.train_tokens": "0", "split.validation_tokens": "0",
       "split.validation_fraction": "0.25", "mean_abs.tokens": "0"})
