#!/bin/sh
# End to end: the dumpers in samples/dumpers really run.  dump_hf.py hooks a
# tiny Llama-style torch model (tests/dumpers/tinyllama.py: HF module names,
# no transformers) dumped twice, once with a perturbation, and tbisect must
# pair every tensor and find the perturbed cell; a Mixtral-style experts
# block (tests/llamacpp/hfmodel.py) is recorded with its routing.
# dump_jax.py's writers run
# with numpy alone; its JAX model only where jax is installed.  Whatever
# python3 lacks is a TAP skip with the reason.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
D=$top_srcdir/samples/dumpers
T=$TAP_TMP
TOK=1,5,9,13,17,21,25,29,33,37,41,45
PYTHONPATH=$top_srcdir/tests/dumpers:$D${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH

# first_is DESC WANT: the last check's first divergence is WANT ("L1.mlp").
first_is() {
	_l=$(json_get first_divergence.layer)
	_t=$(json_get first_divergence.tap)
	if [ "L$_l.$_t" = "$2" ]; then ok "$1"; else not_ok "$1" "got L$_l.$_t, expected $2"; fi
}

# --- dump_hf.py on a torch model ---
if TORCH_PY=$(find_python torch); then
	hf() {
		"$TORCH_PY" "$D/dump_hf.py" --factory tinyllama:build --tokens "$TOK" "$@"
	}
	expect_exit 0 "dump_hf: reference" hf "$T/ref"
	check_that "dump_hf: says what it wrote" grep -q "^dump_hf: wrote 18 file(s) under $T/ref\$" "$TAP_OUT"
	expect_exit 0 "dump_hf: candidate with gelu in layer 1's MLP" hf --factory-arg bug=mlp-activation "$T/cand"
	expect_exit 0 "ls the dump" "$TBISECT" ls "$T/ref"
	check_that "dump_hf: 3 layers, no unmapped name" grep -q '^18 tensors, 0 unmapped$' "$TAP_OUT"
	check_that "dump_hf: self_attn's tuple output taken" grep -q '^model.layers.0.self_attn  *L0.attn  *f32  *\[1, 12, 32\]' "$TAP_OUT"
	check_that "dump_hf: logits [1, 12, 97]" grep -q '^lm_head  *logits  *f32  *\[1, 12, 97\]' "$TAP_OUT"
	expect_exit 1 "check: the perturbation diverges" "$TBISECT" check --json "$T/ref" "$T/cand"
	first_is "check: first divergence L1.mlp" L1.mlp
	json_is "check: L1.mlp_norm matches" cells.8.status match
	json_is "check: nothing unpaired (ref)" 'unpaired.ref.#' 0
	json_is "check: nothing unpaired (cand)" 'unpaired.cand.#' 0

	expect_exit 0 "dump_hf: interleaved RoPE in layer 0" hf --factory-arg bug=rope-style --factory-arg layer=0 "$T/rope"
	expect_exit 1 "check rope-style" "$TBISECT" check --json "$T/ref" "$T/rope"
	first_is "rope-style: first divergence L0.attn" L0.attn
	json_is "rope-style: first bad position 1" first_divergence.first_bad_position 1

	expect_exit 0 "dump_hf: sub-taps, canonical names, one safetensors file" \
		hf --sub --naming canonical --format safetensors "$T/sub"
	check_that "safetensors file written" test -f "$T/sub/activations.safetensors"
	expect_exit 0 "ls the safetensors dump" "$TBISECT" ls "$T/sub"
	check_that "sub-taps: 3*12+3 tensors, no unmapped name" grep -q '^39 tensors, 0 unmapped$' "$TAP_OUT"
	check_that "q_proj recorded as attn.q" grep -q '^layers.2.attn.q  *L2.attn.q  *f32  *\[1, 12, 32\]' "$TAP_OUT"
	expect_exit 0 "dump_hf: sub-taps, perturbed" \
		hf --sub --naming canonical --format safetensors --factory-arg bug=mlp-activation "$T/subc"
	expect_exit 1 "check with sub-taps" "$TBISECT" check --json "$T/sub" "$T/subc"
	# down_proj's output is the MLP's output: it diverges first, in forward order.
	first_is "sub-taps: gate and up match, L1.mlp.down diverges" L1.mlp.down
	json_is "sub-taps: L1.mlp.up is the cell before" cells.21.tap mlp.up
	json_is "sub-taps: L1.mlp.up matches" cells.21.status match

	# --replay: q and k after RoPE (apply_rotary_pos_emb wrapped), o_proj's and down_proj's inputs
	expect_exit 0 "dump_hf --replay: reference" hf --replay "$T/rref"
	expect_exit 0 "ls the replay dump" "$TBISECT" ls "$T/rref"
	check_that "replay: 3*16+3 tensors, no unmapped name" grep -q "^51 tensors, 0 unmapped$" "$TAP_OUT"
	check_that "replay: q after RoPE as [1, heads, seq, head_dim]" grep -q '^layers.1.attn.q_rope  *L1.attn.q_rope  *f32  *\[1, 4, 12, 8\]' "$TAP_OUT"
	check_that "replay: k after RoPE" grep -q '^layers.1.attn.k_rope  *L1.attn.k_rope  *f32  *\[1, 2, 12, 8\]' "$TAP_OUT"
	check_that "replay: o_proj's input" grep -q '^layers.0.attn.core  *L0.attn.core  *f32  *\[1, 12, 32\]' "$TAP_OUT"
	check_that "replay: down_proj's input" grep -q '^layers.2.mlp.act  *L2.mlp.act  *f32  *\[1, 12, 64\]' "$TAP_OUT"
	check_that "replay: apply_rotary_pos_emb restored after the dump" "$TORCH_PY" -c \
		'import sys; sys.path[:0] = sys.argv[1:]; import dump_hf, tinyllama; m = tinyllama.build(); rec = dump_hf.Recorder(m, replay=True); f = tinyllama.apply_rotary_pos_emb; rec.close(); assert tinyllama.apply_rotary_pos_emb is not f' \
		"$D" "$top_srcdir/tests/dumpers"
	expect_exit 0 "dump_hf --replay: interleaved RoPE in layer 0" hf --replay --factory-arg bug=rope-style --factory-arg layer=0 "$T/rrope"
	expect_exit 1 "replay: check the RoPE bug" "$TBISECT" check --json "$T/rref" "$T/rrope"
	first_is "replay: first divergence L0.attn.q_rope" L0.attn.q_rope
	json_is "replay: rope-style confirmed" causes.0.confirmed.variant "interleaved pairs (2i, 2i+1)"
	# a Mixtral-style experts block (tests/llamacpp/hfmodel.py): its routing as the block's own topk returned it
	expect_exit 0 "dump_hf --replay: a Mixtral-style sparse MoE model" "$TORCH_PY" -c '
import sys, torch
sys.path[:0] = sys.argv[1:3]
import dump_hf, hfmodel
torch.manual_seed(1)
m = hfmodel.LlamaForCausalLM(hfmodel.Config(hidden=16, heads=2, kv_heads=1, inter=8, experts=4)).eval()
topk = torch.topk
dump_hf.dump(m, torch.tensor([[1, 5, 9, 13, 17]]), sys.argv[3], replay=True)
assert torch.topk is topk, "torch.topk not restored"' "$D" "$top_srcdir/tests/llamacpp" "$T/moe"
	expect_exit 0 "ls the MoE dump" "$TBISECT" ls "$T/moe"
	check_that "MoE: no unmapped name" grep -q " 0 unmapped\$" "$TAP_OUT"
	check_that "MoE: the router's logits at [B, S, E]" grep -q '^model.layers.1.block_sparse_moe.gate  *L1.mlp.router  *f32  *\[1, 5, 4\]' "$TAP_OUT"
	check_that "MoE: the selected experts" grep -q '^model.layers.1.block_sparse_moe.selected_experts  *L1.mlp.topk_ids  *i64  *\[1, 5, 2\]' "$TAP_OUT"
	check_that "MoE: their weights" grep -q '^model.layers.1.block_sparse_moe.routing_weights  *L1.mlp.topk_weights  *f32  *\[1, 5, 2\]' "$TAP_OUT"
	check_that "MoE: the experts' sum and the block" sh -c 'grep -q "^model.layers.0.block_sparse_moe.experts  *L0.mlp.experts " "$1" && grep -q "^model.layers.0.block_sparse_moe  *L0.mlp " "$1"' x "$TAP_OUT"
	check_that "MoE: the weights recorded after the block renormalised them, the ids the top 2 of the logits" "$TORCH_PY" -c '
import sys, numpy as np
d = sys.argv[1] + "/model.layers.0.block_sparse_moe."
w, ids, g = (np.load(d + n + ".npy") for n in ("routing_weights", "selected_experts", "gate"))
assert np.allclose(w.sum(-1), 1), w
assert (np.sort(ids, -1) == np.sort(np.argsort(-g, -1)[..., :2], -1)).all()' "$T/moe"
	expect_exit 0 "dump_hf --replay: gelu in layer 1's MLP" hf --replay --factory-arg bug=mlp-activation "$T/rgelu"
	expect_exit 1 "replay: check the activation bug" "$TBISECT" check --json "$T/rref" "$T/rgelu"
	first_is "replay: first divergence L1.mlp.act" L1.mlp.act
	json_is "replay: mlp-activation confirmed" causes.0.confirmed.variant "gelu (exact)"

	expect_exit 0 "dump_hf: bf16 activations as npy" hf --dtype bfloat16 "$T/bf16"
	check_that "bf16 npy: dtypes.json manifest" grep -q bfloat16 "$T/bf16/dtypes.json"
	expect_exit 0 "bf16 vs f32 reference: not diverged" "$TBISECT" check --json "$T/ref" "$T/bf16"
	json_is "bf16 vs f32 reference: close" verdict close
	expect_exit 0 "dump_hf: bf16 into a .safetensors path" hf --dtype bf16 "$T/one.safetensors"
	expect_exit 0 "ls bf16 safetensors" "$TBISECT" ls "$T/one.safetensors"
	check_that "bf16 safetensors dtype" grep -q '^model.layers.1.mlp  *L1.mlp  *bf16' "$TAP_OUT"
	expect_exit 0 "dump_hf: the model itself in bf16" hf --model-dtype bfloat16 "$T/bfm"
	expect_exit 0 "ls the bf16 model's dump" "$TBISECT" ls "$T/bfm"
	check_that "bf16 model: bf16 outputs" grep -q '^model.norm  *final_norm  *bf16' "$TAP_OUT"

	expect_exit 0 "dump_hf: --save-tokens" hf --save-tokens "$T/tok"
	expect_exit 0 "ls with tokens" "$TBISECT" ls "$T/tok"
	check_that "tokens written as int64" grep -q '^tokens  *(token ids)  *i64  *\[1, 12\]' "$TAP_OUT"

	# The library API on a bare decoder (no lm_head, module paths without "model.").
	cat >"$T/bare.py" <<-EOF
	import sys, torch, dump_hf, tinyllama
	m = tinyllama.build().model
	dump_hf.dump(m, torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]]), sys.argv[1])
	EOF
	expect_exit 0 "dump_hf.dump() on a bare decoder" "$TORCH_PY" "$T/bare.py" "$T/bare"
	expect_exit 0 "ls the bare decoder's dump" "$TBISECT" ls "$T/bare"
	check_that "bare decoder: HF names all the same, no logits" grep -q '^17 tensors, 0 unmapped$' "$TAP_OUT"

	cat >"$T/wrong.py" <<-EOF
	import torch
	def build():
	    return torch.nn.Sequential(torch.nn.Linear(2, 2))
	EOF
	expect_exit 2 "dump_hf: a model that is not a decoder" env PYTHONPATH="$T:$PYTHONPATH" \
		"$TORCH_PY" "$D/dump_hf.py" --factory wrong:build --tokens 1 "$T/x"
	check_that "not a decoder: one line saying why" test "$(cat "$TAP_ERR")" = \
		"dump_hf: no module has both embed_tokens and a layers ModuleList (not a Llama-style decoder?)"
	expect_exit 2 "dump_hf: bad --tokens" hf --tokens 1,x "$T/x"
	check_that "nothing written on errors" test ! -e "$T/x"

	if "$TORCH_PY" -c "import transformers" >/dev/null 2>&1; then
		cat >"$T/hfllama.py" <<-EOF
		import sys, torch, transformers, dump_hf
		cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64,
		                               num_hidden_layers=2, num_attention_heads=4,
		                               num_key_value_heads=2)
		torch.manual_seed(0)
		m = transformers.LlamaForCausalLM(cfg).eval()
		dump_hf.dump(m, torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]]), sys.argv[1], sub=True)
		EOF
		expect_exit 0 "dump_hf on transformers' LlamaForCausalLM" "$TORCH_PY" "$T/hfllama.py" "$T/hfl"
		expect_exit 0 "ls the transformers dump" "$TBISECT" ls "$T/hfl"
		check_that "transformers Llama: 2*12+3 tensors, no unmapped" grep -q '^27 tensors, 0 unmapped$' "$TAP_OUT"
	else
		skip "dump_hf on transformers' LlamaForCausalLM" "no transformers package for $TORCH_PY"
	fi
else
	skip "dump_hf.py on a tiny torch model" "no python3 with torch (Debian: apt-get install python3-torch)"
fi

# --- dump_jax.py: its writers need numpy only ---
if NP_PY=$(find_python numpy); then
	cat >"$T/sown.py" <<-EOF
	import sys, numpy as np, dump_jax
	x = np.arange(8 * 4, dtype=np.float32).reshape(1, 8, 4) / 7
	sown = {"embed": (x,), "layers_0": {"attn": (x + 1, x + 2), "block": (x * 2,)},
	        "layers_1": {"mlp": (x * 3,)}, "final_norm": (x,)}
	dump_jax.save_sown(sown, sys.argv[1])
	assert (np.load(sys.argv[1] + "/layers.0.attn.npy") == x + 1).all(), "first call not kept"
	EOF
	expect_exit 0 "dump_jax.save_sown on a Flax-style collection, first call kept" "$NP_PY" "$T/sown.py" "$T/sown"
	expect_exit 0 "ls the sown dump" "$TBISECT" ls "$T/sown"
	check_that "layers_0 scope written as layers.0" grep -q '^layers.0.attn  *L0.attn  *f32  *\[1, 8, 4\]' "$TAP_OUT"
	check_that "sown dump: 5 tensors, none unmapped" grep -q '^5 tensors, 0 unmapped$' "$TAP_OUT"
else
	skip "dump_jax.py writers" "no python3 with numpy (Debian: apt-get install python3-numpy)"
fi
if JAX_PY=$(find_python jax); then
	expect_exit 0 "dump_jax.py: the JAX example model" "$JAX_PY" "$D/dump_jax.py" "$T/jax"
	expect_exit 0 "ls the JAX dump" "$TBISECT" ls "$T/jax"
	check_that "JAX dump: 2*5+3 tensors, none unmapped" grep -q '^13 tensors, 0 unmapped$' "$TAP_OUT"
	expect_exit 0 "dump_jax.py --bf16" "$JAX_PY" "$D/dump_jax.py" --bf16 "$T/jaxbf"
	expect_exit 0 "JAX bf16 vs f32: not diverged" "$TBISECT" check "$T/jax" "$T/jaxbf"
	expect_exit 0 "dump_jax.py --replay" "$JAX_PY" "$D/dump_jax.py" --replay "$T/jaxr"
	expect_exit 0 "ls the JAX replay dump" "$TBISECT" ls "$T/jaxr"
	check_that "JAX replay dump: 2*14+3 tensors, none unmapped" grep -q '^31 tensors, 0 unmapped$' "$TAP_OUT"
	check_that "JAX replay dump: q after RoPE" grep -q '^layers.1.attn.q_rope  *L1.attn.q_rope ' "$TAP_OUT"
else
	skip "dump_jax.py: the JAX example model" "no python3 with jax"
fi

tap_done
