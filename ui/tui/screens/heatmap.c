/*
 * The main screen: header, legend, the layer x tap heatmap with sticky row
 * and column labels, the progress bar or causes line, and the status lines
 * of the selected cell.  Also the small drawing helpers the other screens
 * share.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tui/doc.h"
#include "tui/metric.h"
#include "run/report.h"
#include "tui/theme.h"
#include "tui/tui.h"

#define LABEL_W 11 /* row label column, with its gap */
#define CELL_W 11  /* marker, glyph, space, 7 value columns, gap */
#define GRID_TOP 4 /* first grid line of the window */
#define SWATCH_W 12

void ui_put(WINDOW *w, int y, int x, attr_t a, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	int maxx = getmaxx(w);

	if (y < 0 || y >= getmaxy(w) || x < 0 || x >= maxx)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	wattrset(w, a);
	mvwaddnstr(w, y, x, buf, maxx - x);
	wattrset(w, A_NORMAL);
}

void ui_fmt_num(double v, char *buf, size_t size)
{
	if (isnan(v) || isinf(v))
		snprintf(buf, size, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
	else if (v != 0 && (fabs(v) < 1e-3 || fabs(v) >= 1e5))
		snprintf(buf, size, "%.3e", v);
	else
		snprintf(buf, size, "%.5g", v);
}

#define BANNER_MAX 4 /* banner lines at most */

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
static int banner(const tui *t, WINDOW *w, int y0)
{
	char more[64] = "", err[sizeof t->reload_err + 64];
	/* At least one grid row stays. */
	int room = getmaxy(w) - GRID_TOP - 4, max = room < BANNER_MAX ? (room > 0 ? room : 0) : BANNER_MAX, n = 0;
	int last = 0;

	if (t->banner[0]) {
		n = wrap_at(w, y0, t->reload_err[0] && max > 1 ? 1 : max,
			    ui_attr(t->banner_bad ? UI_ERROR : t->banner_good ? UI_GOOD : UI_HEADER), t->banner, &last);
		if (t->n_changed)
			snprintf(more, sizeof more, "  (* %zu changed)", t->n_changed);
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
	if (t->reload_err[0]) {
		snprintf(err, sizeof err, "reload failed, showing the last good view: %s", t->reload_err);
		n += wrap_at(w, y0 < 0 ? y0 : y0 + n, max - n, ui_attr(UI_ERROR), err, &last);
	}
	return n;
}

static int grid_rows(const tui *t)
{
	return getmaxy(t->wmain) - GRID_TOP - 3 - banner(t, t->wmain, -1);
}

static int grid_cols(const tui *t)
{
	int n = (t->cols - LABEL_W) / CELL_W;
	return n < 1 ? 1 : n;
}

static const ui_metric *cur_metric(const tui *t)
{
	return &ui_metrics[t->metric];
}

/* The 10 columns of one cell: marker, status glyph, space, value.  The
 * marker is '*' (and the cell underlined) when the status changed in the
 * last pass. */
static void cell_text(const tui *t, long i, char *buf, size_t size, attr_t *a)
{
	const ui_metric *mt = cur_metric(t);
	int st = tui_cell_status(t, (size_t)i);
	const tb_cell_result *c;
	char v[32];

	*a = ui_cell_attr(st, 0);
	if (st == TB_ST_PENDING) {
		snprintf(buf, size, " %c    ...", tb_status_glyph(st));
		return;
	}
	c = &tui_result(t)->cells[i];
	if (st == TB_ST_MISSING) {
		snprintf(buf, size, " %c %-7s", tb_status_glyph(st), c->ref ? "no cand" : "no ref");
		return;
	}
	double val = mt->value(&c->m, t->have_diag ? t->diag.origin.amplification[i] : NAN);
	ui_metric_format(mt, val, v, sizeof v);
	*a = ui_cell_attr(st, ui_metric_level(mt, mt->badness(val)));
	snprintf(buf, size, " %c %7s", tb_status_glyph(st), v);
	if (t->changed && t->res && t->changed[i]) {
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

static void draw_header(tui *t, WINDOW *w)
{
	const tb_pairing *p = t->sess.pairing;
	long first = tui_first_divergence(t);
	char name[128];
	int x;

	ui_put(w, 0, 0, ui_attr(UI_TITLE), "tbisect");
	x = 9;
	if (t->res) {
		int v = t->res->verdict;
		ui_put(w, 0, x, ui_attr(v == TB_ST_DIVERGED ? UI_BAD : v == TB_ST_CLOSE ? UI_CLOSE : UI_GOOD), "%s",
		       v == TB_ST_DIVERGED ? "DIVERGED" : v == TB_ST_CLOSE ? "CLOSE" : "MATCH");
		x += v == TB_ST_DIVERGED ? 10 : 7;
	} else {
		/* Without a result: comparing, waiting for changed files to settle, or failed. */
		bool waiting = !t->job && t->watch_state != UI_WATCH_QUIET;
		const char *what = t->job ? "comparing" : waiting ? "waiting" : "FAILED";
		ui_put(w, 0, x, ui_attr(t->job || waiting ? UI_PENDING : UI_ERROR), "%s", what);
		x += (int)strlen(what) + 2;
	}
	if (first >= 0) {
		const tb_cell_result *c = &tui_result(t)->cells[first];
		char pos[48] = "";
		if (c->m.first_bad_position >= 0)
			snprintf(pos, sizeof pos, " pos %lld", (long long)c->m.first_bad_position);
		ui_put(w, 0, x, ui_attr(UI_BAD), "%s %s%s", t->res ? "first divergence" : "first so far",
		       tui_cell_label(t, first, name, sizeof name), pos);
		x += (int)(strlen(t->res ? "first divergence" : "first so far") + strlen(name) + strlen(pos) + 3);
	} else if (t->res) {
		ui_put(w, 0, x, ui_attr(UI_GOOD), "no cell diverged");
		x += 18;
	}
	ui_put(w, 0, x, ui_attr(UI_HEADER), "paired %zu  unpaired %zu/%zu", tb_pairing_complete(p), p->n_unp[0],
	       p->n_unp[1]);
	char tol[128], ref[512], cand[512];
	int n = snprintf(tol, sizeof tol, "atol %g rtol %g diverge %g", t->tol.atol, t->tol.rtol, t->tol.diverge);
	int room = (t->cols - n - 13) / 2;
	fit_path(t->sess.ref_path, room, ref, sizeof ref);
	fit_path(t->sess.cand_path, room, cand, sizeof cand);
	ui_put(w, 1, 0, ui_attr(UI_HEADER), "%s  ref %s  cand %s", tol, ref, cand);
}

static void draw_legend(tui *t, WINDOW *w, int y)
{
	const ui_metric *mt = cur_metric(t);
	double mm = mt->match_mark(&t->tol), dm = mt->diverge_mark(&t->tol);
	double llo = log10(mt->lo), lhi = log10(mt->hi);
	int x;

	ui_put(w, y, 0, ui_attr(UI_TITLE), "%s", mt->scale);
	x = (int)strlen(mt->scale) + 1;
	ui_put(w, y, x, ui_attr(UI_DIM), "%.0e", mt->lo);
	x += 6;
	for (int k = 0; k < SWATCH_W; k++) {
		double level = (k + 0.5) / SWATCH_W, bad = pow(10, llo + level * (lhi - llo));
		int st = ui_metric_band(mt, &t->tol, bad);
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
		if (x + (int)strlen(marks) <= t->cols)
			break;
	}
	ui_put(w, y, x, ui_attr(UI_MARK), "%s", marks);
}

static void draw_grid(tui *t, WINDOW *w)
{
	grid *g = &t->g;
	int rows = grid_rows(t), cols = grid_cols(t);
	long sel = grid_selected(g);
	char buf[64];

	grid_scroll_to_cursor(g, rows, cols);
	if (g->n_vrows > rows)
		ui_put(w, GRID_TOP - 1, 0, ui_attr(UI_DIM), "%d-%d/%d", g->top + 1,
		       g->top + rows < g->n_vrows ? g->top + rows : g->n_vrows, g->n_vrows);
	for (int vc = g->left; vc < g->n_vcols && vc < g->left + cols; vc++) {
		const char *tap = g->cols[g->vcols[vc]];
		ui_put(w, GRID_TOP - 1, LABEL_W + (vc - g->left) * CELL_W + 1,
		       ui_attr(vc == g->cur_c ? UI_LABEL_SEL : UI_LABEL), "%.9s", tap);
	}
	if (g->left > 0)
		ui_put(w, GRID_TOP - 1, LABEL_W - 1, ui_attr(UI_MARK), "<");
	if (g->left + cols < g->n_vcols)
		ui_put(w, GRID_TOP - 1, LABEL_W + cols * CELL_W - 1, ui_attr(UI_MARK), ">");
	for (int vr = g->top; vr < g->n_vrows && vr < g->top + rows; vr++) {
		int y = GRID_TOP + vr - g->top, row = g->vrows[vr];
		bool model = grid_row_is_model(g, row);
		ui_put(w, y, 0, ui_attr(vr == g->cur_r ? UI_LABEL_SEL : UI_LABEL), "%s",
		       grid_row_label(g, row, buf, sizeof buf));
		/* A model-level row has one cell, drawn in the first shown column. */
		int last = model ? g->left + 1 : g->left + cols < g->n_vcols ? g->left + cols : g->n_vcols;
		for (int vc = g->left; vc < last; vc++) {
			long i = grid_pair_at(g, vr, vc);
			int x = LABEL_W + (vc - g->left) * CELL_W;
			attr_t a;
			if (i < 0) {
				if (vr == g->cur_r && (model || vc == g->cur_c))
					ui_put(w, y, x, ui_attr(UI_CURSOR), ">  (none) ");
				continue;
			}
			cell_text(t, i, buf, sizeof buf, &a);
			if (i == sel) {
				a |= ui_attr(UI_CURSOR);
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
	el = tui_now() - t_start;
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

static void draw_causes_line(tui *t, WINDOW *w, int y)
{
	long first = tui_first_divergence(t);
	char name[128];

	if (t->job) {
		draw_progress(w, y, "comparing", t->job, t->t_start);
		return;
	}
	if (tui_reloading(t)) {
		draw_progress(w, y, "reloading", t->next.job, t->next.t_start);
		return;
	}
	if (!t->res && t->watch_state != UI_WATCH_QUIET) {
		ui_put(w, y, 0, ui_attr(UI_PENDING), "%s", t->job_err);
		return;
	}
	if (!t->res) {
		ui_put(w, y, 0, ui_attr(UI_ERROR), "comparison failed: %s", t->job_err);
		return;
	}
	if (first < 0) {
		ui_put(w, y, 0, ui_attr(UI_DIM), "causes: none (no cell diverged)");
		return;
	}
	tui_cell_label(t, first, name, sizeof name);
	if (!t->rules || !t->have_diag) {
		ui_put(w, y, 0, ui_attr(UI_DIM), "causes of %s: no diagnosis rules loaded  (c: causes pane)", name);
		return;
	}
	if (t->diag.causes.n == 0) {
		ui_put(w, y, 0, ui_attr(UI_DIM), "causes of %s: no rule matched  (c: causes pane)", name);
		return;
	}
	ui_put(w, y, 0, ui_attr(UI_HEADER), "causes of %s: %s %.2f%s  (c: causes pane)", name, t->diag.causes.v[0].id,
	       t->diag.causes.v[0].score, t->diag.causes.n > 1 ? " ..." : "");
}

static void draw_status(tui *t, WINDOW *w, int y)
{
	long i = grid_selected(&t->g);
	const tb_cell_result *c;
	const tb_pair *p;
	const tb_tap_info *ti;
	char name[128], a[32], b[32], cc[32], d[32], e[32];

	if (i < 0) {
		ui_put(w, y, 0, ui_attr(UI_DIM), "(nothing dumped here)");
		return;
	}
	p = &t->sess.pairing->pairs[i];
	ti = tb_tap_lookup(p->cell.tap);
	tui_cell_label(t, i, name, sizeof name);
	if (!tui_cell_ready(t, (size_t)i)) {
		ui_put(w, y, 0, ui_attr(UI_STATUS), "%s  pending  %s", name, p->ref ? p->ref->name : p->cand->name);
		return;
	}
	c = &tui_result(t)->cells[i];
	ui_put(w, y, 0, ui_attr(c->status == TB_ST_DIVERGED ? UI_BAD : UI_STATUS), "%s %s: %s", name,
	       tb_status_name(c->status), c->reason);
	if (c->status == TB_ST_MISSING) {
		ui_put(w, y + 1, 0, ui_attr(UI_STATUS), "%s %s%s%s", c->ref ? "ref" : "cand",
		       c->ref ? c->ref->name : c->cand->name, ti ? "  " : "", ti ? ti->label : "");
		return;
	}
	ui_metric_format(&ui_metrics[0], c->m.rel_l2, a, sizeof a);
	ui_metric_format(&ui_metrics[1], c->m.cosine, b, sizeof b);
	ui_metric_format(&ui_metrics[2], c->m.max_abs, cc, sizeof cc);
	ui_metric_format(&ui_metrics[3], c->m.norm_ratio, d, sizeof d);
	ui_metric_format(&ui_metrics[4], c->m.allclose_frac, e, sizeof e);
	char names[600];
	if (!strcmp(c->ref->name, c->cand->name))
		snprintf(names, sizeof names, "%s", c->ref->name);
	else
		snprintf(names, sizeof names, "ref %s cand %s", c->ref->name, c->cand->name);
	ui_put(w, y + 1, 0, ui_attr(UI_STATUS), "rel_l2 %s cosine %s max_abs %s norm_ratio %s allclose %s  %s", a, b,
	       cc, d, e, names);
}

static void heatmap_draw(tui *t, WINDOW *w)
{
	int h = getmaxy(w);

	draw_header(t, w);
	draw_legend(t, w, 2);
	draw_grid(t, w);
	banner(t, w, h - 3 - banner(t, w, -1));
	draw_causes_line(t, w, h - 3);
	draw_status(t, w, h - 2);
}

static long next_diverged(const tui *t, long from, int dir)
{
	long n = (long)t->sess.pairing->n_pairs;

	for (long i = from + dir; i >= 0 && i < n; i += dir)
		if (tui_cell_status(t, (size_t)i) == TB_ST_DIVERGED)
			return i;
	return -1;
}

static unsigned heatmap_action(tui *t, tb_action a)
{
	grid *g = &t->g;
	long sel = grid_selected(g), i;
	char name[128];

	switch (a) {
	case TB_ACT_UP: grid_move(g, -1, 0); break;
	case TB_ACT_DOWN: grid_move(g, 1, 0); break;
	case TB_ACT_LEFT: grid_move(g, 0, -1); break;
	case TB_ACT_RIGHT: grid_move(g, 0, 1); break;
	case TB_ACT_PAGE_UP: grid_move(g, -grid_rows(t), 0); break;
	case TB_ACT_PAGE_DOWN: grid_move(g, grid_rows(t), 0); break;
	case TB_ACT_TOP: grid_move(g, -g->n_vrows, 0); break;
	case TB_ACT_BOTTOM: grid_move(g, g->n_vrows, 0); break;
	case TB_ACT_FIRST_DIV:
		i = tui_first_divergence(t);
		if (i < 0)
			tui_message(t, false, t->job ? "no cell has diverged yet" : "no cell diverged");
		else
			grid_select(g, i);
		break;
	case TB_ACT_NEXT_DIV:
	case TB_ACT_PREV_DIV:
		i = next_diverged(t, sel < 0 ? (a == TB_ACT_NEXT_DIV ? -1 : (long)t->sess.pairing->n_pairs) : sel,
				  a == TB_ACT_NEXT_DIV ? 1 : -1);
		if (i < 0)
			tui_message(t, false, "no diverged cell %s %s", a == TB_ACT_NEXT_DIV ? "after" : "before",
				    tui_cell_label(t, sel, name, sizeof name));
		else
			grid_select(g, i);
		break;
	case TB_ACT_METRIC:
		t->metric = (t->metric + 1) % (int)ui_n_metrics;
		tui_message(t, false, "metric: %s", ui_metrics[t->metric].name);
		break;
	case TB_ACT_FOLD:
		g->folded = !g->folded;
		grid_relayout(g);
		tui_message(t, false, "sub-taps %s", g->folded ? "folded" : "shown");
		break;
	case TB_ACT_OPEN:
		if (sel < 0)
			tui_message(t, false, "nothing dumped here");
		else if (!tui_cell_ready(t, (size_t)sel))
			tui_message(t, false, "%s is still being compared", tui_cell_label(t, sel, name, sizeof name));
		else
			tui_open_detail(t, sel);
		break;
	case TB_ACT_QUIT: return UI_QUIT;
	default: return 0;
	}
	return UI_HANDLED | UI_REDRAW;
}

static unsigned heatmap_click(tui *t, int y, int x)
{
	grid *g = &t->g;
	int vr = g->top + y - GRID_TOP, vc = g->left + (x - LABEL_W) / CELL_W;

	if (y < GRID_TOP || y >= GRID_TOP + grid_rows(t) || vr >= g->n_vrows)
		return 0;
	g->cur_r = vr;
	if (x >= LABEL_W && vc < g->n_vcols)
		g->cur_c = vc;
	return UI_HANDLED | UI_REDRAW;
}

const screen_ops heatmap_screen = {
	.name = "heatmap",
	.draw = heatmap_draw,
	.action = heatmap_action,
	.click = heatmap_click,
};
