#!/usr/bin/python3
"""Writes .npy files with NumPy itself, so ReadNpy is checked against the
real writer rather than against our own idea of the format.

Values follow formulas the C++ test recomputes: element i (C order) of each
array is (i - 2) * 0.25.

Run: /usr/bin/python3 tests/io/testdata/make_npy_fixtures.py
"""
import os

import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "npy")


def values(shape, dtype):
    n = int(np.prod(shape, dtype=np.int64))
    return ((np.arange(n, dtype=np.float64) - 2) * 0.25).astype(dtype).reshape(shape)


def save(name, array, version=None):
    path = os.path.join(HERE, name)
    with open(path, "wb") as f:
        np.lib.format.write_array(f, array, version=version, allow_pickle=False)


def main():
    os.makedirs(HERE, exist_ok=True)
    save("f32_2x3.npy", values((2, 3), "<f4"))
    save("f32_scalar.npy", values((), "<f4"))
    save("f32_5.npy", values((5,), "<f4"))
    save("f32_0x3.npy", values((0, 3), "<f4"))
    save("f16_2x1x3.npy", values((2, 1, 3), "<f2"))
    save("f32_4_v2.npy", values((4,), "<f4"), version=(2, 0))
    save("f32_4_v3.npy", values((4,), "<f4"), version=(3, 0))
    # Rejected: column-major, big-endian, float64.
    save("reject_fortran.npy", np.asfortranarray(values((2, 3), "<f4")))
    save("reject_big_endian.npy", values((3,), ">f4"))
    save("reject_f8.npy", values((3,), "<f8"))


if __name__ == "__main__":
    main()
