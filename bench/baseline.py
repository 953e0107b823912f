#!/usr/bin/python3
"""numpy baseline for `make bench`: the comparison script users write today.

Compares two dump trees (directories of .npy files, or of .safetensors
files) tensor by tensor, pairing equal names, and computes per cell what
`tbisect check` reports: rel_l2, cosine, max_abs, mean_abs, the allclose
fraction and the per-position rel_l2 with the first bad position, and for
the logits (lm_head) the mean per-position KL(ref||cand) of the softmaxes.  Written
the way a competent numpy user would: np.load(mmap_mode='r') (np.memmap for
safetensors), vectorised, in chunks of rows so memory stays bounded, sums
in float64 (--f32: in float32, faster and less exact, as a less careful
user would).  bfloat16 .npy arrives as raw '<V2': it is viewed as uint16
and shifted into float32.

    baseline.py [--f32] [--json OUT] [--atol A] [--rtol R] [--diverge D] REF CAND
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

CHUNK_ELEMS = 1 << 20  # elements per chunk (8 MB in float64)

ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}


def load_safetensors(path, out):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        shape = tuple(info["shape"])
        arr = np.memmap(path, dtype=ST_DTYPES[info["dtype"]], mode="r", offset=8 + n + start, shape=shape)
        out[name] = (arr, info["dtype"] == "BF16")


def load_tree(root):
    """name -> (array, is_bf16), arrays memory-mapped."""
    out = {}
    for dirpath, _, files in os.walk(root):
        manifest = {}
        if "dtypes.json" in files:
            with open(os.path.join(dirpath, "dtypes.json")) as f:
                manifest = json.load(f)
        for fn in sorted(files):
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, root)
            if fn.endswith(".npy"):
                arr = np.load(path, mmap_mode="r")
                bf16 = arr.dtype.kind == "V" and arr.dtype.itemsize == 2
                if bf16 and manifest.get(fn, manifest.get("*")) not in ("bfloat16", "bf16"):
                    sys.exit(f"baseline: {path}: <V2 data without a bfloat16 manifest")
                out[rel[:-4].replace(os.sep, ".")] = (arr, bf16)
            elif fn.endswith(".safetensors"):
                load_safetensors(path, out)
    return out


def widen(a, bf16, dtype):
    if bf16:
        a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return a.astype(dtype, copy=False)


def compare(ref, cand, atol, rtol, diverge, dtype):
    (r_all, r_bf), (c_all, c_bf) = ref, cand
    shape = r_all.shape
    while len(shape) > 1 and shape[0] == 1:
        shape = shape[1:]
    h = shape[-1] if shape else 1
    r_all = r_all.reshape(-1, h)
    c_all = c_all.reshape(-1, h)
    rows = r_all.shape[0]
    step = max(1, CHUNK_ELEMS // h)
    pos = np.zeros((4, rows))  # per-row sums: d.d, r.r, c.c, r.c
    max_abs = 0.0
    sad = 0.0
    close = 0
    for s in range(0, rows, step):
        r = widen(r_all[s:s + step], r_bf, dtype)
        c = widen(c_all[s:s + step], c_bf, dtype)
        d = c - r
        pos[0, s:s + step] = np.einsum("ij,ij->i", d, d)
        pos[1, s:s + step] = np.einsum("ij,ij->i", r, r)
        pos[2, s:s + step] = np.einsum("ij,ij->i", c, c)
        pos[3, s:s + step] = np.einsum("ij,ij->i", r, c)
        ad = np.abs(d)
        max_abs = max(max_abs, float(ad.max()))
        sad += float(ad.sum())
        close += int(np.count_nonzero(ad <= atol + rtol * np.abs(r)))
    sdd, srr, scc, src = pos.sum(axis=1)
    n = rows * h
    rel = np.sqrt(sdd) / np.sqrt(srr) if srr > 0 else (0.0 if sdd == 0 else float("inf"))
    cos = src / (np.sqrt(srr) * np.sqrt(scc)) if srr > 0 and scc > 0 else float(srr == scc)
    with np.errstate(divide="ignore", invalid="ignore"):
        pos_rel = np.sqrt(pos[0]) / np.sqrt(pos[1])
    bad = np.nonzero(~(pos_rel <= diverge))[0] if len(shape) >= 2 else []
    return {
        "rel_l2": float(rel), "cosine": float(cos), "max_abs": max_abs, "mean_abs": sad / n,
        "allclose_frac": close / n, "first_bad_position": int(bad[0]) if len(bad) else None,
    }


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def kl_mean(ref, cand, dtype):
    """Mean over rows of KL(softmax(ref) || softmax(cand)), rows of the last axis."""
    (r_all, r_bf), (c_all, c_bf) = ref, cand
    v = r_all.shape[-1]
    r_all = r_all.reshape(-1, v)
    c_all = c_all.reshape(-1, v)
    step = max(1, CHUNK_ELEMS // v)
    total = 0.0
    for s in range(0, r_all.shape[0], step):
        lr = log_softmax(widen(r_all[s:s + step], r_bf, dtype))
        lc = log_softmax(widen(c_all[s:s + step], c_bf, dtype))
        total += float((np.exp(lr) * (lr - lc)).sum())
    return total / r_all.shape[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--f32", action="store_true")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--diverge", type=float, default=1e-2)
    ap.add_argument("ref")
    ap.add_argument("cand")
    a = ap.parse_args()
    ref, cand = load_tree(a.ref), load_tree(a.cand)
    cells = {}
    for name in sorted(ref.keys() & cand.keys()):
        dtype = np.float32 if a.f32 else np.float64
        cells[name] = compare(ref[name], cand[name], a.atol, a.rtol, a.diverge, dtype)
        if name in ("lm_head", "logits"):
            cells[name]["kl_mean"] = kl_mean(ref[name], cand[name], dtype)
    diverged = sum(1 for m in cells.values() if not m["rel_l2"] <= a.diverge)
    print(f"baseline: {len(cells)} cells, {diverged} diverged")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(cells, f)


if __name__ == "__main__":
    main()
