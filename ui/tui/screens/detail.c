/*
 * The detail screen of one cell (Enter on the heatmap): both sides'
 * statistics, every metric of doc/report.md, the per-position strip with the
 * selected position's worst channels, per-head metrics for attention cells,
 * the worst elements, a log-scale |diff| histogram and the causes.  It is a
 * scrolling document; the numbers that need the tensors again come from
 * src/inspect.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare/inspect.h"
#include "diagnose/heads.h"
#include "diagnose/replay.h"
#include "run/report.h"
#include "tui/doc.h"
#include "tui/draw.h"
#include "tui/explain.h"
#include "compare/scale.h"
#include "tui/screens/screens.h"
#include "tui/theme.h"

#define HIST_BAR 30
#define MAX_HEADS_SHOWN 128
#define DETAIL_TOPK 10
#define DETAIL_CHANNELS 6
#define STRIP_X 8 /* the strip's first column, after its row labels */
#define ROUTED_ROWS 8 /* positions whose chosen experts the routing view lists */

/* What the screen shows of its cell (computed when it opens). */
typedef struct detail {
	long pair;               /* cell index */
	tb_cell cell;            /* the cell, to follow it into a reloaded result */
	int64_t pos;             /* selected position */
	int scroll;              /* first document line shown */
	int lines;               /* document length at the last draw */
	int strip_left;          /* first position shown in the strip */
	tb_elem worst[DETAIL_TOPK];
	size_t n_worst;
	tb_diff_hist hist;
	bool have_diff;
	tb_elem chan[DETAIL_CHANNELS]; /* worst channels of pos */
	size_t n_chan;
	int64_t chan_pos;        /* position chan belongs to, -1: none */
	int heads;               /* 0: unknown */
	int64_t head_dim;
	const char *heads_from;  /* "--heads", "inferred from attn.q/attn.k shapes" */
	tb_head_metrics *head;   /* heads entries, owned */
	tb_causes causes;        /* causes of this cell when it is not the first divergence, owned */
	tb_replay replay;        /* the cell's op replayed (R) */
	bool replayed;
	char note[sizeof ((tb_err *)0)->msg]; /* why the per-head view is absent */
	int strip_y, strip_x;    /* where the position strip was drawn, -1: not shown */
	const tb_routing_layer *routed; /* an MoE layer's routing, for its MLP's cells; NULL: none */
	int64_t routed_pos[ROUTED_ROWS]; /* positions whose sets differ (flips first), and what each side chose */
	int routed_ids[ROUTED_ROWS][2][TB_ROUTING_K_MAX];
	bool routed_flip[ROUTED_ROWS];
	int n_routed;
} detail;

/* The one detail screen's state. */
static detail d_state;

static const tb_cell_result *cur_cell(const view *v)
{
	return &view_result(v)->cells[d_state.pair];
}

/* Head count and dimension of an attention cell: the library's one
 * inference (diagnose/heads), as the diagnosis sees them. */
static void find_heads(view *v)
{
	detail *d = &d_state;
	tb_heads h;

	tb_heads_infer(view_result(v), d->pair, v->cfg->opts.heads, v->cfg->opts.kv_heads, &h);
	d->heads = h.n;
	d->head_dim = h.head_dim;
	d->heads_from = h.n ? h.source : NULL;
	snprintf(d->note, sizeof d->note, "%s", h.note);
}

static void load_channels(view *v)
{
	detail *d = &d_state;
	const tb_cell_result *c = cur_cell(v);
	tb_err err;

	d->n_chan = 0;
	d->chan_pos = -1;
	if (c->m.n_pos <= 0 || view_refuse_stale(v, c))
		return;
	if (tb_inspect_position(c, d->pos, DETAIL_CHANNELS, d->chan, &d->n_chan, &err) < 0) {
		view_message(v, true, "%s", err.msg);
		return;
	}
	d->chan_pos = d->pos;
}

/* An MoE layer's MLP cell: its layer's routing, and the experts each side
 * chose where they differ. */
static void load_routing(view *v, const tb_cell_result *c)
{
	detail *d = &d_state;
	tb_err err;

	if (tb_cell_parent(&c->cell) != TB_TAP_MLP && c->cell.id != TB_TAP_MLP)
		return;
	d->routed = tb_routing_layer_of(&v->run.routing, c->cell.layer);
	for (int pass = 0; d->routed && pass < 2; pass++) {
		const tb_routed_pos *list = pass ? d->routed->disagree : d->routed->flipped;
		size_t n = pass ? d->routed->n_disagree : d->routed->n_flipped;
		for (size_t i = 0; i < n && d->n_routed < ROUTED_ROWS; i++) {
			if (tb_routing_chosen(view_pairing(v), d->routed, list[i].pos, d->routed_ids[d->n_routed], &err) < 0) {
				view_message(v, true, "%s", err.msg);
				return;
			}
			d->routed_flip[d->n_routed] = !pass;
			d->routed_pos[d->n_routed++] = list[i].pos;
		}
	}
}

/* Compute what the detail of a cell shows (the numbers that need its
 * tensors again are skipped when the files changed since they were read). */
static void load(view *v, long pair)
{
	detail *d = &d_state;
	const tb_cell_result *c;
	tb_err err;

	free(d->head);
	tb_causes_done(&d->causes);
	memset(d, 0, sizeof *d);
	d->pair = pair;
	d->cell = view_pairing(v)->pairs[pair].cell;
	d->chan_pos = -1;
	d->strip_y = -1;
	c = cur_cell(v);
	d->pos = c->m.first_bad_position > 0 ? c->m.first_bad_position : 0;
	if (!c->ref || !c->cand || view_refuse_stale(v, c))
		return;
	load_routing(v, c);
	if (view_diag(v) && !v->run.partial && pair != view_first_divergence(v) && c->status == TB_ST_DIVERGED) {
		tb_diag_opts o = tb_run_diag_opts(v->cfg);
		if (tb_diagnose_cell(&v->run.sess, v->run.res, &o, &v->run.diag, pair, &d->causes, &err) < 0)
			view_message(v, true, "%s", err.msg);
	}
	if (tb_inspect_diff(c, DETAIL_TOPK, d->worst, &d->n_worst, &d->hist, &err) < 0)
		view_message(v, true, "%s", err.msg);
	else
		d->have_diff = true;
	load_channels(v);
	find_heads(v);
	if (d->heads > 0) {
		d->head = calloc((size_t)d->heads, sizeof *d->head);
		if (!d->head || tb_inspect_heads(c, d->heads, d->head_dim, d->head, &err) < 0) {
			snprintf(d->note, sizeof d->note, "%s", d->head ? err.msg : "out of memory");
			free(d->head);
			d->head = NULL;
			d->heads = 0;
		}
	}
}

static void detail_open(view *v, long pair)
{
	load(v, pair);
}

/* A reload replaced the result: show the same cell of the new one,
 * keeping the selected position and the scroll; close when it is gone. */
static ui_ret detail_follow(view *v)
{
	long pair = tb_pairing_find(view_pairing(v), &d_state.cell);
	int64_t pos = d_state.pos;
	int scroll = d_state.scroll, left = d_state.strip_left;
	char name[TB_CELL_NAME_MAX];
	const tb_cell_result *c;

	if (pair < 0 || !view_cell_ready(v, (size_t)pair)) {
		tb_cell_name(&d_state.cell, name, sizeof name);
		view_message(v, true, "%s is no longer dumped: detail closed", name);
		return ui_flags(UI_BACK);
	}
	load(v, pair);
	c = cur_cell(v);
	if (pos < c->m.n_pos) {
		d_state.pos = pos;
		d_state.strip_left = left;
		load_channels(v);
	}
	d_state.scroll = scroll;
	return ui_flags(0);
}

/* Both sides' statistics beside every metric, then the worst element. */
static void numbers_block(doc *dc, const tb_cell_result *c)
{
	static const char *const stat_names[] = {"mean", "std", "min", "max", "L2 norm"};
	const tb_metrics *m = &c->m;
	char left[8][96], right[8][64], a[32], b[32], idx[256];
	const double *sides[] = {m->mean, m->std, m->min, m->max, m->l2};
	const char *names[] = {"max_abs", "mean_abs", "rel_l2", "cosine", "norm_ratio", "allclose_frac"};
	double vals[] = {m->max_abs, m->mean_abs, m->rel_l2, m->cosine, m->norm_ratio, m->allclose_frac};
	bool wide = getmaxx(dc->w) >= 72;

	snprintf(left[0], sizeof left[0], "%-9s %12s %12s", "statistic", "ref", "cand");
	for (int r = 0; r < 5; r++) {
		ui_fmt_num(sides[r][0], a, sizeof a);
		ui_fmt_num(sides[r][1], b, sizeof b);
		snprintf(left[r + 1], sizeof left[r + 1], "%-9s %12s %12s", stat_names[r], a, b);
	}
	snprintf(left[6], sizeof left[6], "%-9s %12llu %12llu", "NaN", (unsigned long long)m->nan[0],
		 (unsigned long long)m->nan[1]);
	snprintf(left[7], sizeof left[7], "%-9s %12llu %12llu", "Inf", (unsigned long long)m->inf[0],
		 (unsigned long long)m->inf[1]);
	snprintf(right[0], sizeof right[0], "metrics");
	for (int r = 0; r < 6; r++) {
		if (r == 3 || r == 5)
			snprintf(a, sizeof a, "%.6f", vals[r]);
		else
			ui_fmt_num(vals[r], a, sizeof a);
		snprintf(right[r + 1], sizeof right[r + 1], "%-18s %s", names[r], a);
	}
	if (m->first_bad_position >= 0)
		snprintf(right[7], sizeof right[7], "%-18s %lld", "first_bad_position", (long long)m->first_bad_position);
	else
		snprintf(right[7], sizeof right[7], "%-18s none", "first_bad_position");
	for (int r = 0; r < 8 && wide; r++)
		doc_line(dc, r == 0 ? ui_attr(UI_TITLE) : 0, "%-36s| %s", left[r], right[r]);
	for (int r = 0; r < 16 && !wide; r++)
		doc_line(dc, r % 8 == 0 ? ui_attr(UI_TITLE) : 0, "%s", r < 8 ? left[r] : right[r - 8]);
	tb_index_format(m->worst_index, c->ndim, c->shape, idx, sizeof idx);
	ui_fmt_num(m->worst_ref, a, sizeof a);
	ui_fmt_num(m->worst_cand, b, sizeof b);
	if (m->estimated && !m->exact)
		doc_line(dc, ui_attr(UI_DIM), "estimated from a sketch: rel_l2 within [%.3g, %.3g]; the worst element, "
			 "max_abs and allclose need the values   (%llu elements)", m->rel_l2_lo, m->rel_l2_hi,
			 (unsigned long long)m->n);
	else if (isfinite(m->max_abs))
		doc_line(dc, 0, "worst element %s  ref %s  cand %s   (%llu elements)", idx, a, b,
			 (unsigned long long)m->n);
	else
		doc_line(dc, 0, "no element finite on both sides   (%llu elements)", (unsigned long long)m->n);
	if (c->logits) {
		const tb_logit_metrics *l = c->logits;
		doc_line(dc, 0, "logits: kl_mean %.4g  kl_last %.4g  kl_max %.4g  top1_agree %.4f  top5_overlap %.4f",
			 l->kl_mean, l->kl_last, l->kl_max, l->top1_agree, l->top5_overlap);
	}
}

/* Positions the strip shows at once: the window's width past the labels,
 * less the last column, which says whether more follow. */
static int strip_width(WINDOW *w)
{
	int width = getmaxx(w) - STRIP_X - 1;

	return width < 1 ? 1 : width;
}

/* One heat row of the strip: a glyph per position, colored on the scale,
 * with a '<' before and a '>' after it when positions lie beyond. */
static void strip_row(view *v, doc *dc, const char *label, const tb_scale *mt, const double *vals, int64_t n,
		      int width)
{
	int r = doc_row(dc);
	detail *d = &d_state;

	if (r < 0)
		return;
	ui_put(dc->w, r, 0, ui_attr(UI_LABEL), "%-8s", label);
	if (d->strip_left > 0)
		ui_put(dc->w, r, STRIP_X - 1, ui_attr(UI_MARK), "<");
	if (d->strip_left + width < n)
		ui_put(dc->w, r, STRIP_X + width, ui_attr(UI_MARK), ">");
	for (int k = 0; k < width && d->strip_left + k < n; k++) {
		int64_t p = d->strip_left + k;
		double bad = mt->badness(vals[p]);
		int st = tb_scale_band(mt, &v->tol, bad);
		attr_t a = ui_cell_attr(st, tb_scale_level(mt, bad));
		if (p == d->pos)
			a = ui_cursor(a);
		ui_put(dc->w, r, STRIP_X + k, a, "%c", tb_status_glyph(st));
	}
}

/* What the strip's glyphs mean, row by row: each on its own metric's marks
 * (a cosine near 1 is not a small rel_l2). */
static void strip_legend(view *v, doc *dc)
{
	const tb_scale *rl = &tb_scales[0], *cs = &tb_scales[1];

	doc_line(dc, ui_attr(UI_DIM), "glyphs  rel_l2 .<=%.0e ~ X>%.0e   cosine .>=%.6g ~ X<%.6g", rl->match_mark(&v->tol),
		 rl->diverge_mark(&v->tol), 1 - cs->match_mark(&v->tol), 1 - cs->diverge_mark(&v->tol));
}

static void positions_block(view *v, doc *dc, const tb_cell_result *c)
{
	detail *d = &d_state;
	const tb_metrics *m = &c->m;
	int width = strip_width(dc->w);
	char a[32], b[32], e[32], idx[256];
	int r;

	d->strip_y = -1;
	if (m->n_pos <= 0)
		return;
	/* The page follows the cursor, and shows a whole page at the end. */
	if (d->pos < d->strip_left)
		d->strip_left = (int)d->pos;
	if (d->pos >= d->strip_left + width)
		d->strip_left = (int)(d->pos - width + 1);
	if (d->strip_left > 0 && d->strip_left + width > m->n_pos)
		d->strip_left = m->n_pos > width ? (int)(m->n_pos - width) : 0;
	doc_line(dc, ui_attr(UI_TITLE), "per position  (shown %d-%lld of %lld; Left/Right, < > page, p go to, f first bad)",
		 d->strip_left, (long long)(d->strip_left + width < m->n_pos ? d->strip_left + width - 1 : m->n_pos - 1),
		 (long long)m->n_pos);
	r = dc->y - dc->scroll + 1;
	d->strip_y = r >= 1 && r < dc->h ? r : -1;
	d->strip_x = STRIP_X;
	strip_row(v, dc, "rel_l2", &tb_scales[0], m->pos_rel_l2, m->n_pos, width);
	strip_row(v, dc, "cosine", &tb_scales[1], m->pos_cos, m->n_pos, width);
	r = doc_row(dc);
	if (r >= 0) {
		ui_put(dc->w, r, 0, ui_attr(UI_DIM), "%-8s", "");
		if (m->first_bad_position >= d->strip_left && m->first_bad_position < d->strip_left + width)
			ui_put(dc->w, r, STRIP_X + (int)(m->first_bad_position - d->strip_left), ui_attr(UI_MARK), "^");
		if (d->pos != m->first_bad_position)
			ui_put(dc->w, r, STRIP_X + (int)(d->pos - d->strip_left), ui_attr(UI_CURSOR), "|");
	}
	strip_legend(v, dc);
	if (m->first_bad_position >= 0)
		doc_line(dc, ui_attr(UI_MARK), "^ first bad position %lld (rel_l2 > diverge %.0e)",
			 (long long)m->first_bad_position, v->tol.diverge);
	else
		doc_line(dc, ui_attr(UI_DIM), "no position has rel_l2 > diverge %.0e", v->tol.diverge);
	ui_fmt_num(m->pos_rel_l2[d->pos], a, sizeof a);
	snprintf(b, sizeof b, "%.6f", m->pos_cos[d->pos]);
	ui_fmt_num(m->pos_norm_ratio[d->pos], e, sizeof e);
	doc_line(dc, ui_attr(UI_STATUS), "pos %lld: rel_l2 %s  cosine %s  norm_ratio %s", (long long)d->pos, a, b, e);
	if (c->logits && d->pos < c->logits->n_pos) {
		const tb_logit_row *lr = &c->logits->rows[d->pos];
		doc_line(dc, ui_attr(UI_STATUS), "pos %lld: KL %.4g  top-1 ref %lld cand %lld (%s)  logprob %.4g / %.4g  top-5 common %d/5",
			 (long long)d->pos, lr->kl, (long long)lr->top1[0], (long long)lr->top1[1],
			 lr->top1[0] == lr->top1[1] ? "agree" : "differ", lr->top1_logprob[0], lr->top1_logprob[1],
			 lr->top5_common);
	}
	if (d->chan_pos != d->pos)
		return;
	doc_line(dc, ui_attr(UI_TITLE), "worst channels at pos %lld:  %-16s %11s %11s %11s", (long long)d->pos, "index",
		 "ref", "cand", "|diff|");
	for (size_t i = 0; i < d->n_chan; i++) {
		tb_index_format(d->chan[i].index, c->ndim, c->shape, idx, sizeof idx);
		ui_fmt_num(d->chan[i].ref, a, sizeof a);
		ui_fmt_num(d->chan[i].cand, b, sizeof b);
		ui_fmt_num(d->chan[i].diff, e, sizeof e);
		doc_line(dc, 0, "%27s %-16s %11s %11s %11s", "", idx, a, b, e);
	}
}

static void heads_block(view *v, doc *dc)
{
	detail *d = &d_state;
	char a[32], b[32];

	if (!d->heads_from && !d->note[0])
		return;
	if (!d->heads) {
		doc_line(dc, ui_attr(UI_TITLE), "per head");
		doc_line(dc, ui_attr(UI_DIM), "  %s", d->note);
		return;
	}
	doc_line(dc, ui_attr(UI_TITLE), "per head  (%d heads of %lld, %s)", d->heads, (long long)d->head_dim,
		 d->heads_from);
	doc_line(dc, ui_attr(UI_DIM), "  %-6s %12s %12s %12s", "head", "rel_l2", "cosine", "max_abs");
	for (int h = 0; h < d->heads && h < MAX_HEADS_SHOWN; h++) {
		int st = tb_scale_band(&tb_scales[0], &v->tol, d->head[h].rel_l2);
		ui_fmt_num(d->head[h].rel_l2, a, sizeof a);
		ui_fmt_num(d->head[h].max_abs, b, sizeof b);
		doc_line(dc, st == TB_ST_DIVERGED ? ui_attr(UI_BAD) : 0, "  %c %-4d %12s %12.6f %12s", tb_status_glyph(st),
			 h, a, d->head[h].cosine, b);
	}
}

/* The routing view: every MoE layer's agreement (this one marked), then
 * the positions of this layer whose experts differ, with what each side
 * chose. */
static void routing_block(view *v, doc *dc)
{
	const detail *d = &d_state;
	const tb_routing *rt = &v->run.routing;
	char line[TB_ROUTING_TEXT_MAX];

	if (!d->routed)
		return;
	doc_line(dc, ui_attr(UI_TITLE), "routing  (%s)", TB_ROUTING_ABOUT);
	for (size_t i = 0; i < rt->n; i++) {
		tb_routing_layer_text(&rt->v[i], line, sizeof line);
		doc_wrap(dc, &rt->v[i] == d->routed ? ui_attr(UI_HEADER) : 0, &rt->v[i] == d->routed ? "> " : "  ", 2,
			 line);
	}
	for (int r = 0; r < d->n_routed; r++) {
		char sides[2][8 * TB_ROUTING_K_MAX];
		for (int s = 0; s < 2; s++) {
			size_t n = 0;
			sides[s][0] = '\0';
			for (int64_t j = 0; j < d->routed->k && n < sizeof sides[s]; j++)
				n += (size_t)snprintf(sides[s] + n, sizeof sides[s] - n, "%s%d", j ? " " : "",
						      d->routed_ids[r][s][j]);
		}
		doc_line(dc, d->routed_flip[r] ? 0 : ui_attr(UI_BAD), "  pos %-6lld %-7s ref [%s]  cand [%s]",
			 (long long)d->routed_pos[r], d->routed_flip[r] ? "flipped" : "differs", sides[0], sides[1]);
	}
}

static void worst_block(doc *dc, const tb_cell_result *c)
{
	const detail *d = &d_state;
	char idx[256], a[32], b[32], e[32];

	doc_line(dc, ui_attr(UI_TITLE), "worst elements %12s %-16s %11s %11s %11s", "", "index", "ref", "cand", "|diff|");
	for (size_t i = 0; i < d->n_worst; i++) {
		tb_index_format(d->worst[i].index, c->ndim, c->shape, idx, sizeof idx);
		ui_fmt_num(d->worst[i].ref, a, sizeof a);
		ui_fmt_num(d->worst[i].cand, b, sizeof b);
		ui_fmt_num(d->worst[i].diff, e, sizeof e);
		doc_line(dc, 0, "%25zu. %-16s %11s %11s %11s", i + 1, idx, a, b, e);
	}
}

static void hist_row(doc *dc, const char *label, uint64_t n, uint64_t max)
{
	char bar[HIST_BAR + 1];
	int len = max ? (int)((double)n / (double)max * HIST_BAR + 0.999) : 0;

	memset(bar, '#', (size_t)len);
	bar[len] = '\0';
	doc_line(dc, 0, "  %-10s %10llu %s", label, (unsigned long long)n, bar);
}

static void hist_block(doc *dc)
{
	const tb_diff_hist *h = &d_state.hist;
	uint64_t max = h->zero > h->below ? h->zero : h->below;
	int lo = -1, hi = -1;
	char label[32];

	for (int i = 0; i < TB_HIST_BINS; i++) {
		if (h->bins[i] > max)
			max = h->bins[i];
		if (h->bins[i]) {
			lo = lo < 0 ? i : lo;
			hi = i;
		}
	}
	max = h->above > max ? h->above : max;
	max = h->nonfinite > max ? h->nonfinite : max;
	doc_line(dc, ui_attr(UI_TITLE), "|diff| histogram (log10 decades)");
	if (h->zero)
		hist_row(dc, "0", h->zero, max);
	if (h->below)
		hist_row(dc, "<1e-10", h->below, max);
	for (int i = lo; i >= 0 && i <= hi; i++) {
		snprintf(label, sizeof label, "1e%+03d", TB_HIST_LO + i);
		hist_row(dc, label, h->bins[i], max);
	}
	if (h->above)
		hist_row(dc, ">=1e+04", h->above, max);
	if (h->nonfinite)
		hist_row(dc, "NaN/Inf", h->nonfinite, max);
}

/* What R found: the variant that reproduces the candidate and its cause,
 * or why nothing was confirmed. */
static void replay_block(doc *dc, const detail *d)
{
	const tb_replay *rp = &d->replay;

	doc_line(dc, 0, "%s", "");
	doc_line(dc, ui_attr(UI_TITLE), "replay  (R)");
	if (rp->cause) {
		doc_line(dc, ui_attr(UI_GOOD), "  confirmed: %s", rp->cause);
		doc_wrap(dc, 0, "  ", 4, rp->note);
	} else {
		doc_wrap(dc, ui_attr(UI_DIM), "  ", 4, rp->note);
	}
}

static void detail_draw(view *v, WINDOW *w)
{
	const tb_cell_result *c = cur_cell(v);
	detail *d = &d_state;
	const tb_tap_info *ti = tb_tap_lookup(c->cell.tap);
	const tb_diagnosis *dg = view_diag(v);
	doc dc = {w, 0, d->scroll, getmaxy(w)};
	char name[TB_CELL_NAME_MAX], shape[128];

	view_cell_label(v, d->pair, name, sizeof name);
	ui_put(w, 0, 0, ui_attr(c->status == TB_ST_DIVERGED ? UI_BAD : UI_TITLE), "%s  %s: %s", name,
	       tb_status_name(c->status), c->reason);
	doc_line(&dc, ui_attr(UI_DIM), "%s   (Esc/q back, Up/Down scroll)", ti ? ti->label : c->cell.tap);
	for (int s = 0; s < 2; s++) {
		const tb_tensor *x = s ? c->cand : c->ref;
		if (!x) {
			doc_line(&dc, ui_attr(UI_MISSING), "%-5s (not in this tree)", s ? "cand" : "ref");
			continue;
		}
		tb_shape_format(x->ndim, x->shape, shape, sizeof shape);
		doc_line(&dc, 0, "%-5s %s  %s %s  %s", s ? "cand" : "ref", x->name, tb_dtype_name(x->dtype), shape, x->path);
	}
	if (tb_cell_partial(c)) {
		tb_partial_describe(tb_cell_partial(c), shape, sizeof shape);
		doc_line(&dc, ui_attr(UI_DIM), "partial: %s; the metrics are of those", shape);
	}
	if (tb_cell_note(c))
		doc_wrap(&dc, ui_attr(UI_DIM), "layout: ", 8, tb_cell_note(c));
	if (c->ref && c->cand && c->shape_mismatch) {
		/* nothing is read against its counterpart: no metric, no worst
		 * element (the status line gives both shapes) */
		doc_wrap(&dc, 0, "", 0,
			 "no difference measured: with shapes that differ no element is read against its counterpart");
	} else if (c->ref && c->cand) {
		double noise = tb_tolfile_noise(v->cfg->tolfile, &c->cell, c->ref->name, c->cand->name);
		if (noise >= 0)
			doc_line(&dc, ui_attr(UI_DIM), "noise: rel_l2 is %.3g times the reference's own (%.3e, calibrate)",
				 tb_noise_ratio(c->m.rel_l2, noise), noise);
		numbers_block(&dc, c);
		if (dg) {
			long p = d->pair;
			doc_line(&dc, p == dg->origin.origin ? ui_attr(UI_BAD) : 0,
				 "error from its inputs %.3g -> here %.3g: x%.3g added%s", dg->origin.input_rel_l2[p],
				 c->m.rel_l2, dg->origin.amplification[p],
				 p == dg->origin.origin ? "  (the error is born here)" : "");
		}
		doc_line(&dc, 0, "%s", "");
		positions_block(v, &dc, c);
		doc_line(&dc, 0, "%s", "");
		if (d->routed) {
			routing_block(v, &dc);
			doc_line(&dc, 0, "%s", "");
		}
		heads_block(v, &dc);
		if (d->have_diff) {
			doc_line(&dc, 0, "%s", "");
			worst_block(&dc, c);
			doc_line(&dc, 0, "%s", "");
			hist_block(&dc);
		}
	}
	doc_line(&dc, 0, "%s", "");
	explain_causes(v, &dc, d->pair, &d->causes);
	if (d->replayed)
		replay_block(&dc, d);
	d->lines = dc.y;
}

/* Replay the cell's op now (under a second at 2048 positions of 32
 * heads; attn.o through a fitted o_proj stops at about three seconds,
 * tbisect-rules(5)); the document ends with what it found. */
static void replay_cell(view *v)
{
	detail *d = &d_state;
	tb_diag_opts o = tb_run_diag_opts(v->cfg);
	tb_err err;

	if (view_refuse_stale(v, cur_cell(v)))
		return;
	if (tb_replay_cell(&v->run.sess, v->run.res, d->pair, o.heads, o.kv_heads, &d->replay, &err) < 0) {
		view_message(v, true, "%s", err.msg);
		return;
	}
	d->replayed = true;
	d->scroll = d->lines;
	view_message(v, false, "%s", d->replay.cause ? "replay: confirmed" : "replay: nothing confirmed");
}

static void set_pos(view *v, int64_t pos)
{
	const tb_cell_result *c = cur_cell(v);

	if (c->m.n_pos <= 0)
		return;
	d_state.pos = pos < 0 ? 0 : pos >= c->m.n_pos ? c->m.n_pos - 1 : pos;
	load_channels(v);
}

static int64_t next_bad_pos(const view *v, int dir)
{
	const tb_cell_result *c = cur_cell(v);

	for (int64_t p = d_state.pos + dir; p >= 0 && p < c->m.n_pos; p += dir)
		if (!isnan(c->m.pos_rel_l2[p]) && !(c->m.pos_rel_l2[p] <= c->tol.diverge))
			return p;
	return -1;
}

/* A page of the strip to the side: the cursor keeps its column, on the
 * first or last position at the ends. */
static void page_strip(view *v, WINDOW *w, int dir)
{
	detail *d = &d_state;
	int64_t n = cur_cell(v)->m.n_pos, width = strip_width(w), left = d->strip_left + dir * width;

	if (n <= 0)
		return;
	if (left > n - width)
		left = n - width;
	if (left < 0)
		left = 0;
	set_pos(v, left == d->strip_left ? (dir > 0 ? n - 1 : 0) : d->pos + (left - d->strip_left));
	d->strip_left = (int)left;
}

/* :pos N selects position N; the strip's page follows it. */
static ui_ret detail_command(view *v, WINDOW *w, tb_action a, const char *arg)
{
	int64_t n = cur_cell(v)->m.n_pos;
	char *end;
	long long p;

	(void)w;
	if (a != TB_ACT_GOTO_POS)
		return ui_flags(0);
	p = strtoll(arg, &end, 10);
	if (n <= 0) {
		view_message(v, true, "pos: this cell has no positions");
		return ui_flags(0);
	}
	if (end == arg || *end || p < 0 || p >= n) {
		view_message(v, true, "pos: '%s' is not a position (0 to %lld)", arg, (long long)n - 1);
		return ui_flags(0);
	}
	set_pos(v, p);
	return ui_flags(0);
}

static ui_ret detail_action(view *v, WINDOW *w, tb_action a)
{
	detail *d = &d_state;
	const tb_cell_result *c = cur_cell(v);
	int page = getmaxy(w) - 2, max = d->lines - page;
	int64_t p;

	switch (a) {
	case TB_ACT_UP: d->scroll--; break;
	case TB_ACT_DOWN: d->scroll++; break;
	case TB_ACT_PAGE_UP: d->scroll -= page; break;
	case TB_ACT_PAGE_DOWN: d->scroll += page; break;
	case TB_ACT_TOP: d->scroll = 0; break;
	case TB_ACT_BOTTOM: d->scroll = max; break;
	case TB_ACT_LEFT: set_pos(v, d->pos - 1); break;
	case TB_ACT_RIGHT: set_pos(v, d->pos + 1); break;
	case TB_ACT_PAGE_LEFT:
	case TB_ACT_PAGE_RIGHT:
		page_strip(v, w, a == TB_ACT_PAGE_RIGHT ? 1 : -1);
		break;
	case TB_ACT_FIRST_DIV:
		if (c->m.first_bad_position < 0)
			view_message(v, false, "no bad position in this cell");
		else
			set_pos(v, c->m.first_bad_position);
		break;
	case TB_ACT_NEXT_DIV:
	case TB_ACT_PREV_DIV:
		p = next_bad_pos(v, a == TB_ACT_NEXT_DIV ? 1 : -1);
		if (p < 0)
			view_message(v, false, "no bad position %s %lld", a == TB_ACT_NEXT_DIV ? "after" : "before",
				    (long long)d->pos);
		else
			set_pos(v, p);
		break;
	case TB_ACT_REPLAY:
		replay_cell(v);
		return ui_flags(0);
	case TB_ACT_BACK:
	case TB_ACT_QUIT: return ui_flags(UI_BACK);
	default: return ui_flags(0);
	}
	if (d->scroll > max)
		d->scroll = max;
	if (d->scroll < 0)
		d->scroll = 0;
	return ui_flags(0);
}

static ui_ret detail_click(view *v, WINDOW *w, int y, int x)
{
	detail *d = &d_state;

	if (d->strip_y < 0 || (y != d->strip_y && y != d->strip_y + 1) || x < d->strip_x)
		return ui_flags(0);
	if (x - d->strip_x >= strip_width(w))
		return ui_flags(0);
	set_pos(v, d->strip_left + (x - d->strip_x));
	return ui_flags(0);
}

static const screen_hint hints[] = {
	{.action = TB_ACT_RIGHT, .label = "position", .keys = "Left/Right"},
	{.action = TB_ACT_FIRST_DIV, .label = "first bad position"},
	{.action = TB_ACT_NEXT_DIV, .label = "next bad"},
	{.action = TB_ACT_DOWN, .label = "scroll", .keys = "Up/Down"},
	{.action = TB_ACT_BACK, .label = "back"},
	{.action = TB_ACT_REPLAY, .label = "replay"},
	{.action = TB_ACT_NONE},
};

const screen_ops detail_screen = {
	.name = "detail",
	.hints = hints,
	.open = detail_open,
	.draw = detail_draw,
	.action = detail_action,
	.click = detail_click,
	.command = detail_command,
	.follow = detail_follow,
};
