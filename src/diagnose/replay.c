#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "diagnose/origin.h"
#include "diagnose/replay.h"

#define BLOCK 4096

/* The variants of mlp.act = f(gate, up). */
typedef enum variant { SILU, GELU, GELU_TANH, RELU, RELU2, SILU_SWAPPED, N_VARIANTS } variant;

static const struct {
	const char *name;
	const char *cause; /* what the candidate computing it instead means */
} variants[N_VARIANTS] = {
	[SILU] = {"silu", "mlp-activation"},
	[GELU] = {"gelu (exact)", "mlp-activation"},
	[GELU_TANH] = {"gelu (tanh)", "mlp-activation"},
	[RELU] = {"relu", "mlp-activation"},
	[RELU2] = {"relu^2", "mlp-activation"},
	[SILU_SWAPPED] = {"gate and up swapped", "mlp-gating"},
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

static double predict(variant v, double g, double u)
{
	return v == SILU_SWAPPED ? act(SILU, u) * g : act(v, g) * u;
}

/* rel_l2 of each variant's prediction from (gate, up) against act, over
 * one side's tensors; false when they hold a non-finite value. */
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
		for (uint64_t k = 0; k < n; k++) {
			if (!isfinite(g[k]) || !isfinite(u[k]) || !isfinite(a[k])) {
				*finite = false;
				break;
			}
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
		rel[v] = aa > 0 ? sqrt(dd[v] / aa) : dd[v] > 0 ? INFINITY : 0;
	return 0;
}

static variant best(const double *rel)
{
	variant b = SILU;

	for (int v = 1; v < N_VARIANTS; v++)
		if (rel[v] < rel[b])
			b = (variant)v;
	return b;
}

/* The residual below which a replay matches: the rounding of a half-width
 * act's storage, else the replay's own float error. */
static double rounding(tb_dtype dt)
{
	return dt == TB_DT_BF16 || dt == TB_DT_F16 ? tb_dtype_rounding(dt) : 0x1p-20;
}

/* The session's pair of a result cell (its tensors are the readable ones). */
static const tb_pair *pair_of(const tb_session *s, const tb_cell_result *c)
{
	long i = c ? tb_pairing_find(s->pairing, &c->cell) : -1;

	return i >= 0 ? &s->pairing->pairs[i] : NULL;
}

int tb_replay_first_divergence(const tb_session *s, const tb_result *r, tb_replay *out, tb_err *err)
{
	const tb_cell_result *first;
	const tb_pair *gate, *up, *act;
	double rel_ref[N_VARIANTS], rel_cand[N_VARIANTS], floor;
	bool finite_r, finite_c;
	variant vr, vc;

	memset(out, 0, sizeof *out);
	if (r->first_div < 0)
		return 0;
	first = &r->cells[r->first_div];
	if (first->cell.layer < 0 || first->cell.id != TB_TAP_MLP_ACT) {
		snprintf(out->note, sizeof out->note, "no replay for %s", first->cell.tap);
		return 0;
	}
	gate = pair_of(s, tb_result_cell(r, first->cell.layer, TB_TAP_MLP_GATE));
	up = pair_of(s, tb_result_cell(r, first->cell.layer, TB_TAP_MLP_UP));
	act = pair_of(s, first);
	if (!gate || !up || !gate->ref || !gate->cand || !up->ref || !up->cand || !act->ref || !act->cand) {
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
	floor = fmax(rounding(act->ref->dtype), rounding(act->cand->dtype));
	vr = best(rel_ref);
	snprintf(out->ref_variant, sizeof out->ref_variant, "%s", variants[vr].name);
	out->ref_rel_l2 = rel_ref[vr];
	if (rel_ref[vr] > floor) {
		snprintf(out->note, sizeof out->note,
			 "no variant reproduces the reference's mlp.act (best: %s, rel_l2 %.2g): another MLP", variants[vr].name,
			 rel_ref[vr]);
		return 0;
	}
	vc = best(rel_cand);
	/* within the dtype and the reference's own replay noise, and a clear
	 * step from the reference's variant, which the candidate departs from */
	double within = fmax(floor, 4 * rel_ref[vr]);
	if (vc == vr || rel_cand[vc] > within || rel_cand[vr] < 10 * within) {
		snprintf(out->note, sizeof out->note,
			 "replay: no variant reproduces the candidate's mlp.act (best: %s, rel_l2 %.2g); the bug is elsewhere",
			 variants[vc].name, rel_cand[vc]);
		return 0;
	}
	out->cause = variants[vc].cause;
	snprintf(out->variant, sizeof out->variant, "%s", variants[vc].name);
	out->rel_l2 = rel_cand[vc];
	snprintf(out->note, sizeof out->note,
		 "replay of L%d.mlp.act: %s reproduces the candidate (rel_l2 %.2g), the reference computes %s (rel_l2 %.2g)",
		 first->cell.layer, variants[vc].name, rel_cand[vc], variants[vr].name, rel_ref[vr]);
	return 0;
}
