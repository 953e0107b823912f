#!/bin/sh
# MaxText's DeepSeek decoder (tbisect-dumps(5), NAMING): unscanned, it
# names its first first_num_dense_layers layers dense_layers_K and the rest
# moe_layers_K, K from 0 again; tbisect reads moe_layers_K as layer K plus
# the number of dense_layers_* in the tree, and both as MaxText's layers_K,
# so they pair with Hugging Face's model.layers.N.  A reconstruction of a
# Flax capture_intermediates tree: the paths are those of MaxText at
# e591f30c: layers/decoders.py L1158-1172 (layer_prefixes "dense_layers",
# "moe_layers"; name=f"{layer_prefix}_{index}", index from 0 in each
# group), models/deepseek.py L328 (DeepSeekDenseLayer.mlp) and L418
# (DeepSeekMoELayer.DeepSeekMoeBlock_0), layers/moe.py L489 (RoutedMoE.gate),
# L3302 and L3318 (RoutedAndSharedMoE.MoeBlock_0, .shared_experts).  MaxText
# sows no router top-k: its gate's logits are the router cell.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
need_python numpy
T=$TAP_TMP

"$PY" - "$T" <<'PY'
import os, sys
import numpy as np
t = sys.argv[1]
g = np.random.default_rng(5)
S, H, E = 4, 8, 6
v = lambda w=H: g.standard_normal((1, S, w)).astype(np.float32)
mt, hf = {}, {}
def both(mkey, hkey, w=H):
    mt[mkey] = hf[hkey] = v(w)
# first_num_dense_layers = 1: layer 0 dense, layers 1 and 2 MoE
both("decoder/dense_layers_0/pre_self_attention_layer_norm/__call__", "model.layers.0.input_layernorm")
both("decoder/dense_layers_0/self_attention/__call__", "model.layers.0.self_attn")
both("decoder/dense_layers_0/mlp/__call__", "model.layers.0.mlp")
both("decoder/dense_layers_0/__call__", "model.layers.0")
for k in (0, 1):
    m, h = "decoder/moe_layers_%d/" % k, "model.layers.%d." % (k + 1)
    both(m + "self_attention/__call__", h + "self_attn")
    both(m + "DeepSeekMoeBlock_0/MoeBlock_0/gate/__call__", h + "mlp.gate", E)
    both(m + "DeepSeekMoeBlock_0/MoeBlock_0/__call__", h + "mlp.experts")
    both(m + "DeepSeekMoeBlock_0/shared_experts/__call__", h + "mlp.shared_experts")
    both(m + "DeepSeekMoeBlock_0/__call__", h + "mlp")
    both(m + "__call__", h[:-1])
np.savez(os.path.join(t, "maxtext.npz"), **mt)
np.savez(os.path.join(t, "hf.npz"), **hf)
PY

run_cmd "$TBISECT" ls "$T/maxtext.npz"
for want in "decoder/dense_layers_0/mlp/__call__ L0.mlp" "decoder/dense_layers_0/__call__ L0.block" \
	"decoder/moe_layers_0/self_attention/__call__ L1.attn" \
	"decoder/moe_layers_0/DeepSeekMoeBlock_0/MoeBlock_0/gate/__call__ L1.mlp.router" \
	"decoder/moe_layers_0/DeepSeekMoeBlock_0/shared_experts/__call__ L1.mlp.shared" \
	"decoder/moe_layers_1/DeepSeekMoeBlock_0/MoeBlock_0/__call__ L2.mlp.experts" "decoder/moe_layers_1/__call__ L2.block"; do
	check_that "ls: ${want% *} is ${want#* }" sh -c 'awk "{print \$1, \$2}" "$1" | grep -q "^$2\$"' x "$TAP_OUT" "$want"
done
expect_exit 0 "against Hugging Face's names: exit 0" "$TBISECT" check --json --no-history "$T/hf.npz" "$T/maxtext.npz"
json_is "every one of the 19 cells pairs and matches" verdict match
json_is "nothing unpaired in the candidate" 'unpaired.cand.#' 0
tap_done
