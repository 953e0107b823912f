/*
 * answers: what each tool of `tbisect mcp` answers, sized for an agent's
 * context.  The numbers are cut out of check --json's report tree (so the
 * keys and values are the report's), and what the report does not hold
 * (a cell's profile summarised, worst channels, per-head rows, causes of
 * another cell, a replay, a map, the passes) comes from the same run
 * through the library that check and the interactive view use.  Every
 * answer is a summary: lists are cut to a few entries with their totals
 * beside them, and detail or a cursor asks for more; no answer carries a
 * tensor's values.
 */
#include "config.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare/inspect.h"
#include "diagnose/heads.h"
#include "mcp/answers.h"
#include "run/report.h"
#include "run/suggest.h"

/* How many entries a summary keeps, and detail. */
enum {
	TOP_CAUSES = 3,
	TOP_WARNINGS = 3,
	TOP_UNPAIRED = 10,
	TOP_RUNS = 8,
	TOP_RUNS_DETAIL = 64,
	TOP_POSITIONS = 5,
	TOP_POSITIONS_DETAIL = 16,
	TOP_CHANNELS = 5,
	TOP_CHANNELS_DETAIL = 20,
	TOP_HEADS = 4,
	PROFILE_MAX = 4096, /* detail's whole per-position profile, up to this many positions */
	CELLS_PAGE = 25,
	CELLS_PAGE_MAX = 200,
	PASSES_SHOWN = 5,
};

static const cJSON *rep_item(const mcp_pair *p, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(mcp_pair_report(p), key);
}

static void copy(cJSON *dst, const mcp_pair *p, const char *key)
{
	const cJSON *v = rep_item(p, key);

	cJSON_AddItemToObject(dst, key, v ? cJSON_Duplicate(v, true) : cJSON_CreateNull());
}

/* The first n entries of the report's array key, and key_total. */
static void copy_head(cJSON *dst, const cJSON *arr, const char *key, int n)
{
	cJSON *out = cJSON_AddArrayToObject(dst, key);
	const cJSON *v;
	char total[64];
	int k = 0;

	cJSON_ArrayForEach(v, arr) {
		if (k++ < n)
			cJSON_AddItemToArray(out, cJSON_Duplicate(v, true));
	}
	snprintf(total, sizeof total, "%s_total", key);
	cJSON_AddNumberToObject(dst, total, cJSON_GetArraySize(arr));
}

static cJSON *num(double v)
{
	return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
}

static void cell_name(const tb_cell_result *c, char *buf, size_t size)
{
	tb_cell_name(&c->cell, buf, size);
}

/* The per-position profile in a few numbers: runs of positions past the
 * cell's diverge threshold and the worst positions. */
static cJSON *profile_json(const tb_cell_result *c, bool detail)
{
	const tb_metrics *m = &c->m;
	cJSON *o, *runs, *worst;
	int64_t bad = 0, n_runs = 0, from = -1;
	int max_runs = detail ? TOP_RUNS_DETAIL : TOP_RUNS, max_worst = detail ? TOP_POSITIONS_DETAIL : TOP_POSITIONS;
	int64_t *top;
	int n_top = 0;

	if (m->n_pos <= 0 || !m->pos_rel_l2)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "positions", (double)m->n_pos);
	cJSON_AddNumberToObject(o, "diverge", c->tol.diverge);
	runs = cJSON_AddArrayToObject(o, "bad_runs");
	for (int64_t p = 0; p <= m->n_pos; p++) {
		bool is_bad = p < m->n_pos && !(m->pos_rel_l2[p] <= c->tol.diverge) && !isnan(m->pos_rel_l2[p]);
		bad += is_bad;
		if (is_bad && from < 0)
			from = p;
		if (!is_bad && from >= 0) {
			if (n_runs++ < max_runs) {
				cJSON *r = cJSON_CreateArray();
				cJSON_AddItemToArray(r, cJSON_CreateNumber((double)from));
				cJSON_AddItemToArray(r, cJSON_CreateNumber((double)(p - 1)));
				cJSON_AddItemToArray(runs, r);
			}
			from = -1;
		}
	}
	cJSON_AddNumberToObject(o, "bad_positions", (double)bad);
	cJSON_AddNumberToObject(o, "bad_runs_total", (double)n_runs);
	/* the worst positions: a partial selection, max_worst is small */
	top = malloc((size_t)max_worst * sizeof *top);
	for (int64_t p = 0; top && p < m->n_pos; p++) {
		double v = m->pos_rel_l2[p];
		int at;
		if (isnan(v))
			continue;
		for (at = n_top; at > 0 && !(m->pos_rel_l2[top[at - 1]] >= v); at--)
			;
		if (at >= max_worst)
			continue;
		if (n_top < max_worst)
			n_top++;
		memmove(top + at + 1, top + at, (size_t)(n_top - 1 - at) * sizeof *top);
		top[at] = p;
	}
	worst = cJSON_AddArrayToObject(o, "worst_positions");
	for (int i = 0; i < n_top; i++) {
		cJSON *w = cJSON_CreateObject();
		cJSON_AddNumberToObject(w, "position", (double)top[i]);
		cJSON_AddItemToObject(w, "rel_l2", num(m->pos_rel_l2[top[i]]));
		cJSON_AddItemToObject(w, "cosine", num(m->pos_cos ? m->pos_cos[top[i]] : NAN));
		cJSON_AddItemToArray(worst, w);
	}
	free(top);
	if (detail && m->n_pos <= PROFILE_MAX) {
		cJSON *rel = cJSON_AddArrayToObject(o, "pos_rel_l2"), *cos = cJSON_AddArrayToObject(o, "pos_cosine");
		for (int64_t p = 0; p < m->n_pos; p++) {
			cJSON_AddItemToArray(rel, num(m->pos_rel_l2[p]));
			cJSON_AddItemToArray(cos, num(m->pos_cos ? m->pos_cos[p] : NAN));
		}
	}
	return o;
}

/* The report's first_divergence with its profile summarised. */
static cJSON *first_div(mcp_pair *p, bool detail)
{
	const tb_result *res = mcp_pair_run(p)->res;
	cJSON *fd;

	if (res->first_div < 0)
		return cJSON_CreateNull();
	fd = cJSON_Duplicate(rep_item(p, "first_divergence"), true);
	cJSON_DeleteItemFromObjectCaseSensitive(fd, "pos_rel_l2");
	cJSON_DeleteItemFromObjectCaseSensitive(fd, "pos_cosine");
	cJSON_AddItemToObject(fd, "profile", profile_json(&res->cells[res->first_div], detail));
	return fd;
}

static void add_unpaired(cJSON *o, mcp_pair *p)
{
	const cJSON *unp = rep_item(p, "unpaired");
	cJSON *out = cJSON_AddObjectToObject(o, "unpaired"), *counts = cJSON_AddObjectToObject(o, "unpaired_count");

	for (int side = 0; side < 2; side++) {
		const char *key = side ? "cand" : "ref";
		const cJSON *arr = cJSON_GetObjectItemCaseSensitive(unp, key), *v;
		cJSON *list = cJSON_AddArrayToObject(out, key);
		int k = 0;
		cJSON_ArrayForEach(v, arr) {
			if (k++ < TOP_UNPAIRED)
				cJSON_AddItemToArray(list, cJSON_Duplicate(v, true));
		}
		cJSON_AddNumberToObject(counts, key, cJSON_GetArraySize(arr));
	}
}

cJSON *mcp_answer_pair(mcp_pair *p)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "pair", mcp_pair_id(p));
	copy(o, p, "ref");
	copy(o, p, "cand");
	copy(o, p, "verdict");
	copy(o, p, "tolerance");
	copy(o, p, "coverage");
	cJSON_AddBoolToObject(o, "partial", mcp_pair_run(p)->partial);
	copy(o, p, "layout");
	copy_head(o, rep_item(p, "warnings"), "warnings", TOP_WARNINGS);
	copy(o, p, "counts");
	cJSON_AddItemToObject(o, "first_divergence", first_div(p, false));
	add_unpaired(o, p);
	return o;
}

static cJSON *provenance(mcp_pair *p)
{
	cJSON *o = cJSON_CreateObject();
	tb_history h = {0};

	copy(o, p, "ref");
	copy(o, p, "cand");
	copy(o, p, "version");
	cJSON_AddStringToObject(o, "ref_files", mcp_pair_stamp(p, 0));
	cJSON_AddStringToObject(o, "cand_files", mcp_pair_stamp(p, 1));
	cJSON_AddNumberToObject(o, "compared", mcp_pair_loads(p));
	mcp_pair_history(p, &h);
	if (h.n) {
		const tb_pass *last = &h.passes[h.n - 1];
		cJSON *pass = cJSON_AddObjectToObject(o, "last_pass");
		cJSON_AddNumberToObject(pass, "pass", last->number);
		cJSON_AddStringToObject(pass, "ref_digest", last->ref_digest);
		cJSON_AddStringToObject(pass, "cand_digest", last->cand_digest);
		cJSON_AddStringToObject(pass, "first_divergence", last->first_div);
	} else {
		cJSON_AddNullToObject(o, "last_pass");
	}
	tb_history_done(&h);
	return o;
}

cJSON *mcp_answer_first(mcp_pair *p)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "pair", mcp_pair_id(p));
	copy(o, p, "verdict");
	copy(o, p, "tolerance");
	cJSON_AddItemToObject(o, "first_divergence", first_div(p, false));
	copy(o, p, "origin");
	copy(o, p, "origin_text");
	copy_head(o, rep_item(p, "causes"), "causes", TOP_CAUSES);
	copy(o, p, "causes_measured_at");
	copy(o, p, "coverage");
	copy(o, p, "logits");
	copy(o, p, "counts");
	copy_head(o, rep_item(p, "warnings"), "warnings", TOP_WARNINGS);
	cJSON_AddItemToObject(o, "provenance", provenance(p));
	return o;
}

/* The k worst channels of the cell's worst position (its first bad one
 * when it has one), read again from the dumps. */
static void add_channels(cJSON *o, const tb_cell_result *c, bool detail)
{
	size_t k = detail ? TOP_CHANNELS_DETAIL : TOP_CHANNELS, n = 0;
	tb_elem worst[TOP_CHANNELS_DETAIL];
	int64_t pos = c->m.first_bad_position;
	tb_err err;
	cJSON *arr;

	if (!c->ref || !c->cand || c->m.n_pos <= 0)
		return;
	if (pos < 0 && c->m.pos_rel_l2) {
		pos = 0;
		for (int64_t p = 1; p < c->m.n_pos; p++)
			if (c->m.pos_rel_l2[p] > c->m.pos_rel_l2[pos])
				pos = p;
	}
	if (pos < 0)
		return;
	if (tb_inspect_position(c, pos, k, worst, &n, &err) < 0) {
		char text[TB_ERR_TEXT_MAX];
		cJSON_AddStringToObject(o, "worst_channels_note", tb_err_text(&err, text, sizeof text));
		return;
	}
	cJSON_AddNumberToObject(o, "worst_channels_position", (double)pos);
	arr = cJSON_AddArrayToObject(o, "worst_channels");
	for (size_t i = 0; i < n; i++) {
		cJSON *w = cJSON_CreateObject(), *idx = cJSON_AddArrayToObject(w, "index");
		uint64_t rest = worst[i].index;
		/* an array of integers, as the report's worst.index */
		for (int d = c->ndim - 1; d >= 0; d--) {
			uint64_t dim = c->shape[d] > 0 ? (uint64_t)c->shape[d] : 1;
			cJSON_InsertItemInArray(idx, 0, cJSON_CreateNumber((double)(rest % dim)));
			rest /= dim;
		}
		cJSON_AddItemToObject(w, "ref", num(worst[i].ref));
		cJSON_AddItemToObject(w, "cand", num(worst[i].cand));
		cJSON_AddItemToObject(w, "diff", num(worst[i].diff));
		cJSON_AddItemToArray(arr, w);
	}
}

static int head_cmp(const void *a, const void *b)
{
	const double x = ((const double *)a)[1], y = ((const double *)b)[1];

	return (y > x) - (y < x) ? (y > x) - (y < x) : (int)(((const double *)a)[0] - ((const double *)b)[0]);
}

/* Per-head rows of an attention cell, worst first. */
static void add_heads(cJSON *o, mcp_pair *p, long cell, bool detail)
{
	tb_run *r = mcp_pair_run(p);
	const tb_cell_result *c = &r->res->cells[cell];
	tb_heads h;
	tb_head_metrics *hm;
	double (*order)[2];
	tb_err err;
	cJSON *arr;

	if (!c->ref || !c->cand)
		return;
	tb_heads_infer(r->res, cell, r->cfg->opts.heads, r->cfg->opts.kv_heads, &h);
	if (h.n <= 0) {
		if (h.note[0])
			cJSON_AddStringToObject(o, "heads_note", h.note);
		return;
	}
	hm = calloc((size_t)h.n, sizeof *hm);
	order = calloc((size_t)h.n, sizeof *order);
	if (!hm || !order || tb_inspect_heads(c, h.n, h.head_dim, hm, &err) < 0) {
		char text[TB_ERR_TEXT_MAX];
		if (hm && order)
			cJSON_AddStringToObject(o, "heads_note", tb_err_text(&err, text, sizeof text));
		free(hm);
		free(order);
		return;
	}
	for (int i = 0; i < h.n; i++) {
		order[i][0] = i;
		order[i][1] = isnan(hm[i].rel_l2) ? -1 : hm[i].rel_l2;
	}
	qsort(order, (size_t)h.n, sizeof *order, head_cmp);
	cJSON_AddNumberToObject(o, "heads_total", h.n);
	if (h.source)
		cJSON_AddStringToObject(o, "heads_source", h.source);
	arr = cJSON_AddArrayToObject(o, "heads");
	for (int i = 0; i < h.n && (detail || i < TOP_HEADS); i++) {
		const tb_head_metrics *m = &hm[(int)order[i][0]];
		cJSON *row = cJSON_CreateObject();
		cJSON_AddNumberToObject(row, "head", order[i][0]);
		cJSON_AddItemToObject(row, "rel_l2", num(m->rel_l2));
		cJSON_AddItemToObject(row, "cosine", num(m->cosine));
		cJSON_AddItemToObject(row, "norm_ratio", num(m->norm_ratio));
		cJSON_AddItemToObject(row, "max_abs", num(m->max_abs));
		cJSON_AddItemToArray(arr, row);
	}
	free(hm);
	free(order);
}

/* An MoE cell's layer's routing, as the report's "routing" has it. */
static void add_routing(cJSON *o, mcp_pair *p, const tb_cell_result *c)
{
	const cJSON *l;
	tb_tap_id parent = tb_cell_parent(&c->cell);

	if (parent != TB_TAP_MLP && c->cell.id != TB_TAP_MLP)
		return;
	cJSON_ArrayForEach(l, rep_item(p, "routing"))
	{
		const cJSON *layer = cJSON_GetObjectItemCaseSensitive(l, "layer");
		if (cJSON_IsNumber(layer) && layer->valueint == c->cell.layer) {
			cJSON_AddItemToObject(o, "routing", cJSON_Duplicate(l, true));
			return;
		}
	}
}

cJSON *mcp_answer_cell(mcp_pair *p, long cell, bool detail, tb_err *err)
{
	const tb_cell_result *c = &mcp_pair_run(p)->res->cells[cell];
	cJSON *o = cJSON_Duplicate(cJSON_GetArrayItem(rep_item(p, "cells"), (int)cell), true);
	char name[TB_CELL_NAME_MAX];

	if (!o) {
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		return NULL;
	}
	cell_name(c, name, sizeof name);
	cJSON_AddStringToObject(o, "pair", mcp_pair_id(p));
	cJSON_AddStringToObject(o, "cell", name);
	cJSON_AddItemToObject(o, "profile", profile_json(c, detail));
	add_channels(o, c, detail);
	add_heads(o, p, cell, detail);
	add_routing(o, p, c);
	return o;
}

static cJSON *cause_json(const tb_cause *c)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "id", c->id);
	cJSON_AddItemToObject(o, "score", num(c->score));
	cJSON_AddStringToObject(o, "why", c->why ? c->why : "");
	cJSON_AddStringToObject(o, "look_at", c->look_at ? c->look_at : "");
	if (c->confirmed) {
		cJSON *cf = cJSON_AddObjectToObject(o, "confirmed");
		cJSON_AddStringToObject(cf, "variant", c->confirmed);
		cJSON_AddItemToObject(cf, "rel_l2", num(c->confirmed_rel_l2));
	} else {
		cJSON_AddNullToObject(o, "confirmed");
	}
	return o;
}

/* Is cell c dumped on both sides? */
static bool has_cell(const tb_result *res, const tb_cell *c)
{
	for (size_t i = 0; i < res->n_cells; i++)
		if (tb_cell_eq(&res->cells[i].cell, c))
			return res->cells[i].ref && res->cells[i].cand;
	return false;
}

static cJSON *replay_json(const tb_replay *rp)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddBoolToObject(o, "tried", rp->tried);
	cJSON_AddStringToObject(o, "ref_variant", rp->ref_variant);
	cJSON_AddItemToObject(o, "ref_rel_l2", rp->tried ? num(rp->ref_rel_l2) : cJSON_CreateNull());
	if (rp->cause) {
		cJSON_AddStringToObject(o, "variant", rp->variant);
		cJSON_AddStringToObject(o, "cause", rp->cause);
		cJSON_AddItemToObject(o, "rel_l2", num(rp->rel_l2));
	} else {
		cJSON_AddNullToObject(o, "variant");
		cJSON_AddNullToObject(o, "cause");
		cJSON_AddNullToObject(o, "rel_l2");
	}
	cJSON_AddStringToObject(o, "note", rp->note);
	return o;
}

/* What to dump to confirm a cause of cell: the cells that feed it and
 * are not dumped on both sides (replay recomputes the cell from them). */
static void add_to_confirm(cJSON *o, const tb_result *res, long cell)
{
	const tb_cell *c = &res->cells[cell].cell;
	tb_feed feeds[TB_MAX_FEEDS];
	int n = tb_cell_feeders(c, feeds);
	cJSON *arr = cJSON_AddArrayToObject(o, "dump_to_confirm");

	for (int i = 0; i < n; i++) {
		tb_cell fc;
		char name[TB_CELL_NAME_MAX];
		if (!tb_feed_cell(&feeds[i], c, res->n_layers, &fc) || has_cell(res, &fc))
			continue;
		tb_cell_name(&fc, name, sizeof name);
		cJSON_AddItemToArray(arr, cJSON_CreateString(name));
	}
}

cJSON *mcp_answer_causes(mcp_pair *p, long cell, tb_err *err)
{
	tb_run *r = mcp_pair_run(p);
	const tb_result *res = r->res;
	cJSON *o = cJSON_CreateObject(), *arr;
	char name[TB_CELL_NAME_MAX];
	long target = cell >= 0 ? cell : res->first_div;

	cJSON_AddStringToObject(o, "pair", mcp_pair_id(p));
	copy(o, p, "verdict");
	if (target >= 0) {
		cell_name(&res->cells[target], name, sizeof name);
		cJSON_AddStringToObject(o, "cell", name);
	} else {
		cJSON_AddNullToObject(o, "cell");
	}
	if (cell < 0 || cell == res->first_div) {
		copy(o, p, "causes");
		copy(o, p, "causes_measured_at");
		if (r->have_diag)
			cJSON_AddItemToObject(o, "replay", replay_json(&r->diag.replay));
	} else if (r->have_diag && res->verdict != TB_ST_MATCH && !r->partial) {
		tb_diag_opts d = tb_run_diag_opts(r->cfg);
		tb_causes cs = {0};
		if (tb_diagnose_cell(&r->sess, res, &d, &r->diag, cell, &cs, err) < 0) {
			cJSON_Delete(o);
			return NULL;
		}
		arr = cJSON_AddArrayToObject(o, "causes");
		for (size_t i = 0; i < cs.n; i++)
			cJSON_AddItemToArray(arr, cause_json(&cs.v[i]));
		tb_causes_done(&cs);
	} else {
		cJSON_AddArrayToObject(o, "causes");
	}
	if (r->partial)
		cJSON_AddStringToObject(o, "note", "the pairing is partial: no cause is named (suggest_map may pair more)");
	if (target >= 0)
		add_to_confirm(o, res, target);
	return o;
}

/* A cell as a row of the grid: the report's keys that tell its state. */
static cJSON *cell_row(const cJSON *full, const tb_cell_result *c)
{
	static const char *const keys[] = {"layer", "tap", "status", "shape", "rel_l2", "cosine", "max_abs",
					   "first_bad_position"};
	cJSON *o = cJSON_CreateObject();
	char name[TB_CELL_NAME_MAX];

	cell_name(c, name, sizeof name);
	cJSON_AddStringToObject(o, "cell", name);
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(full, keys[i]);
		cJSON_AddItemToObject(o, keys[i], v ? cJSON_Duplicate(v, true) : cJSON_CreateNull());
	}
	return o;
}

static bool status_matches(const tb_cell_result *c, const char *status)
{
	if (!status)
		return true;
	if (!strcmp(status, "bad"))
		return c->status != TB_ST_MATCH;
	return !strcmp(status, tb_status_name(c->status));
}

cJSON *mcp_answer_cells(mcp_pair *p, const char *status, const char *match, const char *cursor, int limit,
			tb_err *err)
{
	const tb_result *res = mcp_pair_run(p)->res;
	const cJSON *cells = rep_item(p, "cells");
	long start = 0, total = 0, shown = 0;
	cJSON *o, *arr;
	char *end;

	if (status && strcmp(status, "bad")) {
		bool known = false;
		for (int s = 0; s < TB_ST_COUNT; s++)
			known |= !strcmp(status, tb_status_name((tb_status)s));
		if (!known) {
			tb_err_setc(err, TB_ERR_FORMAT, NULL, "status '%s' is none of match, close, diverged, missing, bad", status);
			return NULL;
		}
	}
	if (cursor) {
		start = strtol(cursor, &end, 10);
		if (end == cursor || *end || start < 0 || (size_t)start > res->n_cells) {
			tb_err_setc(err, TB_ERR_FORMAT, NULL, "cursor '%s' is not one this server gave for pair %s", cursor, mcp_pair_id(p));
			return NULL;
		}
	}
	if (limit <= 0)
		limit = CELLS_PAGE;
	if (limit > CELLS_PAGE_MAX)
		limit = CELLS_PAGE_MAX;
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "pair", mcp_pair_id(p));
	arr = cJSON_AddArrayToObject(o, "cells");
	cJSON_AddNullToObject(o, "next_cursor");
	for (size_t i = 0; i < res->n_cells; i++) {
		const tb_cell_result *c = &res->cells[i];
		char name[TB_CELL_NAME_MAX];
		cell_name(c, name, sizeof name);
		if (!status_matches(c, status) || (match && fnmatch(match, name, 0) != 0))
			continue;
		total++;
		if ((long)i < start)
			continue;
		if (shown == limit) {
			char next[24];
			if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "next_cursor"))) {
				snprintf(next, sizeof next, "%zu", i);
				cJSON_ReplaceItemInObjectCaseSensitive(o, "next_cursor", cJSON_CreateString(next));
			}
			continue;
		}
		cJSON_AddItemToArray(arr, cell_row(cJSON_GetArrayItem(cells, (int)i), c));
		shown++;
	}
	cJSON_AddNumberToObject(o, "total", (double)total);
	return o;
}

cJSON *mcp_answer_replay(mcp_pair *p, long cell, const char *variant, tb_err *err)
{
	tb_run *r = mcp_pair_run(p);
	tb_replay rp;
	cJSON *o;
	char name[TB_CELL_NAME_MAX];

	if (tb_replay_cell(&r->sess, r->res, cell, r->cfg->opts.heads, r->cfg->opts.kv_heads, &rp, err) < 0)
		return NULL;
	o = cJSON_CreateObject();
	cell_name(&r->res->cells[cell], name, sizeof name);
	cJSON_AddStringToObject(o, "pair", mcp_pair_id(p));
	cJSON_AddStringToObject(o, "cell", name);
	cJSON_AddItemToObject(o, "replay", replay_json(&rp));
	/* The replay reports the one variant that reproduces the candidate;
	 * of another it can say only that it is not that one. */
	if (variant) {
		cJSON *a = cJSON_AddObjectToObject(o, "asked");
		cJSON_AddStringToObject(a, "variant", variant);
		if (rp.cause)
			cJSON_AddBoolToObject(a, "reproduces", !strcmp(variant, rp.variant) || !strcmp(variant, rp.cause));
		else
			cJSON_AddNullToObject(a, "reproduces");
	}
	add_to_confirm(o, r->res, cell);
	return o;
}

cJSON *mcp_answer_suggest(mcp_pair *p, tb_err *err)
{
	tb_suggestion sg;
	cJSON *o, *map;
	char *text;

	if (tb_suggest_map(&mcp_pair_run(p)->sess, &sg, err) < 0)
		return NULL;
	text = tb_suggestion_json(&sg);
	map = text ? cJSON_Parse(text) : NULL;
	free(text);
	if (!map) {
		tb_suggestion_done(&sg);
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory writing the map");
		return NULL;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "pair", mcp_pair_id(p));
	cJSON_AddItemToObject(o, "map", map);
	cJSON_AddNumberToObject(o, "rules", (double)sg.n);
	{
		cJSON *u = cJSON_AddObjectToObject(o, "unmapped");
		cJSON_AddNumberToObject(u, "ref", (double)sg.unpaired[0]);
		cJSON_AddNumberToObject(u, "cand", (double)sg.unpaired[1]);
	}
	tb_suggestion_done(&sg);
	return o;
}

cJSON *mcp_answer_passes(mcp_pair *p, bool record, bool reset, int last, tb_err *err)
{
	tb_history h = {0};
	cJSON *o, *arr;
	int recorded = 0;

	if (record || reset) {
		tb_history_open(&mcp_pair_run(p)->sess, &h);
		recorded = reset && !record ? (tb_history_reset(&h, &mcp_pair_run(p)->sess, err) < 0 ? -1 : 0)
					    : mcp_pair_record(p, reset, &h, err);
		if (recorded < 0) {
			tb_history_done(&h);
			return NULL;
		}
	} else {
		mcp_pair_history(p, &h);
	}
	if (last <= 0)
		last = PASSES_SHOWN;
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "pair", mcp_pair_id(p));
	if (record)
		cJSON_AddBoolToObject(o, "recorded", recorded > 0);
	else
		cJSON_AddNullToObject(o, "recorded");
	cJSON_AddNumberToObject(o, "passes", (double)h.n);
	arr = cJSON_AddArrayToObject(o, "history");
	for (size_t i = h.n > (size_t)last ? h.n - (size_t)last : 0; i < h.n; i++)
		cJSON_AddItemToArray(arr, tb_pass_json(&h.passes[i]));
	if (h.n)
		cJSON_AddStringToObject(o, "moved", h.passes[h.n - 1].note);
	else
		cJSON_AddNullToObject(o, "moved");
	if (h.warning[0])
		cJSON_AddStringToObject(o, "warning", h.warning);
	tb_history_done(&h);
	return o;
}
