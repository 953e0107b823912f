#!/bin/sh
# Mixture-of-experts layers (tbisect-dumps(5), Mixture of experts): a
# reference under Hugging Face's names (the router is the MLP's "gate";
# Mixtral's selected_experts and routing_weights) against candidates under
# llama.cpp's graph names (ffn_moe_*; ffn_moe_out is also the layer's MLP
# output), written by a small numpy MoE (8 experts, top-2, softmax).  The
# expert sets are compared order-free and the weights aligned by expert id;
# a differing set at a near tie of the reference's scores is a flip, at a
# larger gap a divergence; router probabilities never pair with router
# logits; a dense MLP's "gate" stays its gate projection.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
need_python numpy
T=$TAP_TMP

"$PY" - "$T" <<'PY'
import os, sys
import numpy as np
t = sys.argv[1]
g = np.random.default_rng(3)
S, H, E, K, L = 12, 16, 8, 2, 2
TIE = 5  # the position whose reference scores tie between its 2nd and 3rd expert

def save(d, name, a):
    os.makedirs(os.path.join(t, d), exist_ok=True)
    np.save(os.path.join(t, d, name + ".npy"), a)

def route(logits, weigh):
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ids = np.argsort(-p, -1, kind="stable")[..., :K]
    w = np.take_along_axis(p, ids, -1)
    return p, ids, weigh(w)

experts = g.standard_normal((L, E, H, H)).astype(np.float32) / 4
for layer in range(L):
    x = g.standard_normal((1, S, H)).astype(np.float32)
    logits = g.standard_normal((1, S, E)).astype(np.float32)
    if layer == 0:  # a near tie: the 2nd and 3rd largest scores 1e-6 apart
        row = np.sort(logits[0, TIE])[::-1]
        j = int(np.argwhere(logits[0, TIE] == row[2])[0, 0])
        logits[0, TIE, j] = row[1] - np.float32(1e-6)
    def out(ids, w):
        y = np.zeros((1, S, H), np.float32)
        for p in range(S):
            for i in range(K):
                y[0, p] += w[0, p, i] * (x[0, p] @ experts[layer, ids[0, p, i]])
        return y
    norm = lambda w: w / w.sum(-1, keepdims=True)
    probs, ids, w = route(logits, norm)
    y = out(ids, w)
    n = "model.layers.%d." % layer
    save("ref", n + "post_attention_layernorm", x)
    save("ref", n + "mlp.gate", logits)
    save("ref", n + "mlp.selected_experts", ids.astype(np.int64))
    save("ref", n + "mlp.routing_weights", w.astype(np.float32))
    save("ref", n + "mlp.experts", y)
    save("ref", n + "mlp", y)
    # DeepSeek-style: a shared expert added beside the routed ones
    shared = (x @ experts[layer, 0]) / 2
    for f in ("post_attention_layernorm", "mlp.gate", "mlp.selected_experts", "mlp.routing_weights", "mlp.experts"):
        save("ref-shared", n + f, np.load(os.path.join(t, "ref", n + f + ".npy")))
    save("ref-shared", n + "mlp.shared_experts", shared)
    save("ref-shared", n + "mlp", y + shared)
    # llama.cpp names; ids in ascending order, not by weight
    for case in ("same", "flip", "flipnoise", "flipnorm", "weights", "choice", "experts"):
        cids, cw, cy = ids.copy(), w.copy(), y
        if case in ("flip", "flipnoise", "flipnorm") and layer == 0:
            cids[0, TIE, 1] = j
            cw[0, TIE] = norm(probs[0, TIE][cids[0, TIE]][None])[0]
            cy = out(cids, cw)
        if case == "flipnoise":  # and rounding-sized noise everywhere, from a generator of its own
            cy = cy + (np.random.default_rng(9 + layer).standard_normal(cy.shape) * 1e-4).astype(np.float32)
        if case == "weights":  # the top-k weights not renormalised: the ids the same
            cw = np.take_along_axis(probs, ids, -1)
            cy = out(cids, cw)
        if case == "experts" and layer == 1:  # the experts converted one place off
            real = experts[layer].copy()
            experts[layer] = np.roll(real, 1, 0)
            cy = out(cids, cw)
            experts[layer] = real
        if case == "choice" and layer == 1:  # the weakest expert chosen at position 2
            cids[0, 2, 1] = int(np.argmin(probs[0, 2]))
            cy = out(cids, cw)
        order = np.argsort(cids, -1)
        cids, cw = np.take_along_axis(cids, order, -1), np.take_along_axis(cw, order, -1)
        d = "cand-" + case
        # a norm that goes wrong after the flipped position, by itself
        save(d, "ffn_norm-%d" % layer, x * np.where(np.arange(S) > TIE, 1.5, 1)[None, :, None].astype(np.float32)
             if case == "flipnorm" and layer == 1 else x)
        save(d, "ffn_moe_logits-%d" % layer, logits)
        save(d, "ffn_moe_topk-%d" % layer, cids.astype(np.int32))
        save(d, "ffn_moe_weights-%d" % layer, np.take_along_axis(probs, cids, -1).astype(np.float32))
        save(d, "ffn_moe_weights_norm-%d" % layer, cw.astype(np.float32))
        save(d, "ffn_moe_out-%d" % layer, cy)
    # transformers v5: the router returns probabilities
    save("v5", n + "post_attention_layernorm", x)
    save("v5", n + "mlp.gate", probs)
    save("v5", n + "mlp.gate.output.1", w.astype(np.float32))
    save("v5", n + "mlp.gate.output.2", ids.astype(np.int64))
    save("v5", n + "mlp", y)
    # a dense MLP whose gate projection is called "gate"
    save("dense", n + "post_attention_layernorm", x)
    save("dense", n + "mlp.gate", g.standard_normal((1, S, 4 * H)).astype(np.float32))
    save("dense", n + "mlp.up_proj", g.standard_normal((1, S, 4 * H)).astype(np.float32))
    save("dense", n + "mlp", y)
# DeepSeek-V3-like: sigmoid scores, top-k renormalised, times a routed
# scaling factor of 2.5; the candidate applies the factor twice
for layer in range(L):
    x = g.standard_normal((1, S, H)).astype(np.float32)
    logits = g.standard_normal((1, S, E)).astype(np.float32)
    sig = 1 / (1 + np.exp(-logits))
    ids = np.argsort(-sig, -1, kind="stable")[..., :K]
    w = np.take_along_axis(sig, ids, -1)
    w = w / w.sum(-1, keepdims=True) * 2.5
    n = "model.layers.%d." % layer
    save("ds-ref", n + "post_attention_layernorm", x)
    save("ds-ref", n + "mlp.gate", logits)
    save("ds-ref", n + "mlp.topk_idx", ids.astype(np.int64))
    save("ds-ref", n + "mlp.topk_weight", w.astype(np.float32))
    save("ds-ref", n + "mlp", x)
    save("ds-cand", "ffn_norm-%d" % layer, x)
    save("ds-cand", "ffn_moe_logits-%d" % layer, logits)
    save("ds-cand", "ffn_moe_topk-%d" % layer, ids.astype(np.int32))
    save("ds-cand", "ffn_moe_weights_scaled-%d" % layer, (w * (2.5 if layer == 1 else 1)).astype(np.float32))
    save("ds-cand", "ffn_out-%d" % layer, x)

# a router replay (vLLM, SGLang): every layer's experts, [tokens, layers, k];
# the candidate's slots in another order, one position of layer 2 another expert
a = np.stack([np.stack([g.choice(E, K, replace=False) for _ in range(3)]) for _ in range(S)]).astype(np.int32)
b = a[:, :, ::-1].copy()
b[4, 2, 0] = sorted(set(range(E)) - set(a[4, 2]))[0]
save("replay-a", "routed_experts", a)
save("replay-b", "routed_experts", b)

# MaxText's MoE blocks dumped with Flax capture_intermediates (a
# reconstruction: the module paths are those of MaxText's DeepSeek converter,
# checkpoint_conversion/standalone_scripts/convert_deepseek_family_ckpt.py
# at e591f30c, L240-251: DeepSeekMoeBlock_0.{MoeBlock_0.gate, shared_experts};
# Mixtral's decoder layer calls its MoeBlock as the MLP)
keys = ["decoder/layers_0/DeepSeekMoeBlock_0/MoeBlock_0/gate/__call__",
        "decoder/layers_0/DeepSeekMoeBlock_0/MoeBlock_0/__call__",
        "decoder/layers_0/DeepSeekMoeBlock_0/shared_experts/__call__",
        "decoder/layers_0/DeepSeekMoeBlock_0/__call__",
        "decoder/layers_1/MoeBlock_0/gate/__call__", "decoder/layers_1/MoeBlock_0/__call__"]
np.savez(os.path.join(t, "maxtext.npz"), **{k: g.standard_normal((1, S, E if k.endswith("gate/__call__") else H)).astype(np.float32) for k in keys})
PY

run_cmd "$TBISECT" ls "$T/ref"
check_that "HF: the MLP's gate in a layer with experts is its router" grep -q '^model.layers.0.mlp.gate  *L0.mlp.router ' "$TAP_OUT"
check_that "HF: Mixtral's selected_experts are the top-k ids" grep -q '^model.layers.0.mlp.selected_experts  *L0.mlp.topk_ids ' "$TAP_OUT"
check_that "HF: routing_weights are the top-k weights" grep -q '^model.layers.0.mlp.routing_weights  *L0.mlp.topk_weights ' "$TAP_OUT"
run_cmd "$TBISECT" ls "$T/cand-same"
check_that "llama.cpp: the last combine weights are the top-k weights" grep -q '^ffn_moe_weights_norm-0  *L0.mlp.topk_weights ' "$TAP_OUT"
check_that "llama.cpp: the gathered ones are not" grep -q '^ffn_moe_weights-0  *L0.mlp.moe_w ' "$TAP_OUT"
run_cmd "$TBISECT" ls "$T/dense"
check_that "dense: a gate beside an up projection is the gate projection" grep -q '^model.layers.0.mlp.gate  *L0.mlp.gate ' "$TAP_OUT"
run_cmd "$TBISECT" ls "$T/v5"
check_that "v5: a router that returns probabilities is router_probs" grep -q '^model.layers.0.mlp.gate  *L0.mlp.router_probs ' "$TAP_OUT"
check_that "v5: the TopKRouter's second output is the top-k weights" \
	grep -q '^model.layers.0.mlp.gate.output.1  *L0.mlp.topk_weights ' "$TAP_OUT"
check_that "v5: its third the top-k ids" grep -q '^model.layers.0.mlp.gate.output.2  *L0.mlp.topk_ids ' "$TAP_OUT"

run_cmd "$TBISECT" ls "$T/maxtext.npz"
for want in "MoeBlock_0/gate/__call__ L0.mlp.router" "DeepSeekMoeBlock_0/MoeBlock_0/__call__ L0.mlp.experts" \
	"DeepSeekMoeBlock_0/shared_experts/__call__ L0.mlp.shared" "layers_0/DeepSeekMoeBlock_0/__call__ L0.mlp" \
	"layers_1/MoeBlock_0/gate/__call__ L1.mlp.router" "layers_1/MoeBlock_0/__call__ L1.mlp"; do
	check_that "MaxText: ${want% *} is ${want#* }" sh -c 'awk "{print \$1, \$2}" "$1" | grep -q "$2\$"' x "$TAP_OUT" \
		"${want% *} ${want#* }"
done

expect_exit 1 "a router replay of every layer" "$TBISECT" check --json --no-history "$T/replay-a" "$T/replay-b"
json_is "router replay: three layers' routing" 'routing.#' 3
json_is "router replay: slots in another order agree" routing.0.agree 12
json_is "router replay: layer 2 differs at position 4" routing.2.disagree.0.0 4
json_is "router replay: there it first diverges" first_divergence.cell L2.mlp.topk_ids

expect_exit 0 "the same routing, ids in another order" "$TBISECT" check --json --no-history "$T/ref" "$T/cand-same"
json_is "same: layer 0's sets agree everywhere" routing.0.agree 12
json_is "same: the ids cell matches" cells.2.tap mlp.topk_ids
json_is "same: the ids match" cells.2.status match
json_is "same: so do the weights, aligned by id" cells.3.status match
json_is "same: ffn_moe_out is the MLP too" first_divergence null

# a flip sends its position down other experts: every later cell and
# layer leaves it out, so a port whose only difference is a flip is close
expect_exit 0 "a near-tie flip" "$TBISECT" check --json --no-history "$T/ref" "$T/cand-flip"
cp "$TAP_OUT" "$T/flip.json"
json_is "flip: one flipped position" 'routing.0.flipped.#' 1
json_is "flip: at position 5" routing.0.flipped.0.0 5
json_is "flip: no disagreement" 'routing.0.disagree.#' 0
json_is "flip: the ids cell is close, not diverged" cells.2.status close
json_is "flip: the experts' sum leaves position 5 out" cells.4.excluded_positions 1
json_is "flip: and matches without it" cells.4.status match
json_is "flip: layer 1's routing leaves it out too" routing.1.excluded 1
json_is "flip: the verdict is close" verdict close
# the cells after a flip are measured again from their per-position sums:
# every metric as numpy computes it over the positions kept, the worst
# element found again outside the flipped position that held it
expect_exit 0 "a near-tie flip and noise" "$TBISECT" check --json --no-history "$T/ref" "$T/cand-flipnoise"
check_that "flip and noise: the experts' sum measured over the other positions" "$PY" - "$TAP_OUT" "$T" <<'PY'
import json, sys
import numpy as np
r, t = json.load(open(sys.argv[1])), sys.argv[2]
c = r["cells"][4]
a = np.load(t + "/ref/model.layers.0.mlp.experts.npy")[0].astype(np.float64)
b = np.load(t + "/cand-flipnoise/ffn_moe_out-0.npy")[0].astype(np.float64)
assert np.abs(b - a)[5].max() > np.abs(b - a)[np.arange(12) != 5].max(), "the flip must hold the worst element"
a, b = np.delete(a, 5, 0), np.delete(b, 5, 0)
d = b - a
want = {"rel_l2": np.linalg.norm(d) / np.linalg.norm(a), "max_abs": np.abs(d).max(), "mean_abs": np.abs(d).mean(),
        "cosine": (a * b).sum() / np.linalg.norm(a) / np.linalg.norm(b),
        "allclose_frac": np.mean(np.abs(d) <= 1e-4 + 1e-4 * np.abs(a))}
bad = [f"{k}: {c[k]} vs {v}" for k, v in want.items() if abs(c[k] - v) > 1e-6 * abs(v) + 1e-12]
i = np.unravel_index(np.abs(d).argmax(), d.shape)
worst = [0, int(i[0]) + (i[0] >= 5), int(i[1])]
bad += [] if c["worst"]["index"] == worst else [f"worst {c['worst']['index']} vs {worst}"]
bad += [] if c["excluded_positions"] == 1 and c["elements"] == 11 * 16 else [f"{c['excluded_positions']} {c['elements']}"]
assert not bad, bad
PY
# a flip reaches other positions only through attention: a norm that goes
# bad after it is the norm's own fault, not the flip's
expect_exit 1 "a flip, then a norm wrong after it" "$TBISECT" check --json --no-history "$T/ref" "$T/cand-flipnorm"
json_is "flip then norm: the norm diverges" first_divergence.cell L1.mlp_norm
check_that "flip then norm: not blamed on the flip" sh -c '! grep -q "\"dtype-precision\"" "$1"' x "$TAP_OUT"
expect_exit 0 "a near-tie flip: text" "$TBISECT" check --no-history "$T/ref" "$T/cand-flip"
check_that "flip: the text names the flipped position and its gap" \
	grep -q '^  L0: 11 of 12 positions agree (top-2); flipped at 5 (gap ' "$TAP_OUT"
check_that "flip: and what layer 1 left out" \
	grep -q '^  L1: 11 of 12 positions agree (top-2); 1 left out (flipped in an earlier layer)' "$TAP_OUT"
expect_exit 0 "a near-tie flip: Markdown" "$TBISECT" check --markdown --no-history "$T/ref" "$T/cand-flip"
check_that "Markdown: the routing section" grep -q '^- L0: 11 of 12 positions agree (top-2); flipped at 5 (gap ' "$TAP_OUT"
expect_exit 0 "a near-tie flip: HTML" "$TBISECT" check --html "$T/flip.html" --no-history "$T/ref" "$T/cand-flip"
check_that "HTML: the routing section" grep -q '^<li data-layer="0">L0: 11 of 12 positions agree (top-2); flipped at 5' \
	"$T/flip.html"
expect_exit 1 "a flip with --flip-margin too small to call it one" "$TBISECT" check --json --no-history \
	--flip-margin 1e-9 "$T/ref" "$T/cand-flip"
json_is "--flip-margin 1e-9: a divergence of the ids" first_divergence.cell L0.mlp.topk_ids

expect_exit 1 "weights not renormalised" "$TBISECT" check --json --no-history "$T/ref" "$T/cand-weights"
cp "$TAP_OUT" "$T/weights.json"
json_is "weights: the sets agree" routing.0.agree 12
json_is "weights: the first divergence is the combine weights" first_divergence.cell L0.mlp.topk_weights
json_is "weights: moe-routing first" causes.0.id moe-routing
json_is "weights: confirmed by replaying the router" causes.0.confirmed.variant \
	"top-k weights not renormalised (the reference: renormalised)"

expect_exit 1 "a routed scaling factor applied twice" "$TBISECT" check --json --no-history "$T/ds-ref" "$T/ds-cand"
json_is "scaling: the first divergence is layer 1's weights" first_divergence.cell L1.mlp.topk_weights
json_is "scaling: confirmed, the factor named" causes.0.confirmed.variant "routed scaling factor 2.5 applied twice"

expect_exit 1 "a wrong expert at a clear gap" "$TBISECT" check --json --no-history "$T/ref" "$T/cand-choice"
cp "$TAP_OUT" "$T/choice.json"
json_is "choice: one disagreement in layer 1" 'routing.1.disagree.#' 1
json_is "choice: at position 2" routing.1.disagree.0.0 2
json_is "choice: the first divergence is layer 1's ids" first_divergence.cell L1.mlp.topk_ids
json_is "choice: found at position 2" first_divergence.first_bad_position 2
json_is "choice: moe-routing first" causes.0.id moe-routing

expect_exit 1 "experts converted one place off" "$TBISECT" check --json --no-history "$T/ref" "$T/cand-experts"
json_is "experts: the first divergence is layer 1's experts' sum" first_divergence.cell L1.mlp.experts
json_is "experts: expert-mapping first" causes.0.id expert-mapping
json_is "experts: no router variant confirmed" causes.0.confirmed null

expect_exit 1 "the shared expert left out" "$TBISECT" check --json --no-history "$T/ref-shared" "$T/cand-same"
json_is "shared: the first divergence is the MLP" first_divergence.cell L0.mlp
json_is "shared: shared-expert first" causes.0.id shared-expert

expect_exit 0 "router logits against router probabilities" "$TBISECT" check --json --no-history "$T/ref" "$T/v5"
check_that "logits and probabilities never pair: each is only on its side" "$PY" -c '
import json, sys
cells = {c["tap"]: c["status"] for c in json.load(open(sys.argv[1]))["cells"] if c["layer"] == 0}
sys.exit(not (cells["mlp.router"] == "missing" and cells["mlp.router_probs"] == "missing"))' "$TAP_OUT"
# an agent asking about the flipped layer (tbisect mcp)
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' \
	"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"open_pair\",\"arguments\":{\"ref\":\"$T/ref\",\"cand\":\"$T/cand-flip\"}}}" \
	'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"explain_cell","arguments":{"pair":"p1","cell":"L0.mlp.topk_ids"}}}' |
	"$TBISECT" mcp --no-history >"$T/mcp.out" 2>"$T/mcp.err" || bail_out "tbisect mcp failed: $(cat "$T/mcp.err")"
grep '^{"jsonrpc":"2.0","id":3,' "$T/mcp.out" >"$TAP_OUT" || : >"$TAP_OUT"
json_is "mcp: explain_cell gives the layer's routing" result.structuredContent.routing.flipped.0.0 5
"$TBISECT" check --json --features --no-history "$T/ref" "$T/cand-flip" >"$T/flip-f.json" || :
"$TBISECT" check --json --features --no-history "$T/ref" "$T/cand-choice" >"$T/choice-f.json" || :
check_that "the audit holds on these reports (tests/e2e/audit.py)" \
	"$PY" "$top_srcdir/tests/e2e/audit.py" "$top_srcdir/data/rules.json" "$T/flip-f.json" "$T/choice-f.json"
tap_done
