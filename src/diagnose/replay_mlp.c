#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "diagnose/replay_ops.h"

#define BLOCK 4096

/* The variants of mlp.act = f(gate, up).  The OAI ones are gpt-oss's
 * SwiGLU (transformers models/gpt_oss/modeling_gpt_oss.py, GptOssExperts:
 * gate.clamp(max=limit), up.clamp(-limit, limit), glu = gate
 * sigmoid(alpha gate), (up + 1) glu; alpha 1.702, swiglu_limit 7) and the
 * ways ports lose its parts; SILU_CLAMPED is a SwiGLU with the same clamps. */
typedef enum variant {
	SILU,
	GELU,
	GELU_TANH,
	RELU,
	RELU2,
	SILU_SWAPPED,
	OAI,
	OAI_NO_PLUS_ONE,
	OAI_NO_CLAMP,
	OAI_CLAMP_SWAPPED,
	OAI_SWAPPED,
	SILU_CLAMPED,
	N_VARIANTS
} variant;

#define OAI_ALPHA 1.702
#define OAI_LIMIT 7.0

static const struct {
	const char *name;
	tb_cause_id cause; /* what the candidate computing it instead means */
} variants[N_VARIANTS] = {
	[SILU] = {"silu", TB_CAUSE_MLP_ACTIVATION},
	[GELU] = {"gelu (exact)", TB_CAUSE_MLP_ACTIVATION},
	[GELU_TANH] = {"gelu (tanh)", TB_CAUSE_MLP_ACTIVATION},
	[RELU] = {"relu", TB_CAUSE_MLP_ACTIVATION},
	[RELU2] = {"relu^2", TB_CAUSE_MLP_ACTIVATION},
	[SILU_SWAPPED] = {"gate and up swapped", TB_CAUSE_MLP_GATING},
	[OAI] = {"swiglu-oai (alpha 1.702, limit 7, +1 on up)", TB_CAUSE_MLP_ACTIVATION},
	[OAI_NO_PLUS_ONE] = {"swiglu-oai without the +1 on up", TB_CAUSE_MLP_ACTIVATION},
	[OAI_NO_CLAMP] = {"swiglu-oai without the clamps (swiglu_limit)", TB_CAUSE_MLP_ACTIVATION},
	[OAI_CLAMP_SWAPPED] = {"swiglu-oai, gate clamped +-7, up at most 7", TB_CAUSE_MLP_ACTIVATION},
	[OAI_SWAPPED] = {"swiglu-oai with gate and up swapped", TB_CAUSE_MLP_GATING},
	[SILU_CLAMPED] = {"silu, gate and up clamped (swiglu_limit 7)", TB_CAUSE_MLP_ACTIVATION},
};

static double act(variant v, double x)
{
	switch (v) {
	case GELU: return 0.5 * x * (1 + erf(x / sqrt(2)));
	case GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
	case RELU: return x > 0 ? x : 0;
	case RELU2: return x > 0 ? x * x : 0;
	default: return x / (1 + exp(-x));
	}
}

static double oai(double g, double u, bool clamp_gate_both, bool clamp_up_both, bool clamp, bool plus_one)
{
	if (clamp) {
		g = clamp_gate_both ? fmax(fmin(g, OAI_LIMIT), -OAI_LIMIT) : fmin(g, OAI_LIMIT);
		u = clamp_up_both ? fmax(fmin(u, OAI_LIMIT), -OAI_LIMIT) : fmin(u, OAI_LIMIT);
	}
	return (plus_one ? u + 1 : u) * g / (1 + exp(-OAI_ALPHA * g));
}

static double predict(variant v, double g, double u)
{
	switch (v) {
	case SILU_SWAPPED: return act(SILU, u) * g;
	case OAI: return oai(g, u, false, true, true, true);
	case OAI_NO_PLUS_ONE: return oai(g, u, false, true, true, false);
	case OAI_NO_CLAMP: return oai(g, u, false, true, false, true);
	case OAI_CLAMP_SWAPPED: return oai(g, u, true, false, true, true);
	case OAI_SWAPPED: return oai(u, g, false, true, true, true);
	case SILU_CLAMPED: return act(SILU, fmin(g, OAI_LIMIT)) * fmax(fmin(u, OAI_LIMIT), -OAI_LIMIT);
	default: return act(v, g) * u;
	}
}

/* rel_l2 of each variant's prediction from (gate, up) against act, over
 * one side's tensors, read a block at a time; *finite false when they
 * hold a non-finite value. */
static int residuals(tb_tensor *gate, tb_tensor *up, tb_tensor *out, double *rel, bool *finite, tb_err *err)
{
	float g[BLOCK], u[BLOCK], a[BLOCK];
	double dd[N_VARIANTS] = {0}, aa = 0;

	*finite = true;
	if (tb_tensor_acquire(gate, err) < 0)
		return -1;
	if (tb_tensor_acquire(up, err) < 0) {
		tb_tensor_release(gate);
		return -1;
	}
	if (tb_tensor_acquire(out, err) < 0) {
		tb_tensor_release(gate);
		tb_tensor_release(up);
		return -1;
	}
	for (uint64_t i = 0; i < out->numel && *finite; i += BLOCK) {
		uint64_t n = out->numel - i < BLOCK ? out->numel - i : BLOCK;
		tb_tensor_read_f32(gate, i, n, g);
		tb_tensor_read_f32(up, i, n, u);
		tb_tensor_read_f32(out, i, n, a);
		*finite = tb_replay_finite(g, n) && tb_replay_finite(u, n) && tb_replay_finite(a, n);
		for (uint64_t k = 0; k < n && *finite; k++) {
			aa += (double)a[k] * a[k];
			for (int v = 0; v < N_VARIANTS; v++) {
				double d = predict((variant)v, g[k], u[k]) - a[k];
				dd[v] += d * d;
			}
		}
	}
	tb_tensor_release(gate);
	tb_tensor_release(up);
	tb_tensor_release(out);
	for (int v = 0; v < N_VARIANTS; v++)
		rel[v] = tb_rel_l2(dd[v], aa);
	return 0;
}

static variant best(const double *rel, int skip)
{
	int b = -1;

	for (int v = 0; v < N_VARIANTS; v++)
		if (v != skip && (b < 0 || rel[v] < rel[b]))
			b = v;
	return (variant)b;
}

int tb_replay_mlp_act(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	int layer = in->target->cell.layer;
	const tb_pair *gate = tb_replay_pair(in, layer, TB_TAP_MLP_GATE), *up = tb_replay_pair(in, layer, TB_TAP_MLP_UP);
	const tb_pair *act = tb_replay_pair(in, layer, TB_TAP_MLP_ACT);
	double rel_ref[N_VARIANTS], rel_cand[N_VARIANTS];
	bool finite_r, finite_c;
	variant vr, vc;

	if (!gate || !up || !act) {
		snprintf(out->note, sizeof out->note,
			 "replaying mlp.act needs mlp.gate and mlp.up dumped on both sides (mkdemo --replay, forward hooks on gate_proj and up_proj)");
		return 0;
	}
	if (gate->ref->numel != act->ref->numel || up->ref->numel != act->ref->numel ||
	    gate->cand->numel != act->cand->numel || up->cand->numel != act->cand->numel) {
		snprintf(out->note, sizeof out->note, "mlp.gate, mlp.up and mlp.act differ in size: not one gated MLP");
		return 0;
	}
	out->tried = true;
	if (residuals(gate->ref, up->ref, act->ref, rel_ref, &finite_r, err) < 0 ||
	    residuals(gate->cand, up->cand, act->cand, rel_cand, &finite_c, err) < 0)
		return -1;
	if (!finite_r || !finite_c) {
		snprintf(out->note, sizeof out->note, "no replay from non-finite values");
		return 0;
	}
	vr = best(rel_ref, -1);
	vc = best(rel_cand, vr);
	tb_replay_decide(in, out, tb_replay_floor(act->ref, act->cand, 0x1p-20, 1),
			 &(tb_replay_fit){variants[vr].name, rel_ref[vr], rel_cand[vr], variants[vc].name, variants[vc].cause,
					  rel_cand[vc], 0});
	return 0;
}
