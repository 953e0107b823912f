/*
 * Reloads of the interactive view and the passes they record.  A reload
 * (r, :reload, or --watch once the changed files have gone quiet) opens
 * both trees again and compares them in the background while the last
 * good view stays on the screen; when the comparison succeeds the new
 * result takes its place with the cursor, fold, filter and open screens
 * carried over, the cells whose status changed are flagged, and the pass
 * is recorded (src/history) with its movement for the banner.  A reload
 * that fails leaves the last good view and says why.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "tui/tui.h"

bool tui_reloading(const tui *t)
{
	return t->next.job != NULL;
}

void tui_reload_cancel(tui *t)
{
	pending *p = &t->next;
	tb_job *job = p->job;
	tb_result *r;
	tb_err err;

	if (!job)
		return;
	p->job = NULL;
	tb_job_cancel(job);
	if (tb_job_finish(job, &r, &err) == 0)
		tb_result_free(r);
	tb_session_free(&p->sess);
}

/* Show session s (taken over) in place of the current one, keeping the
 * cursor on the same cell, the fold and the filter. */
static void install(tui *t, tb_session *s)
{
	long sel = grid_selected(&t->g);
	tb_cell keep = {-1, ""};
	bool folded = t->g.folded;
	char filter[sizeof t->g.filter_text], msg[256];

	snprintf(filter, sizeof filter, "%s", t->g.have_filter ? t->g.filter_text : "");
	if (sel >= 0)
		keep = t->sess.pairing->pairs[sel].cell;
	grid_done(&t->g);
	tb_session_free(&t->sess);
	t->sess = *s;
	memset(s, 0, sizeof *s);
	if (grid_init(&t->g, t->sess.pairing) < 0)
		tui_fatal("out of memory laying out the heatmap");
	t->g.folded = folded;
	if (filter[0] && grid_set_filter(&t->g, filter, msg, sizeof msg) < 0)
		tui_message(t, true, "%s", msg);
	grid_relayout(&t->g);
	if (sel >= 0)
		grid_select(&t->g, tb_pairing_find(t->sess.pairing, &keep));
}

/* Keep the last good view; the heatmap's banner says why (the message
 * line is too short for a file name and its error). */
static void reload_failed(tui *t, const char *why)
{
	snprintf(t->reload_err, sizeof t->reload_err, "%s", why);
	if (t->res)
		t->stale = true;
	if (t->stack[t->depth - 1] == &heatmap_screen)
		tui_message(t, true, "reload failed: the last good view stays (the error is under the grid)");
	else
		tui_message(t, true, "reload failed, showing the last good view: %s", why);
}

int tui_reload(tui *t)
{
	pending *p = &t->next;
	char buf[TB_ERR_TEXT_MAX];
	tb_err err;

	tui_reload_cancel(t);
	clock_gettime(CLOCK_REALTIME, &p->opened);
	if (tb_session_open(&p->sess, t->opt->paths[0], t->opt->paths[1], &t->opt->open, t->opt->map_file, &err) < 0) {
		reload_failed(t, tb_err_text(&err, buf, sizeof buf));
		return -1;
	}
	if (!t->res) {
		/* No good view to keep: show the new trees as they are compared. */
		tui_drop_result(t);
		install(t, &p->sess);
		t->depth = 1;
		t->loaded = p->opened;
		t->stale = false;
		t->reload_err[0] = '\0';
		t->job_is_pass = true;
		if (tui_start_job(t) < 0) {
			tui_message(t, true, "cannot compare: %s", t->job_err);
			return -1;
		}
		tui_message(t, false, "reloading: %zu cells", t->sess.pairing->n_pairs);
		return 0;
	}
	p->job = tui_compare_start(t, p->sess.pairing);
	if (!p->job) {
		reload_failed(t, t->job_err);
		tb_session_free(&p->sess);
		return -1;
	}
	p->t_start = tui_now();
	tui_message(t, false, "reloading: comparing %zu cells in the background", p->sess.pairing->n_pairs);
	return 0;
}

/* Which cells of r have a status other than the shown result gave them
 * (a cell new in r counts as changed); NULL when out of memory. */
static unsigned char *status_changes(const tui *t, const tb_result *r, size_t *n)
{
	unsigned char *changed = calloc(r->n_cells ? r->n_cells : 1, 1);

	*n = 0;
	for (size_t i = 0; changed && i < r->n_cells; i++) {
		long j = tb_pairing_find(t->sess.pairing, &r->cells[i].cell);
		if (j < 0 || t->res->cells[j].status != r->cells[i].status) {
			changed[i] = 1;
			(*n)++;
		}
	}
	return changed;
}

/* The open detail screen follows its cell into the new result; when the
 * cell is gone, the screens from the detail up are closed. */
static void follow_detail(tui *t, const tb_cell *cell)
{
	long i = tb_pairing_find(t->sess.pairing, cell);
	char name[128];

	for (int k = 1; k < t->depth; k++) {
		if (t->stack[k] != &detail_screen)
			continue;
		if (i >= 0) {
			tui_detail_reopen(t, i);
		} else {
			t->depth = k;
			tb_cell_name(cell, name, sizeof name);
			tui_message(t, true, "%s is no longer dumped: detail closed", name);
		}
		return;
	}
}

/* The background reload succeeded: its trees and result replace the view. */
static void swap_in(tui *t, tb_result *r, tb_diagnosis *dg, bool have_dg)
{
	pending *p = &t->next;
	tb_cell dcell = {-1, ""};
	unsigned char *changed;
	size_t n_changed;
	bool detail_open = false;

	changed = status_changes(t, r, &n_changed);
	for (int k = 1; k < t->depth; k++)
		detail_open |= t->stack[k] == &detail_screen;
	if (detail_open)
		dcell = t->sess.pairing->pairs[t->d.pair].cell;
	tui_drop_result(t);
	install(t, &p->sess);
	t->res = r;
	t->diag = *dg;
	t->have_diag = have_dg;
	t->loaded = p->opened;
	t->stale = false;
	t->reload_err[0] = '\0';
	t->changed = changed;
	t->n_changed = changed ? n_changed : 0;
	t->exit_code = r->verdict == TB_ST_DIVERGED ? TB_EXIT_DIVERGED : TB_EXIT_OK;
	if (detail_open)
		follow_detail(t, &dcell);
	if (t->n_changed)
		tui_message(t, false, "reloaded: %zu cells, %zu changed status (marked *)", r->n_cells, t->n_changed);
	else
		tui_message(t, false, "reloaded: %zu cells, none changed status", r->n_cells);
	tui_record_pass(t);
	if (t->stack[t->depth - 1] != &heatmap_screen && t->banner[0] && !t->msg_err)
		tui_message(t, t->banner_bad, "%s", t->banner);
}

/* --watch: reload once the changed files are quiet; meanwhile the shown
 * view must not re-read its files, and a reload under way is stopped. */
static bool poll_watch(tui *t)
{
	ui_watch_state was = t->watch_state, st;

	if (!t->watch)
		return false;
	st = ui_watch_poll(t->watch, tui_now());
	t->watch_state = st == UI_WATCH_READY ? UI_WATCH_QUIET : st;
	if (st == UI_WATCH_QUIET)
		return false;
	t->stale = true;
	if (t->job) {
		/* The first comparison is reading files that are being rewritten:
		 * stop it, and compare again once they are quiet. */
		tui_drop_result(t);
		t->depth = 1;
		snprintf(t->job_err, sizeof t->job_err, "the dump files changed during the comparison; comparing again once they are quiet");
	}
	if (st == UI_WATCH_READY) {
		tui_reload(t);
		return true;
	}
	if (tui_reloading(t)) {
		tui_reload_cancel(t);
		tui_message(t, false, "the dump files changed again: reloading once they are quiet");
		return true;
	}
	if (st == UI_WATCH_WRITING && was != UI_WATCH_WRITING) {
		tui_message(t, false, "waiting for %s to be written", ui_watch_writing(t->watch));
		return true;
	}
	if (st == UI_WATCH_SETTLING && was == UI_WATCH_QUIET) {
		tui_message(t, false, "the dump files changed: reloading once they are quiet");
		return true;
	}
	return false;
}

bool tui_reload_poll(tui *t)
{
	pending *p = &t->next;
	bool changed = poll_watch(t);
	tb_diag_opts o = tui_diag_opts(t);
	tb_diagnosis dg;
	tb_result *r;
	tb_err err;
	char buf[TB_ERR_TEXT_MAX];

	if (!p->job || !tb_job_finished(p->job))
		return changed;
	if (tb_job_finish(p->job, &r, &err) < 0) {
		p->job = NULL;
		tb_session_free(&p->sess);
		reload_failed(t, tb_err_text(&err, buf, sizeof buf));
		return true;
	}
	p->job = NULL;
	if (tb_diagnose(&p->sess, r, &o, TB_TARGET_FIRST_DIVERGENCE, &dg, &err) == 0) {
		swap_in(t, r, &dg, true);
	} else {
		memset(&dg, 0, sizeof dg);
		swap_in(t, r, &dg, false);
		tui_message(t, true, "diagnosis failed: %s", err.msg);
	}
	return true;
}

void tui_record_pass(tui *t)
{
	const tb_pass *p;
	tb_pass prev = {0};
	char buf[TB_ERR_TEXT_MAX], warning[sizeof t->hist.warning];
	tb_err err;

	if (!t->hist.in_memory) {
		/* From disk each time: a `tbisect check` may have added passes. */
		tb_history_free(&t->hist);
		tb_history_open(&t->sess, &t->hist);
		if (t->hist.warning[0])
			tui_message(t, true, "%s", t->hist.warning);
		if (!t->hist.path[0]) {
			/* Not kept on disk: still say how the divergence moves in this session. */
			memcpy(warning, t->hist.warning, sizeof warning);
			tb_history_init_memory(&t->hist);
			memcpy(t->hist.warning, warning, sizeof warning);
		}
	}
	if (t->hist.n)
		prev = t->hist.passes[t->hist.n - 1];
	if (tb_history_record(&t->hist, &t->sess, t->res, t->have_diag ? &t->diag : NULL, &err) < 0)
		tui_message(t, true, "%s", tb_err_text(&err, buf, sizeof buf));
	if (!t->hist.n)
		return;
	p = &t->hist.passes[t->hist.n - 1];
	/* Another run (a `tbisect check`) recorded this very dump since our last
	 * pass: the movement since what this view showed is in its note. */
	if (p->move == TB_MOVE_UNCHANGED && t->my_last_pass > 0 && prev.number > t->my_last_pass)
		p = &prev;
	t->my_last_pass = t->hist.passes[t->hist.n - 1].number;
	snprintf(t->banner, sizeof t->banner, "%s", p->note);
	t->banner_bad = tb_move_is_bad(p->move);
	t->banner_good = p->move == TB_MOVE_LATER || p->move == TB_MOVE_MATCHED;
}

bool tui_refuse_stale(tui *t, const tb_cell_result *c)
{
	const tb_tensor *side[2] = {c->ref, c->cand};
	char name[128];

	tb_cell_name(&c->cell, name, sizeof name);
	if (t->stale) {
		tui_message(t, true, "%s: the dump files changed since this view read them; not re-read until a reload succeeds",
			    name);
		return true;
	}
	for (int s = 0; s < 2; s++) {
		struct stat st;
		if (!side[s])
			continue;
		if (stat(side[s]->path, &st) < 0 || st.st_mtim.tv_sec > t->loaded.tv_sec ||
		    (st.st_mtim.tv_sec == t->loaded.tv_sec && st.st_mtim.tv_nsec > t->loaded.tv_nsec)) {
			tui_message(t, true, "%s: %s changed on disk since it was read; r reloads", name, side[s]->path);
			return true;
		}
	}
	return false;
}
