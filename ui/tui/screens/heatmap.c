/*
 * The main screen: header, legend, the layer x tap heatmap with sticky row
 * and column labels, the progress bar or causes line, and the status lines
 * of the selected cell.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "run/report.h"
#include "tui/doc.h"
#include "tui/draw.h"
#include "compare/scale.h"
#include "tui/screens/screens.h"
#include "tui/theme.h"

#define LABEL_W 11 /* row label column, with its gap */
#define CELL_W 11  /* marker, glyph, space, 7 value columns, gap */
#define GRID_TOP 4 /* first grid line of the window */
/* A window of fewer lines is compact: the grid keeps the room, so the
 * tolerance and legend lines, the banner and the causes line go (the
 * header keeps the verdict, one status line the selected cell). */
#define COMPACT_BELOW 15
#define GRID_TOP_COMPACT 2
#define SWATCH_W 12

#define BANNER_MAX 4 /* banner lines at most */

static bool compact(WINDOW *w)
{
	return getmaxy(w) < COMPACT_BELOW;
}

/* text word-wrapped into at most max lines from window line y (only
 * counted when y < 0); returns the lines it takes, *last the width of the
 * last one. */
static int wrap_at(WINDOW *w, int y, int max, attr_t a, const char *text, int *last)
{
	doc dc = {w, 0, y < 0 ? 1 << 20 : 1 - y, y < 0 ? 0 : y + max};

	*last = doc_wrap(&dc, a, "", 0, text);
	return dc.y < max ? dc.y : max;
}

/* The banner under the grid: the last pass's movement with the count of
 * changed cells, then why the last reload failed (which keeps its room:
 * the note shrinks to one line then, H shows it whole).  Drawn from window
 * line y0, or only counted when y0 < 0.  Returns its lines. */
static int banner(const view *v, WINDOW *w, int y0)
{
	char more[64] = "", err[sizeof v->reload_err + 64];
	/* At least one grid row stays. */
	int room = getmaxy(w) - GRID_TOP - 4, max = room < BANNER_MAX ? (room > 0 ? room : 0) : BANNER_MAX, n = 0;
	int last = 0;

	if (v->banner[0]) {
		n = wrap_at(w, y0, v->reload_err[0] && max > 1 ? 1 : max,
			    ui_attr(v->banner_bad ? UI_ERROR : v->banner_good ? UI_GOOD : UI_HEADER), v->banner, &last);
		if (v->n_changed)
			snprintf(more, sizeof more, "  (* %zu changed)", v->n_changed);
		if (more[0]) {
			const char *piece = more;
			/* The count is one piece: on a line of its own when it does not fit. */
			if (last + (int)strlen(more) > getmaxx(w) && n < max) {
				n++;
				piece = more + 2;
				last = 0;
			}
			if (y0 >= 0 && n > 0)
				ui_put(w, y0 + n - 1, last, ui_attr(UI_MARK), "%s", piece);
		}
	}
	if (v->run.partial) {
		char cov[TB_COVERAGE_TEXT_MAX], text[256];
		tb_coverage_text(&v->run.coverage, cov, sizeof cov);
		snprintf(text, sizeof text, "%s: no cause is named (u: the unpaired tensors)", cov);
		n += wrap_at(w, y0 < 0 ? y0 : y0 + n, max - n, ui_attr(UI_ERROR), text, &last);
	}
	if (v->reload_err[0]) {
		snprintf(err, sizeof err, "reload failed, showing the last good view: %s", v->reload_err);
		n += wrap_at(w, y0 < 0 ? y0 : y0 + n, max - n, ui_attr(UI_ERROR), err, &last);
	}
	return n;
}

static int grid_top(WINDOW *w)
{
	return compact(w) ? GRID_TOP_COMPACT : GRID_TOP;
}

static int grid_rows(const view *v, WINDOW *w)
{
	if (compact(w))
		return getmaxy(w) - GRID_TOP_COMPACT - 1;
	return getmaxy(w) - GRID_TOP - 3 - banner(v, w, -1);
}

static int grid_cols(WINDOW *w)
{
	int n = (getmaxx(w) - LABEL_W) / CELL_W;
	return n < 1 ? 1 : n;
}

static const tb_scale *cur_metric(const view *v)
{
	return &tb_scales[v->metric];
}

/* The 10 columns of one cell: marker, status glyph, space, value.  The
 * marker is '*' (and the cell underlined) when the status changed in the
 * last pass. */
static void cell_text(const view *v, long i, char *buf, size_t size, attr_t *a)
{
	const tb_scale *mt = cur_metric(v);
	int st = view_cell_status(v, (size_t)i);
	const tb_cell_result *c;
	char num[32];

	*a = ui_cell_attr(st, 0);
	if (st == TB_ST_PENDING) {
		snprintf(buf, size, " %c    ...", tb_status_glyph(st));
		return;
	}
	c = &view_result(v)->cells[i];
	if (st == TB_ST_MISSING) {
		snprintf(buf, size, " %c %-7s", tb_status_glyph(st), c->ref ? "no cand" : "no ref");
		return;
	}
	const tb_diagnosis *dg = view_diag(v);
	double val = mt->value(&c->m, dg ? dg->origin.amplification[i] : NAN);
	tb_scale_format(mt, val, num, sizeof num);
	/* The glyph reads the number on the legend's thresholds: on rel_l2 the
	 * cell's status (judged at its own tolerance), on another metric its
	 * band there; a value the metric has not (no diagnosis for "added")
	 * keeps the status. */
	if (v->metric != 0 && !isnan(val))
		st = tb_scale_band(mt, &v->tol, mt->badness(val));
	*a = ui_cell_attr(st, tb_scale_level(mt, mt->badness(val)));
	snprintf(buf, size, " %c %7s", tb_status_glyph(st), num);
	if (v->changed && v->run.res && v->changed[i]) {
		buf[0] = '*';
		*a |= ui_attr_only(UI_CHANGED);
	}
}

/* path in at most max columns, cut from the left ("...pair/ref"). */
static void fit_path(const char *path, int max, char *buf, size_t size)
{
	int n = (int)strlen(path);

	if (max < 8)
		max = 8;
	if (n <= max)
		snprintf(buf, size, "%s", path);
	else
		snprintf(buf, size, "...%s", path + n - (max - 3));
}

static void draw_header(view *v, WINDOW *w)
{
	const tb_pairing *p = view_pairing(v);
	long first = view_first_divergence(v);
	char name[TB_CELL_NAME_MAX];
	int x;

	ui_put(w, 0, 0, ui_attr(UI_TITLE), "tbisect");
	x = 9;
	if (v->run.res && tb_coverage_empty(&v->run.coverage)) {
		/* Nothing paired (--allow-partial): no verdict, until M and y pair the trees. */
		ui_put(w, 0, x, ui_attr(UI_ERROR), "NO VERDICT");
		x += 12;
	} else if (v->run.res) {
		int vd = v->run.res->verdict;
		ui_put(w, 0, x, ui_attr(vd == TB_ST_DIVERGED ? UI_BAD : vd == TB_ST_CLOSE ? UI_CLOSE : UI_GOOD), "%s",
		       tb_verdict_word(vd));
		x += vd == TB_ST_DIVERGED ? 10 : 7;
		/* The verdict is the last good view's: say so beside it, not only in the banner. */
		if (v->reload_err[0]) {
			ui_put(w, 0, x, ui_attr(UI_ERROR), "(last good) RELOAD FAILED");
			x += 27;
		}
	} else {
		/* Without a result: comparing, waiting for changed files to settle, or failed. */
		bool waiting = !v->run.job && v->watch_state != UI_WATCH_QUIET;
		const char *what = v->run.job ? "comparing" : waiting ? "waiting" : "FAILED";
		ui_put(w, 0, x, ui_attr(v->run.job || waiting ? UI_PENDING : UI_ERROR), "%s", what);
		x += (int)strlen(what) + 2;
	}
	if (first >= 0) {
		const tb_cell_result *c = &view_result(v)->cells[first];
		char pos[48] = "";
		if (c->m.first_bad_position >= 0)
			snprintf(pos, sizeof pos, " pos %lld", (long long)c->m.first_bad_position);
		ui_put(w, 0, x, ui_attr(UI_BAD), "%s %s%s", v->run.res ? "first divergence" : "first so far",
		       view_cell_label(v, first, name, sizeof name), pos);
		x += (int)(strlen(v->run.res ? "first divergence" : "first so far") + strlen(name) + strlen(pos) + 3);
	} else if (v->run.res) {
		ui_put(w, 0, x, ui_attr(UI_GOOD), "no cell diverged");
		x += 18;
	}
	if (v->run.open) {
		const tb_tree_layout *lo = v->run.sess.cand->layout.n_steps ? &v->run.sess.cand->layout
									     : &v->run.sess.ref->layout;
		char steps[64] = "";
		if (lo->n_steps && lo->step >= 0)
			snprintf(steps, sizeof steps, "step %d of %d..%d", lo->step, lo->first_step,
				 lo->first_step + lo->n_steps - 1);
		else if (lo->n_steps)
			snprintf(steps, sizeof steps, "steps stitched");
		if (steps[0]) {
			ui_put(w, 0, x, ui_attr(UI_HEADER), "%s", steps);
			x += (int)strlen(steps) + 2;
		}
		/* the grid shown, when it is a tower's (t switches) */
		if (v->run.cfg->opts.tower) {
			ui_put(w, 0, x, ui_attr(UI_LABEL), "%s tower", v->run.cfg->opts.tower);
			x += (int)strlen(v->run.cfg->opts.tower) + 8;
		}
	}
	ui_put(w, 0, x, ui_attr(UI_HEADER), "paired %zu  unpaired %zu/%zu", tb_pairing_complete(p), p->n_unp[0],
	       p->n_unp[1]);
	if (compact(w))
		return;
	char tol[128], ref[512], cand[512];
	int n = snprintf(tol, sizeof tol, "atol %g rtol %g diverge %g", v->tol.atol, v->tol.rtol, v->tol.diverge);
	int room = (getmaxx(w) - n - 13) / 2;
	fit_path(v->run.sess.ref_path, room, ref, sizeof ref);
	fit_path(v->run.sess.cand_path, room, cand, sizeof cand);
	ui_put(w, 1, 0, ui_attr(UI_HEADER), "%s  ref %s  cand %s", tol, ref, cand);
}

static void draw_legend(view *v, WINDOW *w, int y)
{
	const tb_scale *mt = cur_metric(v);
	double mm = mt->match_mark(&v->tol), dm = mt->diverge_mark(&v->tol);
	double llo = log10(mt->lo), lhi = log10(mt->hi);
	int x;

	ui_put(w, y, 0, ui_attr(UI_TITLE), "%s", mt->scale);
	x = (int)strlen(mt->scale) + 1;
	ui_put(w, y, x, ui_attr(UI_DIM), "%.0e", mt->lo);
	x += 6;
	for (int k = 0; k < SWATCH_W; k++) {
		double level = (k + 0.5) / SWATCH_W, bad = pow(10, llo + level * (lhi - llo));
		int st = tb_scale_band(mt, &v->tol, bad);
		ui_put(w, y, x + k, ui_cell_attr(st, level), "%c", tb_status_glyph(st));
	}
	x += SWATCH_W + 1;
	ui_put(w, y, x, ui_attr(UI_DIM), "%.0e", mt->hi);
	x += 7;
	char marks[160], over[32] = "";
	if (!isnan(dm))
		snprintf(over, sizeof over, ">%.0e", dm);
	/* Too wide (a long scale name at 80 columns): the words go, the glyphs
	 * keep their thresholds. */
	for (int words = 1; words >= 0; words--) {
		snprintf(marks, sizeof marks, ".%s<=%.0e ~close X%s%s -missing", words ? "match" : "", mm,
			 words ? "diverged" : "", over);
		if (x + (int)strlen(marks) <= getmaxx(w))
			break;
	}
	ui_put(w, y, x, ui_attr(UI_MARK), "%s", marks);
}

static void draw_grid(view *v, WINDOW *w)
{
	grid *g = &v->g;
	int rows = grid_rows(v, w), cols = grid_cols(w), top = grid_top(w);
	long sel = grid_selected(g);
	char buf[64];

	grid_scroll_to_cursor(g, rows, cols);
	if (g->n_vrows > rows)
		ui_put(w, top - 1, 0, ui_attr(UI_DIM), "%d-%d/%d", g->top + 1,
		       g->top + rows < g->n_vrows ? g->top + rows : g->n_vrows, g->n_vrows);
	for (int vc = g->left; vc < g->n_vcols && vc < g->left + cols; vc++) {
		const char *tap = g->cols[g->vcols[vc]];
		ui_put(w, top - 1, LABEL_W + (vc - g->left) * CELL_W + 1,
		       ui_attr(vc == g->cur_c ? UI_LABEL_SEL : UI_LABEL), "%.9s", tap);
	}
	if (g->left > 0)
		ui_put(w, top - 1, LABEL_W - 1, ui_attr(UI_MARK), "<");
	if (g->left + cols < g->n_vcols)
		ui_put(w, top - 1, LABEL_W + cols * CELL_W - 1, ui_attr(UI_MARK), ">");
	for (int vr = g->top; vr < g->n_vrows && vr < g->top + rows; vr++) {
		int y = top + vr - g->top, row = g->vrows[vr];
		bool model = grid_row_is_model(g, row);
		ui_put(w, y, 0, ui_attr(vr == g->cur_r ? UI_LABEL_SEL : UI_LABEL), "%s",
		       grid_row_label(g, row, buf, sizeof buf));
		/* A model-level row has one cell, in the first column: scrolled
		 * past it, the row says so as the column labels do. */
		if (model && g->left > 0) {
			ui_put(w, y, LABEL_W - 1, ui_attr(UI_MARK), "<");
			continue;
		}
		int last = model ? 1 : g->left + cols < g->n_vcols ? g->left + cols : g->n_vcols;
		for (int vc = g->left; vc < last; vc++) {
			long i = grid_pair_at(g, vr, vc);
			int x = LABEL_W + (vc - g->left) * CELL_W;
			attr_t a;
			if (i < 0) {
				if (vr == g->cur_r && (model || vc == g->cur_c))
					ui_put(w, y, x, ui_attr(UI_CURSOR), ">  (none) ");
				continue;
			}
			cell_text(v, i, buf, sizeof buf, &a);
			if (i == sel) {
				a = ui_cursor(a);
				buf[0] = '>';
			}
			ui_put(w, y, x, a, "%s", buf);
		}
	}
}

/* "comparing [####....] 12/23 tensors ..." for a job started at t_start. */
static void draw_progress(WINDOW *w, int y, const char *what, const tb_job *job, double t_start)
{
	size_t done, total;
	uint64_t bd, bt;
	double el, rate, eta;
	int bar = 24, fill, x = (int)strlen(what) + 2;

	tb_job_progress(job, &done, &total, &bd, &bt);
	el = view_now() - t_start;
	rate = el > 0 ? (double)bd / el : 0;
	eta = rate > 0 ? (double)(bt - bd) / rate : 0;
	fill = bt ? (int)((double)bd / (double)bt * bar) : (total ? (int)(done * (size_t)bar / total) : 0);
	ui_put(w, y, 0, ui_attr(UI_HEADER), "%s [", what);
	for (int k = 0; k < bar; k++)
		ui_put(w, y, x + k, k < fill ? ui_attr(UI_PROGRESS) : ui_attr(UI_DIM), "%c", k < fill ? '#' : '.');
	if (rate > 0)
		ui_put(w, y, x + bar, ui_attr(UI_HEADER), "] %zu/%zu tensors  %.2f GB/s  ETA %.1fs", done, total,
		       rate / 1e9, eta);
	else
		ui_put(w, y, x + bar, ui_attr(UI_HEADER), "] %zu/%zu tensors  starting", done, total);
}

static void draw_causes_line(view *v, WINDOW *w, int y)
{
	long first = view_first_divergence(v);
	char name[TB_CELL_NAME_MAX];

	if (v->run.job) {
		draw_progress(w, y, "comparing", v->run.job, v->run.started);
		return;
	}
	if (v->next.job) {
		draw_progress(w, y, "reloading", v->next.job, v->next.started);
		return;
	}
	if (!v->run.res && v->watch_state != UI_WATCH_QUIET) {
		ui_put(w, y, 0, ui_attr(UI_PENDING), "%s", v->job_err);
		return;
	}
	if (!v->run.res) {
		ui_put(w, y, 0, ui_attr(UI_ERROR), "comparison failed: %s", v->job_err);
		return;
	}
	const tb_diagnosis *dg = view_diag(v);
	if (first < 0) {
		/* a close pair still has causes (precision drift): say them here as the pane does */
		if (dg && dg->causes.n && !v->run.partial)
			ui_put(w, y, 0, ui_attr(UI_HEADER), "causes (no cell diverged): %s %.2f%s  (c: causes pane)",
			       dg->causes.v[0].id, dg->causes.v[0].score, dg->causes.n > 1 ? " ..." : "");
		else
			ui_put(w, y, 0, ui_attr(UI_DIM), "causes: none (no cell diverged)");
		return;
	}
	view_cell_label(v, first, name, sizeof name);
	if (v->run.partial) {
		ui_put(w, y, 0, ui_attr(UI_ERROR), "causes of %s: none named on a partial pairing  (u: unpaired)", name);
		return;
	}
	if (!dg) {
		ui_put(w, y, 0, ui_attr(UI_DIM), "causes of %s: no diagnosis rules loaded  (c: causes pane)", name);
		return;
	}
	if (dg->causes.n == 0) {
		ui_put(w, y, 0, ui_attr(UI_DIM), "causes of %s: no rule matched  (c: causes pane)", name);
		return;
	}
	ui_put(w, y, 0, ui_attr(UI_HEADER), "causes of %s: %s %.2f%s  (c: causes pane)", name, dg->causes.v[0].id,
	       dg->causes.v[0].score, dg->causes.n > 1 ? " ..." : "");
}

/* The selected cell: its status and reason, then (when lines > 1) its
 * metrics and tensor names. */
static void draw_status(view *v, WINDOW *w, int y, int lines)
{
	long i = grid_selected(&v->g);
	const tb_cell_result *c;
	const tb_pair *p;
	const tb_tap_info *ti;
	char name[TB_CELL_NAME_MAX], a[32], b[32], cc[32], d[32], e[32];

	if (i < 0) {
		ui_put(w, y, 0, ui_attr(UI_DIM), "(nothing dumped here)");
		return;
	}
	p = &view_pairing(v)->pairs[i];
	ti = tb_tap_lookup(p->cell.tap);
	view_cell_label(v, i, name, sizeof name);
	if (!view_cell_ready(v, (size_t)i)) {
		ui_put(w, y, 0, ui_attr(UI_STATUS), "%s  pending  %s", name, p->ref ? p->ref->name : p->cand->name);
		return;
	}
	c = &view_result(v)->cells[i];
	ui_put(w, y, 0, ui_attr(c->status == TB_ST_DIVERGED ? UI_BAD : UI_STATUS), "%s %s: %s", name,
	       tb_status_name(c->status), c->reason);
	if (lines < 2)
		return;
	if (c->status == TB_ST_MISSING) {
		ui_put(w, y + 1, 0, ui_attr(UI_STATUS), "%s %s%s%s", c->ref ? "ref" : "cand",
		       c->ref ? c->ref->name : c->cand->name, ti ? "  " : "", ti ? ti->label : "");
		return;
	}
	if (c->by_sets) {
		/* the expert sets' cell: its layer's routing, flips and all */
		const tb_routing_layer *l = tb_routing_layer_of(&v->run.routing, c->cell.layer);
		char routed[TB_ROUTING_TEXT_MAX];
		if (l) {
			tb_routing_layer_text(l, routed, sizeof routed);
			ui_put(w, y + 1, 0, ui_attr(UI_STATUS), "%s", routed);
		}
		return;
	}
	tb_scale_format(&tb_scales[0], c->m.rel_l2, a, sizeof a);
	tb_scale_format(&tb_scales[1], c->m.cosine, b, sizeof b);
	tb_scale_format(&tb_scales[2], c->m.max_abs, cc, sizeof cc);
	tb_scale_format(&tb_scales[3], c->m.norm_ratio, d, sizeof d);
	tb_scale_format(&tb_scales[4], c->m.allclose_frac, e, sizeof e);
	char names[600];
	if (!strcmp(c->ref->name, c->cand->name))
		snprintf(names, sizeof names, "%s", c->ref->name);
	else
		snprintf(names, sizeof names, "ref %s cand %s", c->ref->name, c->cand->name);
	char line[800];
	int n = snprintf(line, sizeof line, "rel_l2 %s cosine %s max_abs %s norm_ratio %s allclose %s", a, b, cc, d, e);
	/* The tensor names when they fit (the detail screen has them whole). */
	if (n >= 0 && n + 2 + (int)strlen(names) <= getmaxx(w))
		snprintf(line + n, sizeof line - (size_t)n, "  %s", names);
	ui_put(w, y + 1, 0, ui_attr(UI_STATUS), "%s", line);
}

static void heatmap_draw(view *v, WINDOW *w)
{
	int h = getmaxy(w);

	draw_header(v, w);
	if (compact(w)) {
		draw_grid(v, w);
		draw_status(v, w, h - 1, 1);
		return;
	}
	draw_legend(v, w, 2);
	draw_grid(v, w);
	banner(v, w, h - 3 - banner(v, w, -1));
	draw_causes_line(v, w, h - 3);
	draw_status(v, w, h - 2, 2);
}

static long next_diverged(const view *v, long from, int dir)
{
	long n = (long)view_pairing(v)->n_pairs;

	for (long i = from + dir; i >= 0 && i < n; i += dir)
		if (view_cell_status(v, (size_t)i) == TB_ST_DIVERGED)
			return i;
	return -1;
}

/* After a `/` search, n and N go to its next or previous match, as in vi
 * and less. */
static ui_ret next_match(view *v, int dir)
{
	char why[128], name[TB_CELL_NAME_MAX];
	int found = view_search(v, v->search, dir, why, sizeof why);

	if (found > 0)
		view_message(v, false, "/%s: %s (n next, N previous, Esc ends the search)", v->search,
			     view_cell_label(v, grid_selected(&v->g), name, sizeof name));
	else
		view_message(v, true, "/%s: no %s match", v->search, found < 0 ? "valid" : "other");
	return ui_flags(0);
}

static ui_ret heatmap_action(view *v, WINDOW *w, tb_action a)
{
	grid *g = &v->g;
	long sel = grid_selected(g), i;
	char name[TB_CELL_NAME_MAX];
	ui_ret open = {.open = SCREEN_DETAIL, .cell = sel};

	switch (a) {
	case TB_ACT_UP: grid_move(g, -1, 0); break;
	case TB_ACT_DOWN: grid_move(g, 1, 0); break;
	case TB_ACT_LEFT: grid_move(g, 0, -1); break;
	case TB_ACT_RIGHT: grid_move(g, 0, 1); break;
	case TB_ACT_PAGE_UP: grid_move(g, -grid_rows(v, w), 0); break;
	case TB_ACT_PAGE_DOWN: grid_move(g, grid_rows(v, w), 0); break;
	case TB_ACT_PAGE_LEFT: grid_move(g, 0, -grid_cols(w)); break;
	case TB_ACT_PAGE_RIGHT: grid_move(g, 0, grid_cols(w)); break;
	case TB_ACT_TOP: grid_move(g, -g->n_vrows, 0); break;
	case TB_ACT_BOTTOM: grid_move(g, g->n_vrows, 0); break;
	case TB_ACT_FIRST_DIV:
		i = view_first_divergence(v);
		if (i < 0)
			view_message(v, false, v->run.job ? "no cell has diverged yet" : "no cell diverged");
		else
			grid_select(g, i);
		break;
	case TB_ACT_NEXT_DIV:
	case TB_ACT_PREV_DIV:
		if (v->search[0])
			return next_match(v, a == TB_ACT_NEXT_DIV ? 1 : -1);
		i = next_diverged(v, sel < 0 ? (a == TB_ACT_NEXT_DIV ? -1 : (long)view_pairing(v)->n_pairs) : sel,
				  a == TB_ACT_NEXT_DIV ? 1 : -1);
		if (i < 0)
			view_message(v, false, "no diverged cell %s %s", a == TB_ACT_NEXT_DIV ? "after" : "before",
				    view_cell_label(v, sel, name, sizeof name));
		else
			grid_select(g, i);
		break;
	case TB_ACT_FOLD:
		g->folded = !g->folded;
		grid_relayout(g);
		view_message(v, false, "sub-taps %s", g->folded ? "folded" : "shown");
		break;
	case TB_ACT_OPEN:
		if (sel < 0)
			view_message(v, false, "nothing dumped here");
		else if (!view_cell_ready(v, (size_t)sel))
			view_message(v, false, "%s is still being compared", view_cell_label(v, sel, name, sizeof name));
		else
			return open;
		break;
	case TB_ACT_BACK:
		if (v->search[0]) {
			view_message(v, false, "search '%s' cleared: n/N go to diverged cells again", v->search);
			v->search[0] = '\0';
		}
		break;
	case TB_ACT_QUIT: return ui_flags(UI_QUIT);
	default: return ui_flags(0);
	}
	return ui_flags(0);
}

static ui_ret heatmap_click(view *v, WINDOW *w, int y, int x)
{
	grid *g = &v->g;
	int vr = g->top + y - grid_top(w), vc = g->left + (x - LABEL_W) / CELL_W;

	if (y < grid_top(w) || y >= grid_top(w) + grid_rows(v, w) || vr >= g->n_vrows)
		return ui_flags(0);
	g->cur_r = vr;
	if (x >= LABEL_W && vc < g->n_vcols)
		g->cur_c = vc;
	return ui_flags(0);
}

static const screen_hint hints[] = {{.action = TB_ACT_HELP, .label = "help"},
				    {.action = TB_ACT_OPEN, .label = "open"},
				    {.action = TB_ACT_FIRST_DIV, .label = "first divergence"},
				    {.action = TB_ACT_CAUSES, .label = "causes"},
				    {.action = TB_ACT_PROMPT, .label = "command"},
				    {.action = TB_ACT_QUIT, .label = "quit"},
				    {.action = TB_ACT_NONE}};

const screen_ops heatmap_screen = {
	.name = "heatmap",
	.hints = hints,
	.draw = heatmap_draw,
	.action = heatmap_action,
	.click = heatmap_click,
};
