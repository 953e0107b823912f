#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mapfile.h"
#include "run/run.h"
#include "run/suggest.h"

/* The largest map read from standard input. */
#define MAP_STDIN_MAX (1024 * 1024)

void tb_run_opts_init(tb_run_opts *o)
{
	memset(o, 0, sizeof *o);
	tb_open_opts_init(&o->open);
	tb_tolerance_default(&o->tol);
	tb_layout_opts_init(&o->layout);
	o->origin_factor = TB_ORIGIN_FACTOR;
	o->flip_margin = TB_FLIP_MARGIN;
}

int tb_run_config_load(tb_run_config *cfg, const tb_run_opts *o, tb_err *err)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->opts = *o;
	cfg->rules = tb_ruleset_new();
	if (!cfg->rules)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	if (tb_ruleset_add_standard(cfg->rules, o->rules_file, err) < 0 ||
	    (o->tol_file && tb_tolfile_load(o->tol_file, &cfg->tolfile, err) < 0) ||
	    (o->map_file && !strcmp(o->map_file, "-") &&
	     tb_read_stream(stdin, MAP_STDIN_MAX, "standard input (--map -)", &cfg->map_text, &cfg->map_len, err) < 0)) {
		tb_run_config_done(cfg);
		return -1;
	}
	/* Errors in it name it as the user gave it. */
	if (cfg->map_text)
		cfg->opts.map_file = "standard input (--map -)";
	return 0;
}

void tb_run_config_done(tb_run_config *cfg)
{
	tb_ruleset_free(cfg->rules);
	tb_tolfile_free(cfg->tolfile);
	free(cfg->map_text);
	memset(cfg, 0, sizeof *cfg);
}

tb_diag_opts tb_run_diag_opts(const tb_run_config *cfg)
{
	tb_diag_opts d = {
		.rules = cfg->rules,
		.heads = cfg->opts.heads,
		.kv_heads = cfg->opts.kv_heads,
		.origin_factor = cfg->opts.origin_factor,
		.threads = cfg->opts.threads,
	};

	return d;
}

static double monotonic_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "map rules 2 (^a$) and 5 (^b$) matched no tensor of either tree" */
static void unused_rules(tb_run *r)
{
	const tb_pairing *p = r->sess.pairing;
	size_t n = p->n_unused_rules, len;
	char *w = r->map_warning;
	size_t size = sizeof r->map_warning;

	w[0] = '\0';
	if (!n)
		return;
	len = (size_t)snprintf(w, size, "map rule%s ", n > 1 ? "s" : "");
	for (size_t i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(w + len, size - len, "%s%zu (%s)", i == 0 ? "" : i + 1 == n ? " and " : ", ",
				       p->unused_rules[i], tb_namer_rule_pattern(r->sess.namer, p->unused_rules[i]));
	if (len < size)
		snprintf(w + len, size - len, " matched no tensor of either tree");
}

/* Does a tree hold no tensor of the tower compared?  Then it says so
 * (there is nothing to compare the other's with). */
static bool no_tower(const tb_tree *tree, const char *tower, tb_err *err)
{
	if (tb_tree_holds_tower(tree, tower))
		return false;
	tb_err_setc(err, TB_ERR_NO_TENSOR, tree->path, "no tensor of a %s tower (--tower %s): its paths start with none of the "
		   "tower prefixes tbisect-dumps(5) lists", tower, tower);
	return true;
}

/* Would suggest-map write a rule for the pair?  Only then is it named in
 * the coverage error: one that says "nothing in common" is no help. */
static bool map_would_help(const tb_run *r)
{
	tb_suggestion sg;
	tb_err err;
	bool help;

	if (tb_suggest_map(&r->sess, &sg, &err) < 0)
		return false;
	help = sg.n > 0;
	tb_suggestion_done(&sg);
	return help;
}

int tb_run_open(tb_run *r, const tb_run_config *cfg, tb_err *err)
{
	const tb_run_opts *o = &cfg->opts;
	tb_session_opts so = {
		.open = &o->open,
		.map_file = o->map_file,
		.map_text = cfg->map_text,
		.map_len = cfg->map_len,
		.pairing = {.heads = o->heads, .kv_heads = o->kv_heads, .tower = o->tower},
		.layout = o->layout,
		.no_builtin_names = o->no_builtin_names,
	};

	memset(r, 0, sizeof *r);
	r->cfg = cfg;
	r->tol = o->tol;
	clock_gettime(CLOCK_REALTIME, &r->opened);
	if (tb_session_open_with(&r->sess, o->ref_path, o->cand_path, &so, err) < 0)
		return -1;
	r->open = true;
	if (o->tower && (no_tower(r->sess.ref, o->tower, err) || no_tower(r->sess.cand, o->tower, err))) {
		tb_run_done(r);
		return -1;
	}
	unused_rules(r);
	for (int side = 0; side < 2; side++) {
		const tb_tree *t = side ? r->sess.cand : r->sess.ref;
		if (t->n_tensors)
			continue;
		/* No map helps: the tree itself has nothing to compare.  The
		 * layout's notes, which say why, come last. */
		if (t->n_notes > 1)
			tb_err_setc(err, TB_ERR_FORMAT, t->path, "no tensor left to compare once its ranks and steps were laid out; %s "
				   "(and %zu more notes)", t->notes[t->n_notes - 1], t->n_notes - 1);
		else
			tb_err_setc(err, TB_ERR_FORMAT, t->path, "no tensor left to compare once its ranks and steps were laid out%s%s",
				   t->n_notes ? "; " : "", t->n_notes ? t->notes[0] : "");
		tb_run_done(r);
		return -1;
	}
	tb_pairing_coverage(r->sess.pairing, &r->coverage);
	r->partial = tb_coverage_poor(&r->coverage);
	/* --allow-partial goes on with what paired, never with nothing: a
	 * verdict over no cell is not a pass (tbisect(1) --allow-partial). */
	if (r->partial && (!o->allow_partial || (tb_coverage_empty(&r->coverage) && !o->allow_empty))) {
		char cov[TB_COVERAGE_TEXT_MAX];
		bool empty = tb_coverage_empty(&r->coverage);
		tb_coverage_text(&r->coverage, cov, sizeof cov);
		if (map_would_help(r))
			tb_err_setc(err, TB_ERR_FORMAT, NULL, "%s vs %s: %s; pass --map FILE (tbisect suggest-map %s %s writes one)%s",
				   o->ref_path, o->cand_path, cov, o->ref_path, o->cand_path,
				   o->allow_partial ? ": --allow-partial gives no verdict over nothing" : " or --allow-partial");
		else
			tb_err_setc(err, TB_ERR_FORMAT, NULL,
				   "%s vs %s: %s; suggest-map finds no rule that would pair more (dumps of the same model?)%s",
				   o->ref_path, o->cand_path, cov,
				   empty ? "" : "; --allow-partial compares what paired");
		tb_run_done(r);
		return -1;
	}
	return 0;
}

/* Drop the result and its diagnosis, keeping the trees. */
static void drop_result(tb_run *r)
{
	tb_result_free(r->res);
	r->res = NULL;
	tb_routing_done(&r->routing);
	if (r->have_diag)
		tb_diagnosis_done(&r->diag);
	r->have_diag = false;
}

/* Does any layer dump the experts it chose?  Then a flip may leave
 * positions out of later cells (compare/routing.h), which their kept
 * per-position sums make cheap. */
static bool routed(const tb_pairing *p)
{
	for (size_t i = 0; i < p->n_pairs; i++)
		if (p->pairs[i].cell.id == TB_TAP_MLP_TOPK_IDS && p->pairs[i].ref && p->pairs[i].cand)
			return true;
	return false;
}

int tb_run_start(tb_run *r, const tb_tolerance *tol, tb_err *err)
{
	tb_compare_opts co;

	tb_run_cancel(r);
	drop_result(r);
	r->tol = *tol;
	tb_compare_opts_init(&co);
	co.tol = *tol;
	co.threads = r->cfg->opts.threads;
	co.keep_positions = routed(r->sess.pairing);
	if (r->cfg->tolfile) {
		co.tol_for = tb_tolfile_for_cell;
		co.tol_ud = r->cfg->tolfile;
	}
	if (r->cfg->opts.record == TB_RECORD_DISK || r->cfg->opts.record == TB_RECORD_DISK_OR_MEMORY)
		tb_history_stale(&r->sess, r->cfg->opts.record == TB_RECORD_DISK_OR_MEMORY, co.digest);
	else
		co.digest[0] = co.digest[1] = r->cfg->opts.record == TB_RECORD_MEMORY;
	r->job = tb_compare_start(r->sess.pairing, &co, err);
	r->started = monotonic_now();
	return r->job ? 0 : -1;
}

bool tb_run_finished(const tb_run *r)
{
	return !r->job || tb_job_finished(r->job);
}

int tb_run_finish(tb_run *r, tb_err *err)
{
	tb_diag_opts d = tb_run_diag_opts(r->cfg);
	tb_job *job = r->job;

	if (!job)
		return r->res ? 0 : tb_err_setc(err, TB_ERR_FORMAT, NULL, "no comparison was started");
	r->job = NULL;
	if (tb_job_finish(job, &r->res, err) < 0)
		return -1;
	if (tb_routing_compute(r->sess.pairing, r->res, r->cfg->opts.flip_margin, &r->routing, err) < 0)
		return -1;
	if (tb_diagnose(&r->sess, r->res, &d, TB_TARGET_FIRST_DIVERGENCE, &r->diag, err) < 0)
		return -1;
	r->have_diag = true;
	/* What was not compared could be the cause, or the origin, as well as
	 * anything else. */
	if (r->partial) {
		char cov[TB_COVERAGE_TEXT_MAX];
		tb_causes_done(&r->diag.causes);
		r->diag.origin.origin = -1;
		tb_coverage_text(&r->coverage, cov, sizeof cov);
		snprintf(r->diag.origin.text, sizeof r->diag.origin.text, "not located: %s", cov);
	}
	return 0;
}

void tb_run_cancel(tb_run *r)
{
	tb_result *res;
	tb_err err;

	if (!r->job)
		return;
	tb_job_cancel(r->job);
	if (tb_job_finish(r->job, &res, &err) == 0)
		tb_result_free(res);
	r->job = NULL;
}

int tb_run_exec(tb_run *r, const tb_run_config *cfg, tb_err *err)
{
	if (tb_run_open(r, cfg, err) < 0 || tb_run_start(r, &cfg->opts.tol, err) < 0)
		return -1;
	return tb_run_finish(r, err);
}

int tb_run_exit_code(const tb_run *r)
{
	if (r->open && tb_coverage_empty(&r->coverage))
		return TB_EXIT_BAD_INPUT;
	return r->res && r->res->verdict == TB_ST_DIVERGED ? TB_EXIT_DIVERGED : TB_EXIT_OK;
}

void tb_run_move(tb_run *dst, tb_run *src)
{
	tb_run_done(dst);
	*dst = *src;
	memset(src, 0, sizeof *src);
}

void tb_run_done(tb_run *r)
{
	tb_run_cancel(r);
	drop_result(r);
	if (r->open)
		tb_session_done(&r->sess);
	memset(r, 0, sizeof *r);
}

int tb_run_list(const tb_run_config *cfg, const char *path, tb_listing *out, tb_err *err)
{
	int named;

	memset(out, 0, sizeof *out);
	named = cfg->map_text ? tb_namer_new_text(cfg->opts.map_file, cfg->map_text, cfg->map_len, &out->namer, err)
			      : tb_namer_new(cfg->opts.map_file, &out->namer, err);
	if (named == 0 && cfg->opts.no_builtin_names)
		tb_namer_use_builtins(out->namer, false);
	tb_layout_opts lo = cfg->opts.layout;
	lo.heads = cfg->opts.heads;
	lo.kv_heads = cfg->opts.kv_heads;
	if (named < 0 || tb_tree_open(path, &cfg->opts.open, &out->tree, err) < 0 ||
	    tb_layout_apply(out->tree, out->namer, &lo, err) < 0) {
		tb_listing_done(out);
		return -1;
	}
	tb_tree_names_init(&out->names, out->tree);
	return 0;
}

void tb_listing_done(tb_listing *l)
{
	tb_tree_free(l->tree);
	tb_namer_free(l->namer);
	memset(l, 0, sizeof *l);
}

int tb_run_record(const tb_run *r, tb_history *h, tb_err *err)
{
	/* A pairing of nothing compared nothing: it is no pass; nor is a
	 * tower's grid, the pair's passes being its text decoder's. */
	if (tb_coverage_empty(&r->coverage) || r->cfg->opts.tower)
		return 0;
	if (!h->in_memory) {
		tb_history_done(h);
		tb_history_open(&r->sess, h);
		if (!h->path[0] && r->cfg->opts.record == TB_RECORD_DISK_OR_MEMORY) {
			char warning[sizeof h->warning];
			memcpy(warning, h->warning, sizeof warning);
			tb_history_init_memory(h);
			memcpy(h->warning, warning, sizeof warning);
		}
	}
	return tb_history_record(h, &r->sess, r->res, r->have_diag ? &r->diag : NULL, err);
}
