#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/naming.h"
#include "run/run.h"
#include "run/towers.h"
#include "tui/reload.h"
#include "tui/screen.h"

bool reload_busy(const view *v)
{
	return v->run.job != NULL || v->next.job != NULL;
}

bool reload_watch_pending(const view *v)
{
	return v->watch && (v->watch_state == UI_WATCH_SETTLING || v->watch_state == UI_WATCH_WRITING);
}

static void cancel_next(view *v)
{
	tb_run_done(&v->next);
}

static void drop_changed(view *v)
{
	free(v->changed);
	v->changed = NULL;
	v->n_changed = 0;
}

/* Start the comparison of the shown trees; false with v->job_err set. */
static bool start_job(view *v)
{
	tb_err err;

	v->job_err[0] = '\0';
	drop_changed(v);
	if (tb_run_start(&v->run, &v->tol, &err) == 0)
		return true;
	tb_err_text(&err, v->job_err, sizeof v->job_err);
	view_message(v, true, "cannot compare: %s", v->job_err);
	return false;
}

/* Record the shown result as a pass (in memory only under --no-history,
 * or when the state directory cannot be used) and say in the banner how
 * the first divergence moved. */
static void record_pass(view *v)
{
	const tb_pass *p, *prev;
	char buf[TB_ERR_TEXT_MAX];
	tb_err err;
	int rc;

	rc = tb_run_record(&v->run, &v->hist, &err);
	if (v->hist.warning[0])
		view_message(v, true, "%s", v->hist.warning);
	if (rc < 0)
		view_message(v, true, "%s", tb_err_text(&err, buf, sizeof buf));
	if (!v->hist.n)
		return;
	p = &v->hist.passes[v->hist.n - 1];
	prev = v->hist.n > 1 ? p - 1 : NULL;
	/* Another run (a `tbisect check`) recorded this very dump since our last
	 * pass: the movement since what this view showed is in its note. */
	if (p->move == TB_MOVE_UNCHANGED && v->my_last_pass > 0 && prev && prev->number > v->my_last_pass)
		p = prev;
	v->my_last_pass = v->hist.passes[v->hist.n - 1].number;
	snprintf(v->banner, sizeof v->banner, "%s", p->note);
	v->banner_bad = tb_move_is_bad(p->move);
	v->banner_good = p->move == TB_MOVE_LATER || p->move == TB_MOVE_MATCHED;
}

unsigned reload_history_clear(view *v)
{
	char buf[TB_ERR_TEXT_MAX];
	tb_err err;

	if (tb_history_reset(&v->hist, &v->run.sess, &err) < 0) {
		view_message(v, true, "history clear: %s", tb_err_text(&err, buf, sizeof buf));
		return 0;
	}
	v->my_last_pass = 0;
	v->banner[0] = '\0';
	v->banner_bad = v->banner_good = false;
	view_message(v, false, "history cleared: the next load or reload with new inputs is pass 1");
	return 0;
}

/* A comparison at a new tolerance is no pass (the files did not change):
 * the banner says where the first divergence is now, instead of the last
 * pass's movement. */
static void tolerance_banner(view *v)
{
	char cell[TB_CELL_NAME_MAX] = "none";
	const tb_result *r = v->run.res;

	if (r->first_div >= 0)
		tb_cell_name(&r->cells[r->first_div].cell, cell, sizeof cell);
	snprintf(v->banner, sizeof v->banner,
		 "tolerance atol=%g rtol=%g diverge=%g max_kl=%g: first divergence %s (passes keep the tolerance they ran with)",
		 v->tol.atol, v->tol.rtol, v->tol.diverge, v->tol.max_kl, cell);
	v->banner_bad = false;
	v->banner_good = false;
	view_message(v, false, "compared at the new tolerance");
}

/* Finish a run's comparison and diagnosis; false when there is no result
 * (*why says why).  A failed diagnosis keeps the result and says so. */
static bool finish(view *v, tb_run *r, char *why, size_t size)
{
	tb_err err;

	if (tb_run_finish(r, &err) == 0)
		return true;
	tb_err_text(&err, why, size);
	if (!r->res)
		return false;
	view_message(v, true, "diagnosis failed: %s", err.msg);
	return true;
}

/* The shown comparison finished; a load is a pass. */
static void job_done(view *v)
{
	if (!finish(v, &v->run, v->job_err, sizeof v->job_err))
		view_message(v, true, "comparison failed: %s", v->job_err);
	v->exit_code = tb_run_exit_code(&v->run);
	if (v->run.res && v->job_is_pass)
		record_pass(v);
	else if (v->run.res)
		tolerance_banner(v);
	v->job_is_pass = false;
}

unsigned reload_first(view *v)
{
	v->job_is_pass = true;
	start_job(v);
	return UI_REDRAW;
}

unsigned reload_recompare(view *v)
{
	cancel_next(v);
	v->job_is_pass = false;
	if (!start_job(v))
		return UI_HOME | UI_REDRAW;
	view_message(v, false, "tolerance atol=%g rtol=%g diverge=%g max_kl=%g: comparing again", v->tol.atol,
		     v->tol.rtol, v->tol.diverge, v->tol.max_kl);
	return UI_HOME | UI_REDRAW;
}

/* Make run r (taken over) the shown one, keeping the cursor on the same
 * cell, the fold and the filter. */
static unsigned install(view *v, tb_run *r)
{
	long sel = grid_selected(&v->g);
	tb_cell keep = {-1, "", TB_TAP_NONE};
	bool folded = v->g.folded;
	char filter[sizeof v->g.filter_text], msg[256];

	snprintf(filter, sizeof filter, "%s", v->g.have_filter ? v->g.filter_text : "");
	if (sel >= 0)
		keep = view_pairing(v)->pairs[sel].cell;
	grid_done(&v->g);
	tb_run_move(&v->run, r);
	v->stale = false;
	v->reload_err[0] = '\0';
	if (grid_init(&v->g, view_pairing(v)) < 0) {
		view_message(v, true, "out of memory laying out the heatmap");
		return UI_FATAL;
	}
	v->g.folded = folded;
	if (filter[0] && grid_set_filter(&v->g, filter, msg, sizeof msg) < 0)
		view_message(v, true, "%s", msg);
	grid_relayout(&v->g);
	if (sel >= 0)
		grid_select(&v->g, tb_pairing_find(view_pairing(v), &keep));
	return 0;
}

/* Keep the last good view; the heatmap's banner says why (the message
 * line is too short for a file name and its error). */
static void reload_failed(view *v, const char *why)
{
	snprintf(v->reload_err, sizeof v->reload_err, "%s", why);
	if (v->run.res)
		v->stale = true;
	if (v->on_grid)
		view_message(v, true, "reload failed: the last good view stays (the error is under the grid)");
	else
		view_message(v, true, "reload failed, showing the last good view: %s", why);
}

unsigned reload_start(view *v)
{
	char buf[TB_ERR_TEXT_MAX];
	unsigned flags;
	tb_err err;

	cancel_next(v);
	if (tb_run_open(&v->next, v->cfg, &err) < 0) {
		reload_failed(v, tb_err_text(&err, buf, sizeof buf));
		return UI_REDRAW;
	}
	if (!v->run.res) {
		/* No good view to keep: show the new trees as they are compared. */
		flags = install(v, &v->next) | UI_HOME | UI_FOLLOW | UI_REDRAW;
		if (flags & UI_FATAL)
			return flags;
		v->job_is_pass = true;
		if (start_job(v))
			view_message(v, false, "reloading: %zu cells", view_pairing(v)->n_pairs);
		return flags;
	}
	if (tb_run_start(&v->next, &v->tol, &err) < 0) {
		reload_failed(v, tb_err_text(&err, buf, sizeof buf));
		cancel_next(v);
		return UI_REDRAW;
	}
	view_message(v, false, "reloading: comparing %zu cells in the background", v->next.sess.pairing->n_pairs);
	return UI_REDRAW;
}

/* The shown configuration, as the view's own copy to change (a suggested
 * map, a step, a tower or a head count set before stays). */
static void own_config(view *v)
{
	if (v->cfg != &v->applied) {
		v->applied = *v->cfg;
		v->cfg = &v->applied;
	}
}

unsigned reload_step(view *v, int delta)
{
	const tb_tree_layout *lo;
	int step, last;

	if (!v->run.open) {
		view_message(v, true, "no trees are open");
		return UI_REDRAW;
	}
	lo = v->run.sess.cand->layout.n_steps ? &v->run.sess.cand->layout : &v->run.sess.ref->layout;
	if (!lo->n_steps) {
		view_message(v, true, "neither dump holds several forward steps");
		return UI_REDRAW;
	}
	if (lo->step < 0) {
		view_message(v, true, "the steps are stitched against a one-pass tree: no single step to move to");
		return UI_REDRAW;
	}
	/* from the step last asked for: keys pressed while a reload is under
	 * way move on from it, not from the shown one */
	step = (v->cfg->opts.layout.step >= 0 ? v->cfg->opts.layout.step : lo->step) + delta;
	last = lo->first_step + lo->n_steps - 1;
	if (step < lo->first_step || step > last) {
		view_message(v, true, "no step %d: the dump has steps %d..%d", step, lo->first_step, last);
		return UI_REDRAW;
	}
	own_config(v);
	v->applied.opts.layout.step = step;
	return reload_start(v);
}

unsigned reload_heads(view *v, int heads)
{
	own_config(v);
	v->applied.opts.heads = heads;
	return reload_start(v);
}

unsigned reload_tower(view *v, const char *tower, bool next)
{
	const char *all[TB_MAX_TOWERS], *names[TB_MAX_TOWERS + 1] = {NULL};
	size_t na = tb_tower_names(all, TB_MAX_TOWERS), n = 1;

	if (!v->run.open) {
		view_message(v, true, "no trees are open");
		return UI_REDRAW;
	}
	/* the grids there are: the text decoder's, and each tower both hold */
	for (size_t i = 0; i < na; i++)
		if (tb_tree_holds_tower(v->run.sess.ref, all[i]) && tb_tree_holds_tower(v->run.sess.cand, all[i]))
			names[n++] = all[i];
	if (next) {
		const char *shown = v->cfg->opts.tower;
		size_t i = 0;
		while (i < n && !(shown ? names[i] && !strcmp(names[i], shown) : !names[i]))
			i++;
		if (n == 1) {
			view_message(v, true, "no tower: the trees hold no vision or audio tower both");
			return UI_REDRAW;
		}
		tower = names[(i + 1) % n];
	} else if (tower) {
		size_t i = 1;
		while (i < n && strcmp(names[i], tower))
			i++;
		if (i == n) {
			view_message(v, true, "tower %s: not held by both trees", tower);
			return UI_REDRAW;
		}
		tower = names[i];
	}
	own_config(v);
	v->applied.opts.tower = tower;
	return reload_start(v);
}

/* Which cells of r have a status other than the shown result gave them
 * (a cell new in r counts as changed); NULL when out of memory. */
static unsigned char *status_changes(const view *v, const tb_result *r, size_t *n)
{
	unsigned char *changed = calloc(r->n_cells ? r->n_cells : 1, 1);

	*n = 0;
	for (size_t i = 0; changed && i < r->n_cells; i++) {
		long j = tb_pairing_find(view_pairing(v), &r->cells[i].cell);
		if (j < 0 || v->run.res->cells[j].status != r->cells[i].status) {
			changed[i] = 1;
			(*n)++;
		}
	}
	return changed;
}

/* The background reload succeeded: its trees and result replace the view. */
static unsigned swap_in(view *v)
{
	size_t n_changed;
	unsigned char *changed = status_changes(v, v->next.res, &n_changed);
	bool diagnosed = v->next.have_diag;
	unsigned flags;
	size_t n;

	flags = install(v, &v->next) | UI_FOLLOW | UI_REDRAW;
	if (flags & UI_FATAL) {
		free(changed);
		return flags;
	}
	drop_changed(v);
	v->changed = changed;
	v->n_changed = changed ? n_changed : 0;
	v->exit_code = tb_run_exit_code(&v->run);
	n = v->run.res->n_cells;
	/* A failed diagnosis keeps its message. */
	if (diagnosed && v->n_changed)
		view_message(v, false, "reloaded: %zu cells, %zu changed status (marked *)", n, v->n_changed);
	else if (diagnosed)
		view_message(v, false, "reloaded: %zu cells, none changed status", n);
	record_pass(v);
	if (!v->on_grid && v->banner[0] && !v->msg_err)
		view_message(v, v->banner_bad, "%s", v->banner);
	return flags;
}

/* --watch: reload once the changed files are quiet; meanwhile the shown
 * view must not re-read its files, and a reload under way is stopped. */
static unsigned poll_watch(view *v)
{
	ui_watch_state was = v->watch_state, st;
	unsigned flags = 0;

	if (!v->watch)
		return 0;
	st = ui_watch_poll(v->watch, view_now());
	v->watch_state = st == UI_WATCH_READY ? UI_WATCH_QUIET : st;
	if (st == UI_WATCH_QUIET)
		return 0;
	v->stale = true;
	if (v->run.job) {
		/* The first comparison is reading files that are being rewritten:
		 * stop it, and compare again once they are quiet. */
		tb_run_cancel(&v->run);
		drop_changed(v);
		flags = UI_HOME | UI_REDRAW;
		snprintf(v->job_err, sizeof v->job_err,
			 "the dump files changed during the comparison; comparing again once they are quiet");
	}
	if (st == UI_WATCH_READY)
		return flags | reload_start(v);
	if (v->next.job) {
		cancel_next(v);
		view_message(v, false, "the dump files changed again: reloading once they are quiet");
		return flags | UI_REDRAW;
	}
	if (st == UI_WATCH_WRITING && was != UI_WATCH_WRITING) {
		view_message(v, false, "waiting for %s to be written", ui_watch_writing(v->watch));
		return flags | UI_REDRAW;
	}
	if (st == UI_WATCH_SETTLING && was == UI_WATCH_QUIET) {
		view_message(v, false, "the dump files changed: reloading once they are quiet");
		return flags | UI_REDRAW;
	}
	return flags;
}

unsigned reload_poll(view *v)
{
	char why[TB_ERR_TEXT_MAX];
	unsigned flags = 0;

	/* Each is polled every time: no short cut past the reload and the watch. */
	if (v->run.job && tb_run_finished(&v->run)) {
		job_done(v);
		flags |= UI_REDRAW;
	}
	flags |= poll_watch(v);
	if (!v->next.job || !tb_run_finished(&v->next))
		return flags;
	if (!finish(v, &v->next, why, sizeof why)) {
		cancel_next(v);
		reload_failed(v, why);
		return flags | UI_REDRAW;
	}
	return flags | swap_in(v);
}

void reload_done(view *v)
{
	cancel_next(v);
	tb_run_done(&v->run);
	drop_changed(v);
}
