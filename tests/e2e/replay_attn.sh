#!/bin/sh
# Replay of attention (mkdemo --replay dumps attn.q and attn.k before RoPE,
# attn.q_rope and attn.k_rope after it, attn.v and attn.core): a RoPE bug
# first shows in attn.q_rope and is confirmed by recomputing RoPE from the
# dumped q and k; a mask, scale, window or GQA bug first shows in
# attn.core and is confirmed by recomputing the attention from q_rope,
# k_rope and v.  Checked on f32 and bf16 dumps, on Hugging Face's
# [1, heads, seq, head_dim] layout of the RoPE states, with and without
# --heads; nothing is confirmed on a clean port, a precision-only port,
# a bug outside the variants, or when a tap the replay needs is missing.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

# demo DTYPE SEQ BUG: a candidate beside the reference of its dtype and length
demo() {
	[ -d "$T/ref-$1-$2" ] || "$MKDEMO" --replay --layers 3 --dtype "$1" --seq "$2" --ref-only "$T/ref-$1-$2" >/dev/null ||
		bail_out "mkdemo reference $1 $2 failed"
	"$MKDEMO" --replay --layers 3 --dtype "$1" --seq "$2" --bug "$3" --cand-only "$T/$3-$1-$2" >/dev/null ||
		bail_out "mkdemo --bug $3 failed"
}

# not_confirmed NAME: the first cause, if any, is not confirmed
not_confirmed() {
	_c=$(json_get causes.0.confirmed)
	check_that "$1" test -z "$_c" -o "$_c" = null
}

small() { awk -v x="$1" -v m="$2" 'BEGIN { exit !(x != "" && x + 0 < m + 0) }'; }

# confirmed DTYPE SEQ BUG CELL VARIANT MAX_REL: the bug's first divergence
# is CELL and its cause is confirmed first by VARIANT within MAX_REL
confirmed() {
	demo "$1" "$2" "$3"
	expect_exit 1 "$3 ($1, $2 positions)" "$TBISECT" check --json --no-history "$T/ref-$1-$2" "$T/$3-$1-$2"
	json_is "$3 ($1): first divergence $4" first_divergence.cell "$4"
	json_is "$3 ($1): $3 first" causes.0.id "$3"
	json_is "$3 ($1): confirmed by $5" causes.0.confirmed.variant "$5"
	_rel=$(json_get causes.0.confirmed.rel_l2)
	check_that "$3 ($1): residual $_rel below $6" small "$_rel" "$6"
}

confirmed f32 32 rope-style L0.attn.q_rope "interleaved pairs (2i, 2i+1)" 1e-6
confirmed f32 32 rope-theta L0.attn.q_rope "theta 5e+05 (the reference: 1e+04)" 1e-6
confirmed f32 32 rotate-half-sign L0.attn.q_rope "rotation by -theta (rotate_half's sign)" 1e-6
confirmed f32 32 partial-rope L0.attn.q_rope "rotary on 4 of 8 channels" 1e-6
confirmed f32 32 qk-norm L0.attn.q_rope "an RMSNorm per head on q and k" 1e-6
confirmed f32 32 attention-layout L0.attn.q_rope "q viewed as [head_dim, heads]" 1e-6
confirmed f32 128 decode-position L0.attn.q_rope "a RoPE table of 100 positions" 1e-6
confirmed f32 32 gqa-repeat L0.attn.core "kv heads tiled (h % kv_heads)" 1e-6
confirmed f32 32 softmax-scale L0.attn.core "softmax scale 1 (the reference: 0.354)" 1e-6
confirmed f32 32 attention-mask L0.attn.core "no causal mask" 1e-6
confirmed f32 32 sliding-window L0.attn.core "a sliding window of 8 positions" 1e-6
confirmed bf16 64 rope-theta L0.attn.q_rope "theta 5e+05 (the reference: 1e+04)" 1e-2
confirmed bf16 64 rope-style L0.attn.q_rope "interleaved pairs (2i, 2i+1)" 1e-2
confirmed bf16 64 sliding-window L0.attn.core "a sliding window of 8 positions" 1e-2
confirmed bf16 64 gqa-repeat L0.attn.core "kv heads tiled (h % kv_heads)" 1e-2

# a reference whose op the replay cannot model (a per-head RMSNorm before
# RoPE, against a port without it): said so, nothing ranked on it
expect_exit 1 "a reference with a qk-norm" "$TBISECT" check --no-history "$T/qk-norm-f32-32" "$T/ref-f32-32"
check_that "unknown reference op: said so" \
	grep -q "the reference's L0.attn.q_rope is not an op the replay knows (closest: RoPE" "$TAP_OUT"
check_that "unknown reference op: nothing confirmed" sh -c '! grep -q "confirmed by replay" "$1"' x "$TAP_OUT"
expect_exit 1 "the text report of a confirmed window" "$TBISECT" check --no-history "$T/ref-f32-32" "$T/sliding-window-f32-32"
check_that "text: confirmed by replay, the window fitted" \
	grep -q "^     confirmed by replay: a sliding window of 8 positions reproduces the candidate (rel_l2 " "$TAP_OUT"
expect_exit 1 "--heads given" "$TBISECT" check --json --no-history --heads 8 --kv-heads 2 "$T/ref-f32-32" "$T/gqa-repeat-f32-32"
json_is "--heads: confirmed the same" causes.0.confirmed.variant "kv heads tiled (h % kv_heads)"

demo f32 32 none
demo f32 32 dtype-precision
demo f32 32 mlp-activation
expect_exit 0 "a clean port" "$TBISECT" check --json --no-history "$T/ref-f32-32" "$T/none-f32-32"
json_is "clean: no cause" 'causes.#' 0
run_cmd "$TBISECT" check --json --no-history "$T/ref-f32-32" "$T/dtype-precision-f32-32"
not_confirmed "dtype-precision: nothing confirmed"
run_cmd "$TBISECT" check --json --no-history "$T/ref-f32-32" "$T/mlp-activation-f32-32"
json_is "a bug in the MLP: not blamed on attention" causes.0.id mlp-activation

# a tap the replay needs, missing on one side: the report names the taps
cp -r "$T/rope-style-f32-32" "$T/nok"
rm "$T/nok"/*attn.k_rope.npy
expect_exit 1 "RoPE without attn.k_rope" "$TBISECT" check --no-history "$T/ref-f32-32" "$T/nok"
check_that "without attn.k_rope: it names the taps to dump" \
	grep -q "replaying RoPE needs attn.q and attn.k before RoPE and attn.q_rope and attn.k_rope after it" "$TAP_OUT"
check_that "without attn.k_rope: nothing confirmed" sh -c '! grep -q "confirmed by replay" "$1"' x "$TAP_OUT"
cp -r "$T/softmax-scale-f32-32" "$T/nov"
rm "$T/nov"/*v_proj.npy
expect_exit 1 "the core without attn.v" "$TBISECT" check --no-history "$T/ref-f32-32" "$T/nov"
check_that "without attn.v: it names the taps to dump" \
	grep -q "replaying attn.core needs attn.q_rope, attn.k_rope (after RoPE) and attn.v on both sides" "$TAP_OUT"

if PY=$(find_python numpy); then
	# Hugging Face holds the states after RoPE as [batch, heads, seq, head_dim]
	for d in ref-f32-32 rope-style-f32-32 sliding-window-f32-32; do
		cp -r "$T/$d" "$T/hf-$d"
	done
	"$PY" - "$T"/hf-* <<'PYEOF'
import glob, sys
import numpy as np
for d in sys.argv[1:]:
    for f in glob.glob(d + '/*attn.*_rope.npy'):
        a = np.load(f)
        s, w = a.shape[-2:]
        np.save(f, a.reshape(1, s, w // 8, 8).transpose(0, 2, 1, 3).copy())
PYEOF
	expect_exit 1 "[1, heads, seq, head_dim] states: a RoPE bug" "$TBISECT" check --json --no-history "$T/hf-ref-f32-32" "$T/hf-rope-style-f32-32"
	json_is "[1, heads, seq, head_dim]: RoPE confirmed" causes.0.confirmed.variant "interleaved pairs (2i, 2i+1)"
	expect_exit 1 "[1, heads, seq, head_dim] states: a window" "$TBISECT" check --json --no-history "$T/hf-ref-f32-32" "$T/hf-sliding-window-f32-32"
	json_is "[1, heads, seq, head_dim]: window confirmed" causes.0.confirmed.variant "a sliding window of 8 positions"

	# bugs outside the variants: the attention output scaled, q_rope perturbed
	cp -r "$T/none-f32-32" "$T/scaled"
	cp -r "$T/none-f32-32" "$T/noisy"
	"$PY" - "$T" <<'PYEOF'
import glob, sys
import numpy as np
t = sys.argv[1]
f = glob.glob(t + '/scaled/layers.0.attn.core.npy')[0]
np.save(f, np.load(f) * np.float32(1.1))
f = glob.glob(t + '/noisy/layers.0.attn.q_rope.npy')[0]
a = np.load(f)
np.save(f, a + np.random.default_rng(3).standard_normal(a.shape).astype(np.float32) * np.float32(0.05))
PYEOF
	for d in scaled noisy; do
		expect_exit 1 "outside the variants: $d" "$TBISECT" check --json --no-history "$T/ref-f32-32" "$T/$d"
		not_confirmed "$d: nothing confirmed"
	done

	# variants the demo has no bug for: the output heads in another order,
	# logit soft-capping (the attention recomputed here from the dumped q, k, v)
	cp -r "$T/none-f32-32" "$T/permuted"
	cp -r "$T/ref-f32-32" "$T/capref"
	cp -r "$T/none-f32-32" "$T/capcand"
	cp -r "$T/none-f32-32" "$T/scale25"
	"$PY" - "$T" <<'PYEOF'
import sys
import numpy as np
t = sys.argv[1]
core = t + '/permuted/layers.0.attn.core.npy'
a = np.load(core)
s = a.shape[-2]
h = a.reshape(s, 8, 8).copy()
h[:, [0, 3]] = h[:, [3, 0]]
np.save(core, h.reshape(a.shape))
# q scaled up on both sides so that scores reach the cap: the reference
# attends as usual, the candidate caps its scores at 30;
# capref and capcand: q scaled up on both sides; scale25: q as dumped,
# scores scaled by 0.25 (no usual scale for a head dim of 8)
for side, cap, qmul, scale in (('capref', None, 8, 8 ** -0.5), ('capcand', 30.0, 8, 8 ** -0.5),
                               ('scale25', None, 1, 0.25)):
    d = t + '/' + side + '/layers.0.attn.'
    q = np.load(d + 'q_rope.npy') * np.float32(qmul)
    np.save(d + 'q_rope.npy', q)
    q = q.reshape(s, 8, 8).astype(np.float64)
    k = np.load(d + 'k_rope.npy').reshape(s, 2, 8).astype(np.float64)
    v = np.load(t + '/' + side + '/model.layers.0.self_attn.v_proj.npy').reshape(s, 2, 8).astype(np.float64)
    out = np.empty((s, 8, 8))
    for hd in range(8):
        sc = q[:, hd] @ k[:, hd // 4].T * scale
        if cap:
            sc = cap * np.tanh(sc / cap)
        sc = np.where(np.tri(s, dtype=bool), sc, -np.inf)
        p = np.exp(sc - sc.max(1, keepdims=True))
        out[:, hd] = (p / p.sum(1, keepdims=True)) @ v[:, hd // 4]
    np.save(d + 'core.npy', out.reshape(a.shape).astype(np.float32))
PYEOF
	expect_exit 1 "heads in another order" "$TBISECT" check --json --no-history "$T/ref-f32-32" "$T/permuted"
	json_is "permuted heads: attention-layout first" causes.0.id attention-layout
	json_is "permuted heads: confirmed, naming the heads" causes.0.confirmed.variant "heads in another order (output head 0 holds head 3)"
	expect_exit 1 "logit soft-capping" "$TBISECT" check --json --no-history "$T/capref" "$T/capcand"
	json_is "soft-capping: first divergence L0.attn.core" first_divergence.cell L0.attn.core
	json_is "soft-capping: softmax-scale first" causes.0.id softmax-scale
	json_is "soft-capping: confirmed at 30" causes.0.confirmed.variant "logit soft-capping at 30"
	expect_exit 1 "a softmax scale of no usual form" "$TBISECT" check --json --no-history "$T/ref-f32-32" "$T/scale25"
	json_is "scale 0.25: softmax-scale first" causes.0.id softmax-scale
	json_is "scale 0.25: fitted" causes.0.confirmed.variant "softmax scale 0.25, fitted (the reference: 0.354)"
else
	skip "Hugging Face layout and bugs outside the variants" "no python3 with numpy (Debian: python3-numpy)"
fi
tap_done
