#include "config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare/tolfile.h"
#include "run/report.h"

void tb_report_from_run(tb_report *rep, const tb_run *run, const tb_run_config *cfg)
{
	memset(rep, 0, sizeof *rep);
	rep->ref_path = cfg->opts.ref_path;
	rep->cand_path = cfg->opts.cand_path;
	rep->pairing = run->sess.pairing;
	rep->result = run->res;
	rep->diag = run->have_diag ? &run->diag : NULL;
	rep->routing = &run->routing;
	rep->coverage = &run->coverage;
	rep->partial = run->partial;
	rep->map_warning = run->map_warning;
	rep->layout[0] = run->sess.ref ? &run->sess.ref->layout : NULL;
	rep->layout[1] = run->sess.cand ? &run->sess.cand->layout : NULL;
	rep->tolfile = cfg->tolfile;
}

#define MAX_UNPAIRED_SHOWN 20

char tb_status_glyph(int status)
{
	switch (status) {
	case TB_ST_MATCH: return '.';
	case TB_ST_CLOSE: return '~';
	case TB_ST_DIVERGED: return 'X';
	case TB_ST_MISSING: return '-';
	default: return '?';
	}
}

const char *tb_verdict_word(int verdict)
{
	return verdict == TB_ST_DIVERGED ? "DIVERGED" : verdict == TB_ST_CLOSE ? "CLOSE" : "MATCH";
}

/* Flat index -> one index per axis of shape (C order). */
static void unravel(uint64_t index, int ndim, const int64_t *shape, int64_t *idx)
{
	for (int i = ndim - 1; i >= 0; i--) {
		uint64_t d = shape[i] > 0 ? (uint64_t)shape[i] : 1;
		idx[i] = (int64_t)(index % d);
		index /= d;
	}
}

void tb_index_format(uint64_t index, int ndim, const int64_t *shape, char *buf, size_t size)
{
	int64_t idx[TB_MAX_DIMS];

	unravel(index, ndim, shape, idx);
	tb_shape_format(ndim, idx, buf, size);
}

/* JSON has no NaN or Infinity: they become null. */
static cJSON *num(double v)
{
	return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

static void add_num(cJSON *o, const char *k, double v)
{
	cJSON_AddItemToObject(o, k, num(v));
}

static void add_pair(cJSON *o, const char *k, double a, double b)
{
	cJSON *arr = cJSON_CreateArray();

	cJSON_AddItemToArray(arr, num(a));
	cJSON_AddItemToArray(arr, num(b));
	cJSON_AddItemToObject(o, k, arr);
}

static void add_str_or_null(cJSON *o, const char *k, const char *s)
{
	if (s)
		cJSON_AddStringToObject(o, k, s);
	else
		cJSON_AddNullToObject(o, k);
}

static void add_layer(cJSON *o, int layer)
{
	if (layer < 0)
		cJSON_AddNullToObject(o, "layer");
	else
		cJSON_AddNumberToObject(o, "layer", layer);
}

static cJSON *shape_json(int ndim, const int64_t *shape)
{
	cJSON *a = cJSON_CreateArray();

	for (int i = 0; i < ndim; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)shape[i]));
	return a;
}

void tb_report_each_warning(const tb_report *r, void (*fn)(void *ctx, const char *id, const char *text), void *ctx)
{
	if (r->partial && r->coverage) {
		char text[320];
		tb_report_coverage_warning(r, text, sizeof text);
		fn(ctx, "coverage", text);
	}
	if (r->map_warning && r->map_warning[0])
		fn(ctx, "map", r->map_warning);
	if (r->pairing && r->pairing->qk_note[0])
		fn(ctx, "qk-order", r->pairing->qk_note);
	/* a tower that diverged fails no exit code of the text grid's: it
	 * is said first */
	for (size_t i = 0; i < r->n_towers; i++) {
		const tb_tower_summary *s = &r->towers[i];
		char text[600];
		if (!s->failed && s->verdict != TB_ST_DIVERGED)
			continue;
		if (s->failed)
			snprintf(text, sizeof text, "the %s tower could not be compared: %s", s->name, s->error);
		else
			snprintf(text, sizeof text, "the %s tower diverges (first at %s); tbisect check --tower %s shows its grid",
				 s->name, s->first, s->name);
		fn(ctx, "tower", text);
	}
	for (size_t i = 0; r->diag && i < r->diag->sanity.n_warnings; i++)
		fn(ctx, r->diag->sanity.warnings[i].id, r->diag->sanity.warnings[i].text);
	for (size_t i = 0; r->result && i < r->result->n_cells; i++)
		if (r->result->cells[i].m.estimated) {
			fn(ctx, "sketch",
			   "a sketch took part: rel_l2, cosine and the positions' profile are estimates within the "
			   "bounds shown; max_abs, allclose, the logits' KL and top-k need the values, and so do the "
			   "causes' per-head, per-channel and logit facts (a per-channel offset is told from the "
			   "column sums, a shifted token sequence from the rows' norms, shifted and repeated dumps "
			   "from the estimates and block hashes, tied embeddings from the score the sketch measured "
			   "on its tree) and replay: rules that test them do not match, so a cause may go unnamed");
			break;
		}
}

static void text_warning(void *ctx, const char *id, const char *text)
{
	fprintf(ctx, "warning (%s): %s\n\n", id, text);
}

bool tb_cause_confirmation(const tb_cause *c, char *buf, size_t size)
{
	if (!c->confirmed)
		return false;
	snprintf(buf, size, "confirmed by replay: %s reproduces the candidate (rel_l2 %.2g)", c->confirmed,
		 c->confirmed_rel_l2);
	return true;
}

bool tb_replay_worth_saying(const tb_replay *rp)
{
	return rp->tried ? !rp->cause : strstr(rp->note, " needs ") != NULL;
}

double tb_noise_ratio(double rel_l2, double noise)
{
	if (rel_l2 == 0)
		return 0;
	return noise > 0 ? rel_l2 / noise : INFINITY;
}

void tb_layout_text(const tb_tree_layout *lo, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	if (!lo)
		return;
	if (lo->ranks > 0)
		len += (size_t)snprintf(buf, size, "%d tensor-parallel rank%s joined", lo->ranks, lo->ranks == 1 ? "" : "s");
	if (lo->n_steps > 0 && len < size) {
		int last = lo->first_step + lo->n_steps - 1;
		if (lo->step >= 0)
			snprintf(buf + len, size - len, "%sstep %d of %d..%d", len ? ", " : "", lo->step, lo->first_step, last);
		else
			snprintf(buf + len, size - len, "%ssteps %d..%d stitched along the positions", len ? ", " : "",
				 lo->first_step, last);
	}
}

int tb_report_step(const tb_report *r)
{
	for (int side = 1; side >= 0; side--)
		if (r->layout[side] && r->layout[side]->n_steps > 0 && r->layout[side]->step >= 0)
			return r->layout[side]->step;
	return -1;
}

static cJSON *layout_json(const tb_tree_layout *lo)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "ranks", lo->ranks);
	cJSON_AddNumberToObject(o, "steps", lo->n_steps);
	if (lo->n_steps > 0)
		cJSON_AddNumberToObject(o, "first_step", lo->first_step);
	if (lo->n_steps > 0 && lo->step >= 0)
		cJSON_AddNumberToObject(o, "step", lo->step);
	else
		cJSON_AddNullToObject(o, "step");
	cJSON_AddBoolToObject(o, "stitched", lo->n_steps > 0 && lo->step < 0);
	cJSON_AddNumberToObject(o, "stale_steps", lo->stale_steps);
	return o;
}

static cJSON *cell_json(const tb_cell_result *c, const tb_diagnosis *d, size_t at, int step, const tb_tolfile *tf)
{
	cJSON *o = cJSON_CreateObject();
	const tb_metrics *m = &c->m;
	bool have = c->ref && c->cand;

	add_layer(o, c->cell.layer);
	cJSON_AddStringToObject(o, "tap", c->cell.tap);
	if (step >= 0)
		cJSON_AddNumberToObject(o, "step", step);
	add_str_or_null(o, "ref_name", c->ref ? c->ref->name : NULL);
	add_str_or_null(o, "cand_name", c->cand ? c->cand->name : NULL);
	cJSON_AddStringToObject(o, "status", tb_status_name(c->status));
	if (tb_cell_partial(c))
		cJSON_AddTrueToObject(o, "partial");
	if (tb_cell_note(c))
		cJSON_AddStringToObject(o, "layout", tb_cell_note(c));
	cJSON_AddItemToObject(o, "shape", shape_json(c->ndim, c->shape));
	if (have && c->shape_mismatch)
		cJSON_AddItemToObject(o, "cand_shape", shape_json(c->cand->ndim, c->cand->shape));
	if (!have) {
		static const char *const keys[] = {"max_abs", "mean_abs", "rel_l2", "cosine", "norm_ratio",
						   "allclose_frac", "nan", "inf", "first_bad_position"};
		for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
			cJSON_AddNullToObject(o, keys[i]);
		cJSON_AddStringToObject(o, "reason", c->reason);
		return o;
	}
	add_num(o, "max_abs", m->max_abs);
	add_num(o, "mean_abs", m->mean_abs);
	add_num(o, "rel_l2", m->rel_l2);
	add_num(o, "cosine", m->cosine);
	add_num(o, "norm_ratio", m->norm_ratio);
	add_num(o, "allclose_frac", m->allclose_frac);
	if (c->excluded_positions)
		cJSON_AddNumberToObject(o, "excluded_positions", (double)c->excluded_positions);
	if (m->estimated) {
		cJSON_AddTrueToObject(o, "estimated");
		add_pair(o, "rel_l2_bound", m->rel_l2_lo, m->rel_l2_hi);
	}
	add_pair(o, "nan", (double)m->nan[0], (double)m->nan[1]);
	add_pair(o, "inf", (double)m->inf[0], (double)m->inf[1]);
	if (m->first_bad_position >= 0)
		cJSON_AddNumberToObject(o, "first_bad_position", (double)m->first_bad_position);
	else
		cJSON_AddNullToObject(o, "first_bad_position");
	cJSON_AddStringToObject(o, "reason", c->reason);
	cJSON_AddStringToObject(o, "ref_dtype", tb_dtype_name(c->ref->dtype));
	cJSON_AddStringToObject(o, "cand_dtype", tb_dtype_name(c->cand->dtype));
	cJSON_AddNumberToObject(o, "elements", (double)m->n);
	if (m->n && isfinite(m->max_abs) && !m->estimated) {
		int64_t idx[TB_MAX_DIMS];
		cJSON *w = cJSON_CreateObject(), *where = cJSON_AddArrayToObject(w, "index");
		/* An array of integers, as "shape" is, for scripts to index with. */
		unravel(m->worst_index, c->ndim, c->shape, idx);
		for (int i = 0; i < c->ndim; i++)
			cJSON_AddItemToArray(where, cJSON_CreateNumber((double)idx[i]));
		add_num(w, "ref", m->worst_ref);
		add_num(w, "cand", m->worst_cand);
		cJSON_AddItemToObject(o, "worst", w);
	}
	if (m->n_pos > 0)
		cJSON_AddNumberToObject(o, "positions", (double)m->n_pos);
	double noise = tb_tolfile_noise(tf, &c->cell, c->ref->name, c->cand->name);
	if (noise >= 0)
		add_num(o, "noise_ratio", tb_noise_ratio(m->rel_l2, noise));
	if (d) {
		add_num(o, "input_rel_l2", d->origin.input_rel_l2[at]);
		add_num(o, "amplification", d->origin.amplification[at]);
	}
	return o;
}

static cJSON *first_div_json(const tb_cell_result *c)
{
	cJSON *o = cJSON_CreateObject();
	char name[TB_CELL_NAME_MAX];

	add_layer(o, c->cell.layer);
	cJSON_AddStringToObject(o, "tap", c->cell.tap);
	tb_cell_name(&c->cell, name, sizeof name);
	cJSON_AddStringToObject(o, "cell", name);
	add_str_or_null(o, "ref_name", c->ref ? c->ref->name : NULL);
	add_str_or_null(o, "cand_name", c->cand ? c->cand->name : NULL);
	if (c->m.first_bad_position >= 0)
		cJSON_AddNumberToObject(o, "first_bad_position", (double)c->m.first_bad_position);
	else
		cJSON_AddNullToObject(o, "first_bad_position");
	return o;
}

/* The per-position profile, for scripts that plot or bisect positions. */
static void add_profile(cJSON *o, const tb_cell_result *c)
{
	cJSON *rel, *cos;

	if (c->m.n_pos <= 0)
		return;
	rel = cJSON_AddArrayToObject(o, "pos_rel_l2");
	cos = cJSON_AddArrayToObject(o, "pos_cosine");
	for (int64_t p = 0; p < c->m.n_pos; p++) {
		cJSON_AddItemToArray(rel, num(c->m.pos_rel_l2[p]));
		cJSON_AddItemToArray(cos, num(c->m.pos_cos[p]));
	}
}

static void add_cell_ref(cJSON *root, const char *key, const tb_result *res, long i)
{
	if (i >= 0)
		cJSON_AddItemToObject(root, key, first_div_json(&res->cells[i]));
	else
		cJSON_AddNullToObject(root, key);
}

void tb_report_coverage_warning(const tb_report *r, char *buf, size_t size)
{
	char cov[TB_COVERAGE_TEXT_MAX];

	tb_coverage_text(r->coverage, cov, sizeof cov);
	snprintf(buf, size, "%s (--allow-partial): the verdict covers the paired cells only, and no cause is named",
		 cov);
}

static void json_warning(void *ctx, const char *id, const char *text)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "id", id);
	cJSON_AddStringToObject(o, "text", text);
	cJSON_AddItemToArray(ctx, o);
}

static void routed_json(cJSON *o, const char *key, const tb_routed_pos *v, size_t n)
{
	cJSON *arr = cJSON_AddArrayToObject(o, key);

	for (size_t i = 0; i < n; i++) {
		cJSON *e = cJSON_CreateArray();
		cJSON_AddItemToArray(e, cJSON_CreateNumber((double)v[i].pos));
		cJSON_AddItemToArray(e, num(v[i].gap));
		cJSON_AddItemToArray(arr, e);
	}
}

/* "routing": null, or per MoE layer its agreement, flips and disagreements
 * as [position, the reference's gap]. */
static void routing_json(cJSON *root, const tb_routing *rt)
{
	cJSON *arr;

	if (!rt || !rt->n) {
		cJSON_AddNullToObject(root, "routing");
		return;
	}
	arr = cJSON_AddArrayToObject(root, "routing");
	for (size_t i = 0; i < rt->n; i++) {
		const tb_routing_layer *l = &rt->v[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "layer", l->layer);
		cJSON_AddNumberToObject(o, "positions", (double)l->positions);
		cJSON_AddNumberToObject(o, "k", (double)l->k);
		cJSON_AddNumberToObject(o, "agree", (double)l->agree);
		cJSON_AddNumberToObject(o, "excluded", (double)l->excluded);
		routed_json(o, "flipped", l->flipped, l->n_flipped);
		routed_json(o, "disagree", l->disagree, l->n_disagree);
		cJSON_AddItemToArray(arr, o);
	}
}

static void diag_json(cJSON *root, const tb_report *r)
{
	const tb_diagnosis *d = r->diag;
	cJSON *warn;

	if (r->coverage) {
		cJSON *c = cJSON_AddObjectToObject(root, "coverage"), *cells;
		char note[200];
		cJSON_AddNumberToObject(c, "paired", (double)r->coverage->paired);
		cJSON_AddNumberToObject(c, "ref_tensors", (double)r->coverage->tensors[0]);
		cJSON_AddNumberToObject(c, "cand_tensors", (double)r->coverage->tensors[1]);
		cells = cJSON_AddObjectToObject(c, "cells");
		cJSON_AddNumberToObject(cells, "paired", (double)r->coverage->cells_paired);
		cJSON_AddNumberToObject(cells, "ref", (double)r->coverage->cells[0]);
		cJSON_AddNumberToObject(cells, "cand", (double)r->coverage->cells[1]);
		tb_coverage_subtap_note(r->coverage, note, sizeof note);
		if (note[0])
			cJSON_AddStringToObject(c, "note", note);
	}
	routing_json(root, r->routing);
	if (!d)
		return;
	add_cell_ref(root, "origin", r->result, d->origin.origin);
	cJSON_AddNumberToObject(root, "origin_factor", d->origin.factor);
	cJSON_AddStringToObject(root, "origin_text", d->origin.text);
	add_num(root, "drift_per_layer", d->origin.drift);
	warn = cJSON_AddArrayToObject(root, "warnings");
	tb_report_each_warning(r, json_warning, warn);
	if (r->show_features) {
		cJSON *f = cJSON_AddObjectToObject(root, "features");
		for (int i = 0; i < TB_F_COUNT; i++)
			add_num(f, tb_feature_table[i].name, d->features[i]);
	}
}

static const tb_cell_result *find_logits(const tb_result *res)
{
	for (size_t i = 0; i < res->n_cells; i++)
		if (res->cells[i].logits)
			return &res->cells[i];
	return NULL;
}

/* "tower": the grid reported (null: the text decoder's); "towers": each
 * tower compared beside the text grid. */
static void add_towers(cJSON *root, const tb_report *r)
{
	cJSON *arr;

	if (r->tower)
		cJSON_AddStringToObject(root, "tower", r->tower);
	else
		cJSON_AddNullToObject(root, "tower");
	arr = cJSON_AddArrayToObject(root, "towers");
	for (size_t i = 0; arr && i < r->n_towers; i++) {
		const tb_tower_summary *s = &r->towers[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "tower", s->name);
		if (s->failed) {
			cJSON_AddNullToObject(o, "verdict");
			cJSON_AddStringToObject(o, "error", s->error);
		} else {
			cJSON_AddStringToObject(o, "verdict", tb_status_name(s->verdict));
			cJSON_AddNumberToObject(o, "cells", (double)s->cells);
			cJSON_AddNumberToObject(o, "diverged", (double)s->count[TB_ST_DIVERGED]);
			cJSON_AddNumberToObject(o, "missing", (double)s->count[TB_ST_MISSING]);
			if (s->first[0])
				cJSON_AddStringToObject(o, "first_divergence", s->first);
			else
				cJSON_AddNullToObject(o, "first_divergence");
		}
		cJSON_AddItemToArray(arr, o);
	}
}

cJSON *tb_report_json_tree(const tb_report *r)
{
	const tb_result *res = r->result;
	const tb_cell_result *lc = find_logits(res);
	cJSON *root = cJSON_CreateObject(), *tol, *cells, *causes, *unp;

	if (!root)
		return NULL;
	cJSON_AddStringToObject(root, "tool", "tbisect");
	cJSON_AddNumberToObject(root, "schema", 1);
	cJSON_AddStringToObject(root, "version", PACKAGE_VERSION);
	cJSON_AddStringToObject(root, "ref", r->ref_path);
	cJSON_AddStringToObject(root, "cand", r->cand_path);
	tol = cJSON_AddObjectToObject(root, "tolerance");
	add_num(tol, "atol", res->tol.atol);
	add_num(tol, "rtol", res->tol.rtol);
	add_num(tol, "diverge", res->tol.diverge);
	add_num(tol, "max_kl", res->tol.max_kl);
	cJSON_AddStringToObject(root, "verdict", tb_status_name(res->verdict));
	add_towers(root, r);
	if (res->first_div >= 0) {
		cJSON *fd = first_div_json(&res->cells[res->first_div]);
		add_profile(fd, &res->cells[res->first_div]);
		cJSON_AddItemToObject(root, "first_divergence", fd);
	} else
		cJSON_AddNullToObject(root, "first_divergence");
	causes = cJSON_AddArrayToObject(root, "causes");
	/* the cell the causes' numbers are of, when not the first divergence */
	if (r->diag && res->verdict != TB_ST_MATCH && r->diag->measured >= 0 && r->diag->measured != r->diag->asked)
		add_cell_ref(root, "causes_measured_at", res, r->diag->measured);
	else
		cJSON_AddNullToObject(root, "causes_measured_at");
	for (size_t i = 0; r->diag && res->verdict != TB_ST_MATCH && i < r->diag->causes.n; i++) {
		const tb_cause *c = &r->diag->causes.v[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "id", c->id);
		add_num(o, "score", c->score);
		cJSON_AddStringToObject(o, "why", c->why ? c->why : "");
		cJSON_AddStringToObject(o, "look_at", c->look_at ? c->look_at : "");
		if (c->confirmed) {
			cJSON *cf = cJSON_AddObjectToObject(o, "confirmed");
			cJSON_AddStringToObject(cf, "variant", c->confirmed);
			add_num(cf, "rel_l2", c->confirmed_rel_l2);
		} else {
			cJSON_AddNullToObject(o, "confirmed");
		}
		cJSON_AddItemToArray(causes, o);
	}
	cells = cJSON_AddArrayToObject(root, "cells");
	for (size_t i = 0; i < res->n_cells; i++)
		cJSON_AddItemToArray(cells, cell_json(&res->cells[i], r->diag, i, tb_report_step(r), r->tolfile));
	if (r->layout[0] && r->layout[1]) {
		cJSON *lay = cJSON_AddObjectToObject(root, "layout");
		cJSON_AddItemToObject(lay, "ref", layout_json(r->layout[0]));
		cJSON_AddItemToObject(lay, "cand", layout_json(r->layout[1]));
	}
	if (lc) {
		const tb_logit_metrics *lm = lc->logits;
		cJSON *o = cJSON_AddObjectToObject(root, "logits");
		add_num(o, "kl_mean", lm->kl_mean);
		add_num(o, "kl_last", lm->kl_last);
		add_num(o, "top1_agree", lm->top1_agree);
		add_num(o, "top5_overlap", lm->top5_overlap);
		add_num(o, "kl_max", lm->kl_max);
		if (lm->n_pos > 0) {
			const tb_logit_row *last = &lm->rows[lm->n_pos - 1];
			add_pair(o, "top1_logprob_last", last->top1_logprob[0], last->top1_logprob[1]);
			add_pair(o, "top1_last", (double)last->top1[0], (double)last->top1[1]);
		}
		cJSON_AddNumberToObject(o, "positions", (double)lm->n_pos);
		cJSON_AddNumberToObject(o, "vocab", (double)lm->vocab);
	} else {
		cJSON_AddNullToObject(root, "logits");
	}
	diag_json(root, r);
	if (r->history) {
		cJSON *h = cJSON_AddArrayToObject(root, "history");
		for (size_t i = 0; i < r->history->n; i++)
			cJSON_AddItemToArray(h, tb_pass_json(&r->history->passes[i]));
	}
	unp = cJSON_AddObjectToObject(root, "unpaired");
	for (int side = 0; side < 2; side++) {
		cJSON *arr = cJSON_AddArrayToObject(unp, side ? "cand" : "ref");
		for (size_t i = 0; i < r->pairing->n_unp[side]; i++)
			cJSON_AddItemToArray(arr, cJSON_CreateString(r->pairing->unp[side][i].tensor->name));
	}
	{
		cJSON *counts = cJSON_AddObjectToObject(root, "counts");
		for (int s = TB_ST_MATCH; s < TB_ST_COUNT; s++)
			cJSON_AddNumberToObject(counts, tb_status_name((tb_status)s), (double)res->count[s]);
	}
	return root;
}

char *tb_report_json(const tb_report *r)
{
	cJSON *root = tb_report_json_tree(r);
	char *text = root ? cJSON_Print(root) : NULL;

	cJSON_Delete(root);
	return text;
}

size_t tb_result_layer_taps(const tb_result *res, tb_cell *cols, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < res->n_cells; i++) {
		tb_cell col = res->cells[i].cell;
		bool seen = false;
		if (col.layer < 0)
			continue;
		col.layer = 0;
		for (size_t k = 0; k < n && !seen; k++)
			seen = tb_cell_eq(&cols[k], &col);
		if (seen || n == max)
			continue;
		cols[n++] = col;
	}
	/* Insertion sort by forward order (n is small). */
	for (size_t i = 1; i < n; i++) {
		for (size_t j = i; j > 0 && tb_cell_cmp(&cols[j], &cols[j - 1]) < 0; j--) {
			tb_cell tc = cols[j];
			cols[j] = cols[j - 1];
			cols[j - 1] = tc;
		}
	}
	return n;
}

/* The result of column col's tap in a layer (-1: model level). */
static const tb_cell_result *cell_at(const tb_result *res, int layer, const tb_cell *col)
{
	tb_cell want = *col;

	want.layer = layer;
	for (size_t i = 0; i < res->n_cells; i++)
		if (tb_cell_eq(&res->cells[i].cell, &want))
			return &res->cells[i];
	return NULL;
}

/* Print one grid line without trailing blanks. */
static void put_line(FILE *out, char *line)
{
	size_t n = strlen(line);

	while (n > 0 && line[n - 1] == ' ')
		line[--n] = '\0';
	fprintf(out, "%s\n", line);
}

/* Whether layer l is shown when the grid folds: the first and last
 * FOLD_EDGE layers, and the first divergence's layer with its neighbours. */
#define FOLD_EDGE 3
static bool layer_shown(const tb_result *res, int fold_above, int l)
{
	int fd = res->first_div >= 0 ? res->cells[res->first_div].cell.layer : -1;

	if (fold_above <= 0 || res->n_layers <= fold_above)
		return true;
	return l < FOLD_EDGE || l >= res->n_layers - FOLD_EDGE || (fd >= 0 && l >= fd - 1 && l <= fd + 1);
}

/* The glyph line of one layer. */
static void layer_line(FILE *out, const tb_result *res, int layer, const tb_cell *cols, size_t nc)
{
	char line[4096], label[16];
	size_t len;

	snprintf(label, sizeof label, "L%d", layer);
	len = (size_t)snprintf(line, sizeof line, "%-11s", label);
	for (size_t k = 0; k < nc && len < sizeof line; k++) {
		const tb_cell_result *c = cell_at(res, layer, &cols[k]);
		len += (size_t)snprintf(line + len, sizeof line - len, " %c%*s", c ? tb_status_glyph(c->status) : ' ',
					(int)strlen(cols[k].tap) - 1, "");
	}
	put_line(out, line);
}

/* Layers from..to (a folded run) in one line, with their diverged cells. */
static void folded_line(FILE *out, const tb_result *res, int from, int to)
{
	size_t div = 0;

	for (size_t i = 0; i < res->n_cells; i++)
		div += res->cells[i].cell.layer >= from && res->cells[i].cell.layer <= to &&
		       res->cells[i].status == TB_ST_DIVERGED;
	fprintf(out, "...         L%d-L%d folded: %d layers, %zu diverged cell%s\n", from, to, to - from + 1, div,
		div == 1 ? "" : "s");
}

void tb_report_grid(FILE *out, const tb_result *res, int fold_above)
{
	static const tb_tap_id model_taps[] = {TB_TAP_EMBED, TB_TAP_FINAL_NORM, TB_TAP_LOGITS};
	tb_cell cols[64];
	size_t nc = tb_result_layer_taps(res, cols, 64), len;
	char line[4096];

	len = (size_t)snprintf(line, sizeof line, "%-11s", "");
	for (size_t k = 0; k < nc && len < sizeof line; k++)
		len += (size_t)snprintf(line + len, sizeof line - len, " %s", cols[k].tap);
	put_line(out, line);
	for (int m = 0; m < 3; m++) {
		if (m == 1) {
			for (int layer = 0; layer < res->n_layers; layer++) {
				int end = layer;
				if (layer_shown(res, fold_above, layer)) {
					layer_line(out, res, layer, cols, nc);
					continue;
				}
				while (end + 1 < res->n_layers && !layer_shown(res, fold_above, end + 1))
					end++;
				folded_line(out, res, layer, end);
				layer = end;
			}
		}
		tb_cell model;
		tb_cell_make_id(&model, -1, model_taps[m]);
		const tb_cell_result *c = cell_at(res, -1, &model);
		if (c)
			fprintf(out, "%-11s %c\n", model.tap, tb_status_glyph(c->status));
	}
	fprintf(out, "legend: . match  ~ close  X diverged  - missing  (blank: not dumped)\n");
}

static void text_cell(FILE *out, const tb_cell_result *c, const tb_tolfile *tf)
{
	const tb_metrics *m = &c->m;
	char name[TB_CELL_NAME_MAX], shape[128], idx[128];

	tb_cell_name(&c->cell, name, sizeof name);
	fprintf(out, "  cell %s: %s (%s)\n", name, tb_status_name(c->status), c->reason);
	for (int side = 0; side < 2; side++) {
		const tb_tensor *t = side ? c->cand : c->ref;
		if (!t)
			continue;
		tb_shape_format(t->ndim, t->shape, shape, sizeof shape);
		fprintf(out, "  %s %s %s %s  (%s)\n", side ? "cand" : "ref ", t->name, tb_dtype_name(t->dtype), shape,
			t->path);
	}
	if (tb_cell_partial(c)) {
		tb_partial_describe(tb_cell_partial(c), shape, sizeof shape);
		fprintf(out, "  partial: %s\n", shape);
	}
	if (tb_cell_note(c))
		fprintf(out, "  layout: %s\n", tb_cell_note(c));
	if (!c->ref || !c->cand)
		return;
	if (c->shape_mismatch) {
		fprintf(out, "  no difference measured: with shapes that differ no element is read against its "
			     "counterpart\n");
		return;
	}
	if (c->by_sets) {
		fprintf(out, "  expert sets agree at %.2f%% of the positions compared; rel_l2 %.3g is the share that differ\n",
			100 * m->allclose_frac, m->rel_l2);
		if (m->first_bad_position >= 0)
			fprintf(out, "  first bad position: %lld of %lld\n", (long long)m->first_bad_position,
				(long long)m->n_pos);
		return;
	}
	tb_index_format(m->worst_index, c->ndim, c->shape, idx, sizeof idx);
	if (m->estimated && !m->exact)
		fprintf(out, "  rel_l2 ~%.3e in [%.3e, %.3e]  cosine ~%.6f  norm_ratio %.4f  (estimated from a sketch: "
			     "max_abs, mean_abs and allclose need the values)\n",
			m->rel_l2, m->rel_l2_lo, m->rel_l2_hi, m->cosine, m->norm_ratio);
	else if (isfinite(m->max_abs))
		fprintf(out, "  rel_l2 %.3e  cosine %.6f  norm_ratio %.4f  max_abs %.3e at %s (ref %g, cand %g)\n",
			m->rel_l2, m->cosine, m->norm_ratio, m->max_abs, idx, m->worst_ref, m->worst_cand);
	else
		fprintf(out, "  rel_l2 nan  cosine nan  norm_ratio nan  max_abs nan (no element finite on both sides)\n");
	if (m->estimated && !m->exact)
		fprintf(out, "  NaN %llu/%llu  Inf %llu/%llu\n", (unsigned long long)m->nan[0],
			(unsigned long long)m->nan[1], (unsigned long long)m->inf[0], (unsigned long long)m->inf[1]);
	else
		fprintf(out, "  mean_abs %.3e  allclose %.2f%%  NaN %llu/%llu  Inf %llu/%llu\n", m->mean_abs,
			100 * m->allclose_frac, (unsigned long long)m->nan[0], (unsigned long long)m->nan[1],
			(unsigned long long)m->inf[0], (unsigned long long)m->inf[1]);
	double noise = c->ref && c->cand ? tb_tolfile_noise(tf, &c->cell, c->ref->name, c->cand->name) : -1;
	if (noise >= 0)
		fprintf(out, "  noise: rel_l2 is %.3g times the reference's own between its two runs (%.3e, tbisect calibrate)\n",
			tb_noise_ratio(m->rel_l2, noise), noise);
	if (m->n_pos > 0) {
		if (m->first_bad_position >= 0)
			fprintf(out, "  first bad position: %lld of %lld (rel_l2 there %.3e, cosine %.4f)\n",
				(long long)m->first_bad_position, (long long)m->n_pos,
				m->pos_rel_l2[m->first_bad_position], m->pos_cos[m->first_bad_position]);
		else
			fprintf(out, "  every one of %lld positions within diverge\n", (long long)m->n_pos);
		if (c->excluded_positions)
			fprintf(out, "  %lld position%s left out: an MoE flip upstream (see routing)\n",
				(long long)c->excluded_positions, c->excluded_positions == 1 ? "" : "s");
	}
	if (c->logits) {
		const tb_logit_metrics *lm = c->logits;
		fprintf(out, "  logits: KL mean %.3e last %.3e  top-1 agree %.1f%%  top-5 overlap %.1f%%\n", lm->kl_mean,
			lm->kl_last, 100 * lm->top1_agree, 100 * lm->top5_overlap);
	}
}

/* Positions listed in a routing line, at most. */
#define ROUTED_SHOWN 8

static size_t routed_text(char *buf, size_t size, size_t n, const char *what, const tb_routed_pos *v, size_t count)
{
	if (!count || n >= size)
		return n;
	n += (size_t)snprintf(buf + n, size - n, "; %s at", what);
	for (size_t i = 0; i < count && i < ROUTED_SHOWN && n < size; i++) {
		n += (size_t)snprintf(buf + n, size - n, "%s %lld", i ? "," : "", (long long)v[i].pos);
		if (isfinite(v[i].gap) && n < size)
			n += (size_t)snprintf(buf + n, size - n, " (gap %.2g)", v[i].gap);
	}
	if (count > ROUTED_SHOWN && n < size)
		n += (size_t)snprintf(buf + n, size - n, " and %zu more", count - ROUTED_SHOWN);
	return n;
}

void tb_routing_layer_text(const tb_routing_layer *l, char *buf, size_t size)
{
	size_t n = (size_t)snprintf(buf, size, "L%d: %lld of %lld positions agree (top-%lld)", l->layer,
				    (long long)l->agree, (long long)l->positions, (long long)l->k);

	n = routed_text(buf, size, n, "flipped", l->flipped, l->n_flipped);
	n = routed_text(buf, size, n, "differ", l->disagree, l->n_disagree);
	if (l->excluded && n < size)
		snprintf(buf + n, size - n, "; %lld left out (flipped in an earlier layer)", (long long)l->excluded);
}

/* Per MoE layer: how many positions chose the same experts, and where not. */
static void text_routing(FILE *out, const tb_routing *rt)
{
	char line[TB_ROUTING_TEXT_MAX];

	if (!rt || !rt->n)
		return;
	fprintf(out, "\nrouting (%s):\n", TB_ROUTING_ABOUT);
	for (size_t i = 0; i < rt->n; i++) {
		tb_routing_layer_text(&rt->v[i], line, sizeof line);
		fprintf(out, "  %s\n", line);
	}
}

static void text_diagnosis(FILE *out, const tb_report *r)
{
	const tb_diagnosis *d = r->diag;
	const tb_result *res = r->result;

	if (d->origin.text[0])
		fprintf(out, "\norigin: %s\n", d->origin.text);
	if (r->show_features) {
		fprintf(out, "\nfeatures of %s:\n", d->target >= 0 ? "the target cell" : "the model (no target cell)");
		for (int i = 0; i < TB_F_COUNT; i++)
			fprintf(out, "  %-22s %.6g\n", tb_feature_table[i].name, d->features[i]);
	}
	if (res->verdict == TB_ST_MATCH)
		return;
	if (r->partial) {
		fprintf(out, "\nlikely causes: none named on a partial pairing (pair the rest with --map)\n");
		return;
	}
	if (!d->causes.n)
		fprintf(out, "\nlikely causes: no diagnosis rule matches this pattern\n");
	else {
		char measured[256];
		tb_diagnosis_measured_text(d, r->result, measured, sizeof measured);
		fprintf(out, "\nlikely causes%s%s%s:\n", measured[0] ? " (" : "", measured, measured[0] ? ")" : "");
	}
	for (size_t i = 0; i < d->causes.n; i++) {
		const tb_cause *c = &d->causes.v[i];
		char cf[160];
		fprintf(out, "  %zu. %s (score %.2f)\n", i + 1, c->id, c->score);
		if (tb_cause_confirmation(c, cf, sizeof cf))
			fprintf(out, "     %s\n", cf);
		fprintf(out, "     why: %s\n     look at: %s\n", c->why, c->look_at);
	}
	if (tb_replay_worth_saying(&d->replay))
		fprintf(out, "  %s\n", d->replay.note);
}

int tb_report_text(FILE *out, const tb_report *r)
{
	const tb_result *res = r->result;
	const tb_pairing *p = r->pairing;

	fprintf(out, "tbisect %s\n", PACKAGE_VERSION);
	for (int side = 0; side < 2; side++) {
		char lay[160];
		tb_layout_text(r->layout[side], lay, sizeof lay);
		fprintf(out, "  %s %s%s%s%s\n", side ? "cand" : "ref ", side ? r->cand_path : r->ref_path, lay[0] ? " (" : "",
			lay, lay[0] ? ")" : "");
	}
	fprintf(out, "tolerance: atol %g  rtol %g  diverge %g  max-kl %g\n", res->tol.atol, res->tol.rtol,
		res->tol.diverge, res->tol.max_kl);
	if (r->tower)
		fprintf(out, "grid: the %s tower\n", r->tower);
	fprintf(out, "cells: %zu (%zu match, %zu close, %zu diverged, %zu missing); unpaired tensors: ref %zu, cand %zu\n\n",
		res->n_cells, res->count[TB_ST_MATCH], res->count[TB_ST_CLOSE], res->count[TB_ST_DIVERGED],
		res->count[TB_ST_MISSING], p->n_unp[0], p->n_unp[1]);
	/* Faults of the dumps themselves come before any metric is read. */
	tb_report_each_warning(r, text_warning, out);
	tb_report_grid(out, res, 0);
	if (r->coverage) {
		char note[200];
		tb_coverage_subtap_note(r->coverage, note, sizeof note);
		if (note[0])
			fprintf(out, "\nnote: %s\n", note);
	}
	for (int side = 0; side < 2; side++) {
		size_t n = p->n_unp[side];
		if (!n)
			continue;
		size_t shown = 0, towers = 0;
		fprintf(out, "\nunpaired in %s:\n", side ? "cand" : "ref");
		/* a tower's tensors are told as one line: their grid is their own */
		for (size_t i = 0; i < n; i++) {
			if (p->unp[side][i].kind == TB_UNP_TOWER)
				towers++;
			else if (shown++ < MAX_UNPAIRED_SHOWN)
				fprintf(out, "  %s  (%s)\n", p->unp[side][i].tensor->name, p->unp[side][i].reason);
		}
		if (shown > MAX_UNPAIRED_SHOWN)
			fprintf(out, "  ... and %zu more\n", shown - MAX_UNPAIRED_SHOWN);
		if (towers)
			fprintf(out, "  %zu tensor%s of towers (no cells of the text decoder: --tower NAME compares a tower)\n",
				towers, towers == 1 ? "" : "s");
	}
	text_routing(out, r->routing);
	if (res->first_div >= 0) {
		char name[TB_CELL_NAME_MAX];
		tb_cell_name(&res->cells[res->first_div].cell, name, sizeof name);
		fprintf(out, "\nfirst divergence: %s\n", name);
		text_cell(out, &res->cells[res->first_div], r->tolfile);
	}
	if (r->diag)
		text_diagnosis(out, r);
	if (r->history && r->show_history) {
		fprintf(out, "\nhistory (%zu pass%s):\n", r->history->n, r->history->n == 1 ? "" : "es");
		for (size_t i = 0; i < r->history->n; i++)
			fprintf(out, "  %s\n", r->history->passes[i].note);
		if (r->history_unchanged && r->history->n)
			fprintf(out, "  no new pass: the inputs are those of pass %d\n",
				r->history->passes[r->history->n - 1].number);
	}
	if (r->n_towers) {
		fprintf(out, "\ntowers (each its own grid: --tower NAME shows it):\n");
		for (size_t i = 0; i < r->n_towers; i++) {
			char line[512];
			tb_tower_text(&r->towers[i], line, sizeof line);
			fprintf(out, "  %s\n", line);
		}
	}
	fprintf(out, "\nverdict: %s\n", tb_status_name(res->verdict));
	return ferror(out) ? -1 : 0;
}
