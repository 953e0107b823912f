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
# near ties.
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

# cell_is DESC CELL KEY WANT: in the JSON report in $TAP_OUT, the cell
# named CELL (L0.mlp.router) has WANT at KEY (strings raw, the rest JSON).
cell_is() {
	_got=$("$PY" - "$TAP_OUT" "$2" "$3" <<'PY' 2>&1 || :
import json, sys
doc = json.load(open(sys.argv[1]))
name = lambda c: c["tap"] if c["layer"] is None else "L%d.%s" % (c["layer"], c["tap"])
v = next((c for c in doc["cells"] if name(c) == sys.argv[2]), {}).get(sys.argv[3])
print(v if isinstance(v, str) else json.dumps(v))
PY
)
	if [ "$_got" = "$4" ]; then ok "$1"; else not_ok "$1" "$2 $3 is '$_got', expected '$4'"; fi
}

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
