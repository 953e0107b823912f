#!/bin/sh
# Mixture-of-experts dumps that cannot be compared as routing
# (tbisect-dumps(5), Mixture of experts): selected expert ids that are no
# expert's number, or name an expert the side's own router does not score,
# stop the run with one line naming the file (exit 2), as do router
# probabilities of another number of experts than the router; two sides
# selecting a different number of experts diverge at the ids with both
# files named;
# combine weights whose rows are not one per selected expert are not
# compared, the cell saying which file.  Per-slot tensors (llama.cpp's
# ffn_moe_gate/up/down: one row per selected expert) are compared slot by
# expert id, so a side ordering its slots otherwise agrees, and against a
# side whose tensor is one row per position they are not compared, saying
# why.  Written by a small numpy MoE (4 experts, top-2, 5 positions).
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
need_python numpy
T=$TAP_TMP

"$PY" - "$T" <<'PY'
import os, sys
import numpy as np
t = sys.argv[1]
g = np.random.default_rng(34)
S, E, K, H, F = 5, 4, 2, 8, 6

def save(d, name, a):
    os.makedirs(os.path.join(t, d), exist_ok=True)
    np.save(os.path.join(t, d, "layers.0.mlp." + name + ".npy"), a)

logits = g.standard_normal((S, E)).astype(np.float32)
p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
ids = np.argsort(-p, -1, kind="stable")[:, :K]
w = np.take_along_axis(p, ids, -1)
w = (w / w.sum(-1, keepdims=True)).astype(np.float32)
gate = g.standard_normal((E, H, F)).astype(np.float32)
x = g.standard_normal((S, H)).astype(np.float32)
slots = np.stack([[x[s] @ gate[ids[s, i]] for i in range(K)] for s in range(S)])  # [S, K, F]
experts = g.standard_normal((S, H)).astype(np.float32)

def side(d, ids=ids, w=w, slots=slots, router=logits):
    save(d, "router", router)
    save(d, "topk_ids", ids.astype(np.int32))
    save(d, "topk_weights", w)
    if slots is not None:
        save(d, "gate", slots)
    save(d, "experts", experts)

side("ref")
# the slots of positions 1 and 3 in the other order, ids and weights with them
swap = ids.copy(), w.copy(), slots.copy()
for a in swap:
    a[[1, 3]] = a[[1, 3]][:, ::-1]
side("order", *swap)
side("dense", slots=slots.sum(1))              # the gate one row per position
bad = ids.copy(); bad[2, 1] = -1
side("negative", ids=bad)
bad = ids.copy(); bad[3, 0] = 5
side("width", ids=bad)                         # expert 5 of a router of 4
ids3 = np.argsort(-p, -1, kind="stable")[:, :3]
side("k3", ids=ids3, w=np.take_along_axis(p, ids3, -1).astype(np.float32), slots=None)
side("wdense", w=p.astype(np.float32))         # the weights of every expert
side("probs5")                                 # probabilities of 5 experts beside a router of 4
save("probs5", "router_probs", np.full((S, 5), 0.2, np.float32))
PY

check() {
	run_cmd "$TBISECT" check --json --no-history "$T/ref" "$T/$1"
}

check order
json_is "slots in another order: exit 0" verdict match
json_is "order: the sets agree at all 5 positions" routing.0.agree 5
cell_is "order: the per-slot gate matches, rows matched by expert id" L0.mlp.gate reason \
	"every element within allclose; rows matched by expert id"

check dense
cell_is "one row per position against one per slot: not compared" L0.mlp.gate status missing
cell_is "dense: the note names the per-slot side's file and why" L0.mlp.gate reason \
	"not compared: layers.0.mlp.gate (ref/layers.0.mlp.gate.npy) holds one row per selected expert*"
json_is "dense: no divergence" verdict match

expect_error_msg 2 negative/layers.0.mlp.topk_ids.npy "holds -1 at position 2: no expert number" \
	"an expert id of -1: exit 2, one line naming the file" "$TBISECT" check --no-history "$T/ref" "$T/negative"
expect_error_msg 2 width/layers.0.mlp.topk_ids.npy "names expert 5 at position 3, but its router scores 4 experts" \
	"expert 5 of a router of 4: exit 2, one line naming the file" "$TBISECT" check --no-history "$T/ref" "$T/width"

expect_error_msg 2 probs5/layers.0.mlp.router_probs.npy "gives 5 experts probabilities, but layers.0.mlp.router scores 4" \
	"a router of 4 experts, probabilities of 5: exit 2, one line naming the file" "$TBISECT" check --no-history "$T/ref" \
	"$T/probs5"

check k3
json_is "3 experts against 2: exit 1" verdict diverged
json_is "k: the first divergence is the ids" first_divergence.cell L0.mlp.topk_ids
cell_is "k: the reason names both files" L0.mlp.topk_ids reason \
	"2 experts selected per position by layers.0.mlp.topk_ids (ref/layers.0.mlp.topk_ids.npy), 3 by layers.0.mlp.topk_ids (k3/layers.0.mlp.topk_ids.npy)"
json_is "k: no routing compared" routing null

check wdense
cell_is "weights of every expert: not compared" L0.mlp.topk_weights status missing
cell_is "wdense: the note names the file" L0.mlp.topk_weights reason \
	"not compared: layers.0.mlp.topk_weights (wdense/layers.0.mlp.topk_weights.npy) holds no combine weight per selected expert*"
json_is "wdense: no divergence" verdict match
tap_done
