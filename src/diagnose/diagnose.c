#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpus.h"
#include "diagnose/diagnose.h"

/* An output projection (attn.o, mlp.down) holds its group's output, and a
 * Hugging Face hook dump lists it before the group: diagnose the group's
 * cell, whose patterns the rules describe.  An MoE layer's per-slot rows
 * are its routed experts': diagnosed at their sum. */
static long group_cell(const tb_result *r, long target)
{
	const tb_cell_result *t, *g;
	const tb_tap_info *ti;

	if (target < 0 || (size_t)target >= r->n_cells)
		return target;
	t = &r->cells[target];
	if (t->by_slots && (g = tb_result_cell(r, t->cell.layer, TB_TAP_MLP_EXPERTS)) && g->status == TB_ST_DIVERGED)
		return g - r->cells;
	ti = tb_tap_info_of(t->cell.id);
	if (!ti || !ti->group_output)
		return target;
	g = tb_result_cell(r, t->cell.layer, ti->parent);
	return g && g->status == TB_ST_DIVERGED ? g - r->cells : target;
}

void tb_diagnosis_measured_text(const tb_diagnosis *d, const tb_result *r, char *buf, size_t size)
{
	char m[TB_CELL_NAME_MAX], t[TB_CELL_NAME_MAX];

	buf[0] = '\0';
	if (d->measured < 0 || d->asked < 0 || d->measured == d->asked)
		return;
	tb_cell_name(&r->cells[d->measured].cell, m, sizeof m);
	tb_cell_name(&r->cells[d->asked].cell, t, sizeof t);
	snprintf(buf, size, "measured at %s, the %s that %s is part of and that diverges as a whole", m,
		 r->cells[d->measured].cell.id == TB_TAP_ATTN ? "attention" : "MLP", t);
}

/* What a rule's texts name beside the features (tb_rule_ctx), with the
 * names it points into. */
typedef struct target_ctx {
	tb_rule_ctx ctx;
	char cell[TB_CELL_NAME_MAX], nan_cell[TB_CELL_NAME_MAX], measured[TB_CELL_NAME_MAX],
		alias_sum[TB_CELL_NAME_MAX];
} target_ctx;

static void target_ctx_of(const tb_result *r, const tb_diagnosis *d, long target, target_ctx *t)
{
	tb_rule_ctx *ctx = &t->ctx;
	long sum;

	*ctx = (tb_rule_ctx){NULL, NULL, NULL, NULL, -1, NULL, NULL, NULL, NULL};
	if (target >= 0) {
		const tb_cell_result *c = &r->cells[target];
		tb_cell_name(&c->cell, t->cell, sizeof t->cell);
		ctx->cell = t->cell;
		ctx->tap = c->cell.tap;
		ctx->layer = c->cell.layer;
		ctx->ref_name = c->ref ? c->ref->name : NULL;
		ctx->cand_name = c->cand ? c->cand->name : NULL;
		tb_cell_name(&r->cells[tb_features_measured(r, target)].cell, t->measured, sizeof t->measured);
		ctx->measured = t->measured;
		if ((sum = tb_sanity_aliased(r, target)) >= 0) {
			tb_cell_name(&r->cells[sum].cell, t->alias_sum, sizeof t->alias_sum);
			ctx->alias_sum = t->alias_sum;
		}
	}
	for (size_t i = 0; i < r->n_cells && !ctx->nan_cell; i++)
		if (r->cells[i].ref && r->cells[i].cand && r->cells[i].m.mismatch) {
			tb_cell_name(&r->cells[i].cell, t->nan_cell, sizeof t->nan_cell);
			ctx->nan_cell = t->nan_cell;
		}
	ctx->dup_tap = d->sanity.dup_layers[1] > d->sanity.dup_layers[0] ? d->sanity.dup_tap[1] : d->sanity.dup_tap[0];
}

/* Features and causes of one cell, given the model-wide findings. */
static int eval_target(const tb_session *s, const tb_result *r, const tb_diag_opts *o, const tb_diagnosis *d,
		       long target, double *features, tb_causes *out, tb_err *err)
{
	tb_diag_input in = {s, r, &d->origin, &d->sanity, o->heads, o->kv_heads};
	double lo[TB_F_COUNT], hi[TB_F_COUNT];
	target_ctx t;

	out->v = NULL;
	out->n = 0;
	target = group_cell(r, target);
	tb_features_compute(&in, target, features);
	if (r->verdict == TB_ST_MATCH || !o->rules)
		return 0;
	target_ctx_of(r, d, target, &t);
	tb_features_span(&in, target, features, lo, hi);
	return tb_ruleset_eval(o->rules, features, lo, hi, &t.ctx, TB_MAX_CAUSES, out, err);
}

/* A cause the replay confirmed ranks first, with its variant; one no rule
 * named joins the list, with the look-at of a rule that names it rendered
 * for the target. */
static int confirm(const tb_result *r, tb_diagnosis *d, const tb_ruleset *rules, tb_err *err)
{
	const tb_replay *rp = &d->replay;
	tb_causes *c = &d->causes;
	target_ctx t;
	char *look_at;
	size_t i = 0;

	while (i < c->n && strcmp(c->v[i].id, rp->cause))
		i++;
	if (i == c->n) {
		tb_cause *v = realloc(c->v, (c->n + 1) * sizeof *v);
		if (!v)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		c->v = v;
		memset(&v[c->n], 0, sizeof *v);
		v[c->n].id = strdup(rp->cause);
		v[c->n].why = strdup(rp->note);
		target_ctx_of(r, d, d->target, &t);
		look_at = tb_ruleset_look_at(rules, rp->cause, d->features, &t.ctx);
		v[c->n].look_at = look_at ? look_at : strdup("The op the replay names, in the reference's forward.");
		c->n++;
		if (!v[i].id || !v[i].why || !v[i].look_at)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	tb_cause found = c->v[i];
	found.confirmed = strdup(rp->variant);
	if (!found.confirmed)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	found.confirmed_rel_l2 = rp->rel_l2;
	found.score = 1;
	memmove(c->v + 1, c->v, i * sizeof *c->v);
	c->v[0] = found;
	return 0;
}

/* The replay of the first divergence needs only the result, so it runs
 * on a thread of its own while the caller's works out the origin, the
 * sanity findings and the features.  Both read tensors again: on a 16 MB
 * cell, about 15 ms for the replay and 10 ms for the rest. */
typedef struct replay_job {
	const tb_session *s;
	const tb_result *r;
	const tb_diag_opts *o;
	tb_replay *out;
	tb_err err;
	int rc;
} replay_job;

static void *replay_run(void *arg)
{
	replay_job *j = arg;

	j->rc = tb_replay_first_divergence(j->s, j->r, j->o->heads, j->o->kv_heads, j->out, &j->err);
	return NULL;
}

/* A streamed tensor read by both threads at once would restart its
 * stream at every turn: then the replay waits its turn. */
static bool any_streamed(const tb_result *r)
{
	for (size_t i = 0; i < r->n_cells; i++) {
		const tb_cell_result *c = &r->cells[i];
		if ((c->ref && tb_tensor_streamed(c->ref)) || (c->cand && tb_tensor_streamed(c->cand)))
			return true;
	}
	return false;
}

int tb_diagnose(const tb_session *s, const tb_result *r, const tb_diag_opts *o, long target, tb_diagnosis *d,
		tb_err *err)
{
	replay_job job = {.s = s, .r = r, .o = o, .out = &d->replay};
	bool replay = target == TB_TARGET_FIRST_DIVERGENCE && r->verdict == TB_ST_DIVERGED;
	pthread_t th;
	bool threaded = false;
	int rc = 0;

	memset(d, 0, sizeof *d);
	d->asked = d->measured = -1;
	if (replay && tb_threads_for(o->threads) > 1 && !any_streamed(r))
		threaded = pthread_create(&th, NULL, replay_run, &job) == 0;
	if (tb_origin_compute(r, o->origin_factor > 0 ? o->origin_factor : TB_ORIGIN_FACTOR, &d->origin, err) < 0 ||
	    tb_sanity_check(s, r, &d->sanity, err) < 0)
		rc = -1;
	else {
		d->asked = target == TB_TARGET_FIRST_DIVERGENCE ? r->first_div : target;
		d->target = group_cell(r, d->asked);
		d->measured = tb_features_measured(r, d->target);
		rc = eval_target(s, r, o, d, d->target, d->features, &d->causes, err);
	}
	if (threaded)
		pthread_join(th, NULL);
	else if (replay && rc == 0)
		replay_run(&job);
	if (rc == 0 && replay && job.rc < 0) {
		*err = job.err;
		rc = -1;
	}
	if (rc == 0 && replay && d->replay.cause)
		rc = confirm(r, d, o->rules, err);
	if (rc < 0)
		tb_diagnosis_done(d);
	return rc;
}

int tb_diagnose_cell(const tb_session *s, const tb_result *r, const tb_diag_opts *o, const tb_diagnosis *d,
		     long cell, tb_causes *out, tb_err *err)
{
	double features[TB_F_COUNT];

	return eval_target(s, r, o, d, cell, features, out, err);
}

void tb_diagnosis_done(tb_diagnosis *d)
{
	tb_origin_done(&d->origin);
	tb_sanity_done(&d->sanity);
	tb_causes_done(&d->causes);
}
