#!/bin/sh
# llama.cpp's own capture of a mixture-of-experts model: llama-eval-callback
# of a July 2026 llama.cpp (siphon.cpp) on a tiny Mixtral-style model (4
# experts, 2 used, a prompt of 6 tokens, so every routing value is
# printed), converted to GGUF as convert_hf_to_gguf.py converts Mixtral,
# against the Hugging Face forward-hook dump of the same weights
# (ref-moe.npz); made by tests/llamacpp/mkfixtures.py --moe.  The clean
# conversion pairs the MoE cells by their ops and routes as the reference
# does; layer 0's experts stacked in the wrong order diverge first at
# the experts' sum, an expert-mapping; layer 0's router rows reversed
# diverge first at the router, and the routing it then chose is told from
# near ties.  The selected experts' projections (ffn_moe_gate/up/down,
# one row per selected expert) are compared slot by expert id: against
# the capture with the slots of some positions reordered (a reconstruction:
# llama.cpp always orders them by probability, a port may order them by
# id) they match, and the experts stacked out of order diverge first at
# the gate projection of the selected experts.  The last layer computes
# its last position only: its routing is that one position.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
need_python numpy
T=$TAP_TMP
C=$top_srcdir/tests/llamacpp/captures
REF=$C/ref-moe.npz

for cap in 2026-moe 2026-moe-experts 2026-moe-router; do
	gzip -dc "$C/$cap.log.gz" >"$T/$cap.log" || bail_out "cannot unpack $cap"
done

# --- what ls shows: the MoE nodes by their ops ---
expect_exit 0 "ls reads the MoE capture" "$TBISECT" ls "$T/2026-moe.log"
check_that "ls: MUL_MAT by ffn_gate_inp is the router" grep -q '^ffn_moe_logits-0  *L0\.mlp\.router  *f32  *\[1, 1, 6, 4\] ' "$TAP_OUT"
check_that "ls: its SOFT_MAX the router's probabilities" grep -q '^ffn_moe_probs-0  *L0\.mlp\.router_probs ' "$TAP_OUT"
check_that "ls: the VIEW of the ARGSORT the selected experts, i32 [T, k]" \
	grep -q '^ffn_moe_topk-0  *L0\.mlp\.topk_ids  *i32  *\[1, 1, 6, 2\] ' "$TAP_OUT"
check_that "ls: the ARGSORT itself is a graph internal" grep -q '^ffn_moe_argsort-0  *(internal) ' "$TAP_OUT"
check_that "ls: the weights renormalised (DIV) are the combine weights" \
	grep -q '^ffn_moe_weights_norm-0  *L0\.mlp\.topk_weights  *f32  *\[1, 1, 6, 2\] ' "$TAP_OUT"
check_that "ls: the sum of the weighted experts' views is the experts' sum" \
	grep -q '^ffn_moe_out-0  *L0\.mlp\.experts ' "$TAP_OUT"
check_that "ls: the experts' sum plus the stream is the block" grep -q '^l_out-0  *L0\.block ' "$TAP_OUT"
check_that "ls: MUL_MAT_ID by ffn_gate_exps is the gate, one row per selected expert" \
	grep -q '^ffn_moe_gate-0  *L0\.mlp\.gate  *f32  *\[1, 6, 2, 32\] ' "$TAP_OUT"
check_that "ls: down's input is the activation" grep -q '^ffn_moe_swiglu-0  *L0\.mlp\.act ' "$TAP_OUT"
check_that "ls: down's outputs times the weights, per slot" grep -q '^ffn_moe_weighted-0  *L0\.mlp\.weighted ' "$TAP_OUT"
check_that "ls: the last layer's router holds the last token only" \
	grep -q '^ffn_moe_logits-1  *L1\.mlp\.router  *f32  *\[1, 1, 1, 4\] (4 printed) ' "$TAP_OUT"

# --- the clean conversion: every MoE cell pairs and the routing agrees ---
expect_exit 0 "clean: exit 0" "$TBISECT" check --json --no-history "$REF" "$T/2026-moe.log"
json_is "clean: verdict close (llama.cpp's KV cache is f16)" verdict close
json_is "clean: layer 0's routing is compared at its 6 positions" routing.0.positions 6
json_is "clean: all 6 agree" routing.0.agree 6
json_is "clean: no flip" 'routing.0.flipped.#' 0
cell_is "clean: the router's logits pair with the gate's" L0.mlp.router cand_name ffn_moe_logits-0
cell_is "clean: the selected experts match" L0.mlp.topk_ids status match
cell_is "clean: the combine weights are ffn_moe_weights_norm" L0.mlp.topk_weights cand_name ffn_moe_weights_norm-0
cell_is "clean: the experts' sum pairs with block_sparse_moe.experts" L0.mlp.experts ref_name \
	model.layers.0.block_sparse_moe.experts
cell_is "clean: ffn_moe_out is also the MLP's output" L0.mlp cand_name ffn_moe_out-0
cell_is "clean: the last layer's selected experts, read at the reference's last position, match" \
	L1.mlp.topk_ids status match
cell_is "clean: the last layer's router is close there" L1.mlp.router status close
json_is "clean: layer 1's routing is its one position" routing.1.positions 1
json_is "clean: and agrees" routing.1.agree 1

# the reference's last position choosing its experts in the other order
"$PY" - "$REF" "$T/ref-swapped.npz" <<'PY'
import sys
import numpy as np
z = dict(np.load(sys.argv[1]))
for k in ("selected_experts", "routing_weights"):
    a = z["model.layers.1.block_sparse_moe." + k]
    a[0, -1] = a[0, -1][::-1].copy()
np.savez(sys.argv[2], **z)
PY
expect_exit 0 "last layer, slots in the other order: exit 0" "$TBISECT" check --json --no-history "$T/ref-swapped.npz" \
	"$T/2026-moe.log"
cell_is "swapped: the last layer's sets agree" L1.mlp.topk_ids status match
json_is "swapped: its one position agrees" routing.1.agree 1

# the reference's layer 0 at the last position near a tie (its 3rd logit
# raised to 1e-5 above its 2nd, so its router diverges there) choosing the
# 3rd: a flip there, which the last layer's cells, of that one position,
# leave out
"$PY" - "$REF" "$T/ref-flip.npz" <<'PY'
import sys
import numpy as np
z = dict(np.load(sys.argv[1]))
n = "model.layers.0.block_sparse_moe."
g, ids = z[n + "gate"][0, 5], z[n + "selected_experts"][0, 5]
third = [e for e in np.argsort(-g) if e not in ids][0]
g[third] = g[ids[1]] + np.float32(1e-5)
ids[1] = third
np.savez(sys.argv[2], **z)
PY
expect_exit 1 "a flip at the last position: exit 1 (the edited router)" "$TBISECT" check --json --no-history "$T/ref-flip.npz" "$T/2026-moe.log"
json_is "flip: layer 0 flipped at position 5" routing.0.flipped.0.0 5
json_is "flip: layer 1's one position is left out" routing.1.excluded 1
json_is "flip: so none of it agrees or differs" routing.1.agree 0
cell_is "flip: the last layer's ids say none was compared" L1.mlp.topk_ids reason \
	"no position compared: each flipped upstream"
cell_is "flip: nor its weights" L1.mlp.topk_weights reason \
	"no position compared: each left out (its experts differ, or flipped upstream)"
cell_is "flip: the last layer's experts' sum leaves its one position out" L1.mlp.experts excluded_positions 1
cell_is "flip: and says so" L1.mlp.experts reason "not compared: its one position, the last, flipped at layer 0"

# the capture with the slots of positions 1, 3, 4 of layer 0 and of layer
# 1's one position in the other order: ids, weights and per-slot rows
"$PY" - "$T/2026-moe.log" "$T/2026-moe-order.log" <<'PY'
import re, sys
swap = {0: {1, 3, 4}, 1: {0}}
head = re.compile(r"common_debug_cb_eval: +(\S+(?: \(reshaped\))?) = \(\w+\) +\w+\(.*\) = \{(\d+), (\d+), (\d+), (\d+)\}$")
per_slot = ("ffn_moe_topk", "ffn_moe_weights", "ffn_moe_weights_norm", "ffn_moe_gate", "ffn_moe_up",
            "ffn_moe_swiglu", "ffn_moe_down", "ffn_moe_weighted")
out, rows, cur = [], [], None
def flush():
    if not cur:
        return
    layer, ne0, ne1 = cur
    for p in swap[layer]:
        if ne0 == 2:   # [k] per position: the row's two numbers
            i = rows[p]
            m = re.match(r"(\s*\[\s*)(\S+)(,\s+)(\S+)(\s*\],?)$", out[i])
            out[i] = m.group(1) + m.group(4) + m.group(3) + m.group(2).rstrip(",") + m.group(5)
        else:          # [k] rows per position
            a, b = rows[2 * p], rows[2 * p + 1]
            out[a], out[b] = out[b], out[a]
for line in open(sys.argv[1]).read().split("\n"):
    m = head.match(line)
    if m or line.startswith("common_debug_cb_eval:"):
        flush()
        cur, rows = None, []
        name = m.group(1).replace(" (reshaped)", "") if m else ""
        base, _, layer = name.rpartition("-")
        if m and base in per_slot and layer in ("0", "1"):
            cur = (int(layer), int(m.group(2)), int(m.group(3)))
    elif cur and re.match(r"\s*\[.*\],?$", line):
        rows.append(len(out))
    out.append(line)
flush()
open(sys.argv[2], "w").write("\n".join(out))
PY
expect_exit 0 "slots in another order: exit 0" "$TBISECT" check --json --no-history "$T/2026-moe.log" "$T/2026-moe-order.log"
json_is "order: verdict match" verdict match
json_is "order: layer 0's sets agree" routing.0.agree 6
cell_is "order: the combine weights match, aligned by id" L0.mlp.topk_weights status match
for tap in gate up act down weighted; do
	cell_is "order: L0.mlp.$tap matches slot by expert id" L0.mlp.$tap reason \
		"every element within allclose; rows matched by expert id"
done
cell_is "order: so does the last layer's one position" L1.mlp.down reason \
	"every element within allclose; rows matched by expert id"
expect_exit 1 "experts stacked out of order, against the clean capture: exit 1" "$TBISECT" check --json --no-history \
	"$T/2026-moe.log" "$T/2026-moe-experts.log"
json_is "experts: first divergence at the selected experts' gate" first_divergence.cell L0.mlp.gate
json_is "experts: diagnosed at their sum, expert-mapping first" causes.0.id expert-mapping

# --- conversion bugs: the first divergence and the cause are the bug's ---
expect_exit 1 "experts stacked out of order: exit 1" "$TBISECT" check --json --no-history "$REF" "$T/2026-moe-experts.log"
json_is "experts: first divergence at the experts' sum" first_divergence.cell L0.mlp.experts
json_is "experts: the routing agrees" routing.0.agree 6
json_is "experts: the cause ranked first is expert-mapping" causes.0.id expert-mapping

expect_exit 1 "router rows reversed: exit 1" "$TBISECT" check --json --no-history "$REF" "$T/2026-moe-router.log"
json_is "router: first divergence at the router" first_divergence.cell L0.mlp.router
json_is "router: no position agrees" routing.0.agree 0
json_is "router: a diverged router's choices are no near ties" 'routing.0.flipped.#' 0
json_is "router: every position differs" 'routing.0.disagree.#' 6
json_is "router: the cause ranked first is moe-routing" causes.0.id moe-routing
tap_done
