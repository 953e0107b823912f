#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "compare/inspect.h"
#include "compare/scale.h"
#include "diagnose/heads.h"
#include "run/html.h"

#define CELL_W 84   /* a heatmap cell: glyph and value */
#define CELL_H 18
#define LABEL_W 96  /* the row labels */
#define HEAD_H 22   /* the column labels */
#define STRIP_MAX 64 /* glyphs of a per-position strip; longer ones are bucketed */
#define PLOT_W 640
#define PLOT_H 120
#define PLOT_DOTS 32 /* plots of this many values or fewer mark each one */
#define KL_POINTS 256
#define DETAIL_TOPK 10
#define DETAIL_CHANNELS 8
#define MAX_HEADS_SHOWN 128

/* The TUI's 256-color heatmap gradient (ui/tui/theme.c), best to worst, in RGB. */
static const char *const gradient[] = {"#008700", "#00af00", "#5faf00", "#87d700", "#afd700",
				       "#d7d700", "#ffaf00", "#ff8700", "#ff5f00", "#ff0000"};
#define N_GRAD ((int)(sizeof gradient / sizeof gradient[0]))
#define MISSING_FILL "#5f87af"

/* Text from the dumps as character data (attr: inside a quoted attribute).
 * Bytes that are not UTF-8, and control characters XML cannot carry, are
 * written as '?'. */
static void esc(FILE *out, const char *s, bool attr)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		unsigned char c = *p;
		int n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
		bool ok = n > 0 && (n == 1 || c >= 0xc2);
		for (int k = 1; ok && k < n; k++)
			ok = (p[k] & 0xc0) == 0x80;
		if (!ok) {
			fputc('?', out);
			p++;
			continue;
		}
		if (n > 1) {
			fwrite(p, 1, (size_t)n, out);
			p += n;
			continue;
		}
		switch (c) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&#39;", out); break;
		case '\n': fputs(attr ? "&#10;" : "\n", out); break;
		case '\t': fputs(attr ? "&#9;" : "\t", out); break;
		default: fputc(c < 0x20 || c == 0x7f ? '?' : c, out); break;
		}
		p++;
	}
}

static void num(FILE *out, double v)
{
	if (isnan(v))
		fputs("nan", out);
	else if (isinf(v))
		fputs(v > 0 ? "inf" : "-inf", out);
	else
		fprintf(out, "%.4g", v);
}

/* a, sep, b: two numbers with their separator. */
static void num_pair(FILE *out, double a, const char *sep, double b)
{
	num(out, a);
	fputs(sep, out);
	num(out, b);
}

/* One right-aligned table cell per value. */
static void num_cells(FILE *out, const double *v, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		fputs("<td class=\"n\">", out);
		num(out, v[k]);
		fputs("</td>", out);
	}
}

static int grad_index(double level)
{
	int i = (int)(level * (N_GRAD - 1) + 0.5);

	return i < 0 ? 0 : i >= N_GRAD ? N_GRAD - 1 : i;
}

static double amplification(const tb_report *r, size_t i)
{
	return r->diag && r->diag->origin.amplification ? r->diag->origin.amplification[i] : NAN;
}

static bool compared(const tb_cell_result *c)
{
	return c->ref && c->cand;
}

static const char css[] =
	"body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#111;background:#fff}"
	"h1{font-size:1.5em;margin:.2em 0}h1 .v-diverged{color:#c00}h1 .v-close{color:#a60}h1 .v-match{color:#070}"
	"dl.facts{display:grid;grid-template-columns:max-content auto;gap:.1em 1em}dl.facts dt{font-weight:bold}"
	"dl.facts dd{margin:0}code{font-family:ui-monospace,monospace;word-break:break-all}"
	".warn{border-left:4px solid #c00;padding:.2em .8em;background:#fff4f4}"
	".hm{overflow:auto;max-height:80vh;max-width:100%;display:grid;grid-template-columns:max-content max-content;"
	"border:1px solid #ccc}"
	".hm-corner{position:sticky;top:0;left:0;z-index:3;background:#fff}"
	".hm-cols{position:sticky;top:0;z-index:2;background:#fff}.hm-rows{position:sticky;left:0;z-index:2;background:#fff}"
	"svg text{font:12px ui-monospace,monospace}svg .lbl{fill:#036}svg .glyph{fill:#000}"
	"svg a:hover rect,svg a:focus rect{stroke:#000;stroke-width:2}"
	"table{border-collapse:collapse}td,th{padding:.1em .5em;border-bottom:1px solid #ddd;text-align:left}"
	"td.n{text-align:right;font-variant-numeric:tabular-nums}.strip{font-family:ui-monospace,monospace;letter-spacing:1px}"
	/* A strip of 256 glyphs, and the every-cell table, are wider than a
	 * page: they scroll in their own box, the page keeps its width, and
	 * the table's rows stay one line a tensor instead of wrapping names. */
	"pre.strip{overflow-x:auto;max-width:100%}.wide{overflow-x:auto;max-width:100%}"
	".wide td{white-space:nowrap;padding:0 .5em}.wide code{word-break:normal}"
	"tr:target{background:#ffe;outline:2px solid #a80}tr.s-diverged td.st{color:#c00;font-weight:bold}"
	"tr.s-close td.st{color:#a60}.js-only{display:none}.js .js-only{display:block}"
	"@media print{.hm{max-height:none;overflow:visible}.js-only,.js .js-only{display:none}}";

/* The metric switch and sub-tap folding; the page reads whole without it.
 * Each heatmap cell carries, per metric, its color index and value text. */
static const char script[] =
	"(function(){document.documentElement.className='js';"
	"var pal=JSON.parse(document.getElementById('palette').textContent);"
	"var cells=document.querySelectorAll('g.cell');"
	"function metric(k){for(var i=0;i<cells.length;i++){var g=cells[i],m=g.getAttribute('data-m');"
	"if(!m)continue;var parts=m.split(';')[k].split(':');"
	"g.querySelector('rect').setAttribute('fill',pal[+parts[1]]);"
	"g.querySelector('text.val').textContent=parts[2];}"
	"document.getElementById('scale-name').textContent=document.getElementById('metric').selectedOptions[0].text;}"
	"document.getElementById('metric').addEventListener('change',function(e){metric(e.target.selectedIndex);});"
	"var fold=document.getElementById('fold');"
	"function layout(){var sub=fold.checked,x=0,cols=document.querySelectorAll('[data-col]');"
	"var xs={},n=+document.getElementById('heatmap').getAttribute('data-cols');"
	"var w=+document.getElementById('heatmap').getAttribute('data-cell-w');"
	"for(var c=0;c<n;c++){var h=document.querySelector('.hm-cols [data-col=\"'+c+'\"]');"
	"var hide=sub&&h&&h.getAttribute('data-sub')==='1';xs[c]=hide?-1:x;if(!hide)x+=w;}"
	"for(var i=0;i<cols.length;i++){var e=cols[i],cx=xs[+e.getAttribute('data-col')];"
	"e.style.display=cx<0?'none':'';if(cx>=0)e.setAttribute('transform','translate('+cx+',0)');}"
	"var svgs=document.querySelectorAll('.hm-cols,.hm-grid');"
	"for(var s=0;s<svgs.length;s++)svgs[s].setAttribute('width',Math.max(x,w));}"
	"fold.addEventListener('change',layout);})();";

static void header(FILE *out, const tb_report *r, const tb_html_opts *o)
{
	const tb_result *res = r->result;
	char name[TB_CELL_NAME_MAX];

	fprintf(out, "<header>\n<h1 id=\"verdict\" data-verdict=\"%s\">tbisect: <span class=\"v-%s\">%s</span></h1>\n",
		tb_status_name(res->verdict), tb_status_name(res->verdict), tb_verdict_word(res->verdict));
	fputs("<dl class=\"facts\">\n<dt>First divergence</dt>", out);
	if (res->first_div >= 0) {
		const tb_cell_result *c = &res->cells[res->first_div];
		tb_cell_name(&c->cell, name, sizeof name);
		fputs("<dd id=\"first-divergence\" data-cell=\"", out);
		esc(out, name, true);
		fputs("\"><a href=\"#cell-", out);
		esc(out, name, true);
		fputs("\">", out);
		esc(out, name, false);
		fputs("</a>", out);
		if (c->m.first_bad_position >= 0)
			fprintf(out, " at position %lld", (long long)c->m.first_bad_position);
		fputs(": ", out);
		esc(out, c->reason, false);
		fputs("</dd>\n", out);
	} else {
		fputs("<dd id=\"first-divergence\" data-cell=\"\">none: no cell diverged</dd>\n", out);
	}
	if (r->coverage) {
		char cov[TB_COVERAGE_TEXT_MAX];
		tb_coverage_text(r->coverage, cov, sizeof cov);
		fprintf(out, "<dt>Coverage</dt><dd id=\"coverage\" data-paired=\"%zu\" data-ref=\"%zu\" data-cand=\"%zu\">",
			r->coverage->paired, r->coverage->tensors[0], r->coverage->tensors[1]);
		esc(out, cov, false);
		fputs("</dd>\n", out);
	}
	fprintf(out, "<dt>Cells</dt><dd>%zu: %zu match, %zu close, %zu diverged, %zu missing</dd>\n", res->n_cells,
		res->count[TB_ST_MATCH], res->count[TB_ST_CLOSE], res->count[TB_ST_DIVERGED], res->count[TB_ST_MISSING]);
	fprintf(out, "<dt>Tolerance</dt><dd>atol %g, rtol %g, diverge %g, max-kl %g</dd>\n", res->tol.atol,
		res->tol.rtol, res->tol.diverge, res->tol.max_kl);
	for (int side = 0; side < 2; side++) {
		char lay[160];
		fputs(side ? "<dt>Candidate</dt><dd><code>" : "<dt>Reference</dt><dd><code>", out);
		esc(out, side ? r->cand_path : r->ref_path, false);
		fputs("</code>", out);
		tb_layout_text(r->layout[side], lay, sizeof lay);
		if (lay[0]) {
			fputs(" (", out);
			esc(out, lay, false);
			fputs(")", out);
		}
		fputs("</dd>\n", out);
	}
	if (r->diag && r->diag->origin.text[0]) {
		fputs("<dt>Origin</dt><dd id=\"origin\">", out);
		esc(out, r->diag->origin.text, false);
		fputs("</dd>\n", out);
	}
	if (o->command) {
		fputs("<dt>Command</dt><dd><code id=\"command\">", out);
		esc(out, o->command, false);
		fputs("</code></dd>\n", out);
	}
	fprintf(out, "<dt>tbisect</dt><dd id=\"version\">%s</dd>\n", PACKAGE_VERSION);
	if (o->timestamp) {
		fputs("<dt>Written</dt><dd>", out);
		esc(out, o->timestamp, false);
		fputs("</dd>\n", out);
	}
	fputs("</dl>\n", out);
}

static void warning(void *ctx, const char *what, const char *text)
{
	FILE *out = ctx;

	fprintf(out, "<p class=\"warn\"><strong>Warning (%s):</strong> ", what);
	esc(out, text, false);
	fputs("</p>\n", out);
}

static void warnings(FILE *out, const tb_report *r)
{
	tb_report_each_warning(r, warning, out);
	fputs("</header>\n", out);
}

/* Per metric "name:color:value" of cell i, ';'-separated, for the switch. */
static void metric_data(FILE *out, const tb_report *r, size_t i)
{
	const tb_cell_result *c = &r->result->cells[i];

	for (size_t k = 0; k < tb_n_scales; k++) {
		const tb_scale *s = &tb_scales[k];
		double v = s->value(&c->m, amplification(r, i));
		char text[32];
		tb_scale_format(s, v, text, sizeof text);
		fprintf(out, "%s%s:%d:%s", k ? ";" : "", s->name, grad_index(tb_scale_level(s, s->badness(v))), text);
	}
}

/* One heatmap cell at (x, y) of the grid SVG, column col. */
static void hm_cell(FILE *out, const tb_report *r, size_t i, int col, int y)
{
	const tb_cell_result *c = &r->result->cells[i];
	const tb_scale *s = &tb_scales[0];
	char name[TB_CELL_NAME_MAX], text[32] = "";
	const char *fill = MISSING_FILL;

	tb_cell_name(&c->cell, name, sizeof name);
	if (compared(c)) {
		double v = s->value(&c->m, amplification(r, i));
		tb_scale_format(s, v, text, sizeof text);
		fill = gradient[grad_index(tb_scale_level(s, s->badness(v)))];
	} else {
		snprintf(text, sizeof text, "%s", c->ref ? "no cand" : "no ref");
	}
	fputs("<a href=\"#cell-", out);
	esc(out, name, true);
	fprintf(out, "\"><g class=\"cell\" data-col=\"%d\" transform=\"translate(%d,0)\" data-cell=\"", col, col * CELL_W);
	esc(out, name, true);
	fprintf(out, "\" data-status=\"%s\"", tb_status_name(c->status));
	if (compared(c)) {
		fputs(" data-m=\"", out);
		metric_data(out, r, i);
		fputc('"', out);
	}
	fprintf(out, "><rect x=\"1\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>", y + 1, CELL_W - 2, CELL_H - 2,
		fill);
	fprintf(out, "<text class=\"glyph\" x=\"6\" y=\"%d\">%c</text><text class=\"val\" x=\"20\" y=\"%d\">%s</text>",
		y + 13, tb_status_glyph(c->status), y + 13, text);
	fputs("<title>", out);
	esc(out, name, false);
	fprintf(out, " %s: ", tb_status_name(c->status));
	esc(out, c->reason, false);
	fputs("</title></g></a>\n", out);
}

static void heatmap(FILE *out, const tb_report *r)
{
	static const tb_tap_id model_taps[] = {TB_TAP_EMBED, TB_TAP_FINAL_NORM, TB_TAP_LOGITS};
	const tb_result *res = r->result;
	tb_cell cols[64];
	size_t nc = tb_result_layer_taps(res, cols, 64);
	int rows = res->n_layers + 3, w = (int)(nc ? nc : 1) * CELL_W, h = rows * CELL_H;

	fprintf(out, "<section id=\"heatmap\" data-cols=\"%zu\" data-cell-w=\"%d\" data-cells=\"%zu\">\n<h2>Cells</h2>\n",
		nc, CELL_W, res->n_cells);
	fputs("<form class=\"js-only\" id=\"controls\"><label>Color by <select id=\"metric\">", out);
	for (size_t k = 0; k < tb_n_scales; k++)
		fprintf(out, "<option value=\"%s\">%s</option>", tb_scales[k].name, tb_scales[k].name);
	fputs("</select></label> <label><input type=\"checkbox\" id=\"fold\"/> fold sub-taps</label></form>\n", out);
	fputs("<p>Each cell shows its status glyph (. match, ~ close, X diverged, - missing) and the metric; the color "
	      "is the metric on a log scale from best (green) to worst (red), as in the terminal view "
	      "(<span id=\"scale-name\">rel_l2</span>). Select a cell for its numbers.</p>\n",
	      out);
	fputs("<div class=\"hm\">\n<div class=\"hm-corner\"></div>\n", out);
	fprintf(out, "<svg class=\"hm-cols\" width=\"%d\" height=\"%d\" role=\"presentation\">\n", w, HEAD_H);
	for (size_t k = 0; k < nc; k++) {
		fprintf(out, "<text class=\"lbl\" data-col=\"%zu\" data-sub=\"%d\" transform=\"translate(%d,0)\" x=\"4\" y=\"15\">",
			k, tb_cell_parent(&cols[k]) != TB_TAP_NONE, (int)k * CELL_W);
		esc(out, cols[k].tap, false);
		fputs("</text>\n", out);
	}
	fprintf(out, "</svg>\n<svg class=\"hm-rows\" width=\"%d\" height=\"%d\" role=\"presentation\">\n", LABEL_W, h);
	for (int row = 0; row < rows; row++) {
		char label[32];
		int layer = row - 1;
		if (row == 0)
			snprintf(label, sizeof label, "embed");
		else if (row == rows - 2)
			snprintf(label, sizeof label, "final_norm");
		else if (row == rows - 1)
			snprintf(label, sizeof label, "logits");
		else
			snprintf(label, sizeof label, "L%d", layer);
		fprintf(out, "<text class=\"lbl\" x=\"4\" y=\"%d\">%s</text>\n", row * CELL_H + 13, label);
	}
	fprintf(out, "</svg>\n<svg class=\"hm-grid\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"layer by tap heatmap\">\n",
		w, h);
	for (size_t i = 0; i < res->n_cells; i++) {
		const tb_cell *cell = &res->cells[i].cell;
		int row = cell->layer >= 0 ? cell->layer + 1 : -1, col = 0;
		if (cell->layer < 0)
			for (int m = 0; m < 3; m++)
				if (cell->id == model_taps[m])
					row = m == 0 ? 0 : rows - 3 + m;
		if (row < 0)
			continue;
		for (size_t k = 0; k < nc && cell->layer >= 0; k++) {
			tb_cell probe = *cell;
			probe.layer = 0;
			if (tb_cell_eq(&cols[k], &probe))
				col = (int)k;
		}
		hm_cell(out, r, i, col, row * CELL_H);
	}
	fputs("</svg>\n</div>\n", out);
	/* The legend: the gradient from best to worst, with the glyphs. */
	fprintf(out, "<svg class=\"legend\" width=\"%d\" height=\"22\" role=\"img\" aria-label=\"color scale\">", N_GRAD * 24 + 480);
	for (int g = 0; g < N_GRAD; g++)
		fprintf(out, "<rect x=\"%d\" y=\"2\" width=\"24\" height=\"16\" fill=\"%s\"/>", g * 24, gradient[g]);
	fprintf(out, "<text x=\"%d\" y=\"15\">best to worst   . match  ~ close  X diverged  - missing</text></svg>\n",
		N_GRAD * 24 + 8);
	fputs("<script type=\"application/json\" id=\"palette\">[", out);
	for (int g = 0; g < N_GRAD; g++)
		fprintf(out, "%s\"%s\"", g ? "," : "", gradient[g]);
	fputs("]</script>\n</section>\n", out);
}

static void causes(FILE *out, const tb_report *r)
{
	const tb_diagnosis *d = r->diag;
	const tb_result *res = r->result;
	char name[TB_CELL_NAME_MAX];

	fputs("<section id=\"causes\">\n", out);
	if (!d || (res->first_div < 0 && (!d->causes.n || r->partial))) {
		fputs("<h2>Likely causes</h2>\n<p>None: no cell diverged.</p>\n</section>\n", out);
		return;
	}
	if (res->first_div < 0) {
		/* a close pair's causes (precision drift) are still named */
		fputs("<h2>Likely causes (no cell diverged)</h2>\n", out);
	} else {
		tb_cell_name(&res->cells[res->first_div].cell, name, sizeof name);
		fputs("<h2>Likely causes of ", out);
		esc(out, name, false);
		fputs("</h2>\n", out);
	}
	if (r->partial) {
		fputs("<p>None named on a partial pairing: pair the rest with a --map (tbisect suggest-map writes one).</p>\n</section>\n",
		      out);
		return;
	}
	if (!d->causes.n) {
		fputs("<p>No diagnosis rule matches this pattern.</p>\n</section>\n", out);
		return;
	}
	fputs("<ol>\n", out);
	for (size_t i = 0; i < d->causes.n; i++) {
		const tb_cause *c = &d->causes.v[i];
		fputs("<li class=\"cause\" data-cause=\"", out);
		esc(out, c->id, true);
		fprintf(out, "\" data-score=\"%.2f\"><strong>", c->score);
		esc(out, c->id, false);
		fprintf(out, "</strong> (score %.2f)", c->score);
		char cf[160];
		if (tb_cause_confirmation(c, cf, sizeof cf)) {
			fputs("<p class=\"confirmed\">", out);
			esc(out, cf, false);
			fputs("</p>", out);
		}
		fputs("<p>Why: ", out);
		esc(out, c->why, false);
		fputs("</p><p>Look at: ", out);
		esc(out, c->look_at, false);
		fputs("</p></li>\n", out);
	}
	fputs("</ol>\n</section>\n", out);
}

static double plot_x(size_t i, size_t n)
{
	return n > 1 ? (double)i * (PLOT_W - 8) / (double)(n - 1) + 4 : PLOT_W / 2.0;
}

static double plot_y(double v, double hi)
{
	return hi > 0 ? PLOT_H - 4 - v / hi * (PLOT_H - 8) : PLOT_H - 4;
}

/* A polyline of n values (NaN skipped) scaled into a PLOT_W x PLOT_H box.
 * A line needs two points, so a lone value (one pass of a pair) would
 * draw nothing: short series mark each value with a dot as well. */
static void plot(FILE *out, const double *v, size_t n, const char *label)
{
	double hi = 0;

	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i]) && v[i] > hi)
			hi = v[i];
	fprintf(out, "<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"%s\"><rect width=\"%d\" height=\"%d\" fill=\"#f8f8f8\"/>",
		PLOT_W, PLOT_H + 20, label, PLOT_W, PLOT_H);
	fputs("<polyline fill=\"none\" stroke=\"#c00\" stroke-width=\"2\" points=\"", out);
	for (size_t i = 0; i < n; i++)
		if (isfinite(v[i]))
			fprintf(out, "%.1f,%.1f ", plot_x(i, n), plot_y(v[i], hi));
	fputs("\"/>", out);
	for (size_t i = 0; i < n && n <= PLOT_DOTS; i++)
		if (isfinite(v[i]))
			fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#c00\"/>", plot_x(i, n), plot_y(v[i], hi));
	fprintf(out, "<text x=\"4\" y=\"%d\">%s: 0 to ", PLOT_H + 15, label);
	num(out, hi);
	fputs(n == 1 ? ", a single value</text></svg>\n" : ", left to right</text></svg>\n", out);
}

static void logits(FILE *out, const tb_result *res)
{
	const tb_cell_result *lc = NULL;
	double v[KL_POINTS];
	size_t n;

	for (size_t i = 0; i < res->n_cells && !lc; i++)
		if (res->cells[i].logits)
			lc = &res->cells[i];
	if (!lc)
		return;
	const tb_logit_metrics *lm = lc->logits;
	fputs("<section id=\"logits\">\n<h2>Logits</h2>\n<table><tr>", out);
	fputs("<th>KL mean</th><th>KL last</th><th>KL max</th><th>top-1 agreement</th><th>top-5 overlap</th></tr><tr>", out);
	const double cols[] = {lm->kl_mean, lm->kl_last, lm->kl_max, lm->top1_agree, lm->top5_overlap};
	num_cells(out, cols, sizeof cols / sizeof *cols);
	fputs("</tr></table>\n", out);
	/* Per position, bucketed to at most KL_POINTS by the worst in each. */
	n = lm->n_pos < KL_POINTS ? (size_t)lm->n_pos : KL_POINTS;
	for (size_t b = 0; b < n; b++) {
		int64_t from = (int64_t)b * lm->n_pos / (int64_t)n, to = (int64_t)(b + 1) * lm->n_pos / (int64_t)n;
		v[b] = NAN;
		for (int64_t p = from; p < to; p++)
			if (isfinite(lm->rows[p].kl) && !(lm->rows[p].kl <= v[b]))
				v[b] = lm->rows[p].kl;
	}
	if (n)
		plot(out, v, n, "KL per position");
	fputs("</section>\n", out);
}

static void history(FILE *out, const tb_report *r)
{
	const tb_history *h = r->history;
	double v[TB_HISTORY_MAX];

	if (!h || !h->n)
		return;
	fprintf(out, "<section id=\"history\">\n<h2>Passes of this pair (%zu)</h2>\n", h->n);
	for (size_t i = 0; i < h->n && i < TB_HISTORY_MAX; i++)
		v[i] = h->passes[i].first_div_index >= 0 ? (double)h->passes[i].first_div_index : NAN;
	plot(out, v, h->n < TB_HISTORY_MAX ? h->n : TB_HISTORY_MAX, "first divergence (cell index) per pass");
	if (h->n == 1)
		fputs("<p>One pass recorded: each later check of this pair adds a point.</p>\n", out);
	fputs("<ol>\n", out);
	for (size_t i = 0; i < h->n; i++) {
		fputs("<li>", out);
		esc(out, h->passes[i].note, false);
		fputs("</li>\n", out);
	}
	fputs("</ol>\n</section>\n", out);
}

/* The per-position strip of a cell on scale k (rel_l2 or cosine) as
 * status glyphs, bucketed to at most max glyphs by the worst position of
 * each bucket. */
static void strip(FILE *out, const tb_cell_result *c, size_t k, int64_t max)
{
	const tb_metrics *m = &c->m;
	const tb_scale *s = &tb_scales[k];
	const double *v = k == 0 ? m->pos_rel_l2 : m->pos_cos;
	int64_t n = m->n_pos < max ? m->n_pos : max;

	for (int64_t b = 0; b < n; b++) {
		int64_t from = b * m->n_pos / n, to = (b + 1) * m->n_pos / n;
		double worst = 0;
		for (int64_t p = from; p < to; p++) {
			double bad = s->badness(v[p]);
			if (!(bad <= worst))
				worst = bad;
		}
		fputc(tb_status_glyph(tb_scale_band(s, &c->tol, worst)), out);
	}
}

/* Rows of compared elements: index, ref, cand, |diff|. */
static void elem_rows(FILE *out, const tb_cell_result *c, const tb_elem *e, size_t n)
{
	char idx[160];

	fputs("<table class=\"elems\"><tr><th>index</th><th>ref</th><th>cand</th><th>|diff|</th></tr>\n", out);
	for (size_t i = 0; i < n; i++) {
		const double v[] = {e[i].ref, e[i].cand, e[i].diff};
		tb_index_format(e[i].index, c->ndim, c->shape, idx, sizeof idx);
		fputs("<tr><td>", out);
		esc(out, idx, false);
		fputs("</td>", out);
		num_cells(out, v, sizeof v / sizeof *v);
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
}

static void heads_table(FILE *out, const tb_report *r, const tb_cell_result *c, const tb_html_opts *o)
{
	tb_head_metrics hm[MAX_HEADS_SHOWN];
	tb_heads h;
	tb_err err;

	tb_heads_infer(r->result, r->result->first_div, o->heads, o->kv_heads, &h);
	if (!h.n && !h.note[0])
		return;
	fputs("<h3>Per head</h3>\n", out);
	if (!h.n || h.n > MAX_HEADS_SHOWN || tb_inspect_heads(c, h.n, h.head_dim, hm, &err) < 0) {
		fputs("<p class=\"note\">", out);
		esc(out, !h.n ? h.note : h.n > MAX_HEADS_SHOWN ? "too many heads to show" : err.msg, false);
		fputs("</p>\n", out);
		return;
	}
	fprintf(out, "<p>%d heads of %lld (%s)</p>\n<table class=\"heads\"><tr><th>head</th><th>rel_l2</th>"
		     "<th>cosine</th><th>norm_ratio</th><th>max |diff|</th></tr>\n",
		h.n, (long long)h.head_dim, h.source ? h.source : "");
	for (int i = 0; i < h.n; i++) {
		const double v[] = {hm[i].rel_l2, hm[i].cosine, hm[i].norm_ratio, hm[i].max_abs};
		fprintf(out, "<tr><td>%c %d</td>", !(hm[i].rel_l2 <= c->tol.diverge) ? 'X' : '.', i);
		num_cells(out, v, sizeof v / sizeof *v);
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
}

/* The first divergence in detail: what the table row cannot hold, read
 * again from the dumps (a note stands for what could not be read). */
static void first_detail(FILE *out, const tb_report *r, const tb_html_opts *o)
{
	const tb_result *res = r->result;
	const tb_cell_result *c;
	tb_elem worst[DETAIL_TOPK], chan[DETAIL_CHANNELS];
	tb_diff_hist hist;
	size_t nw = 0, nc = 0;
	char name[TB_CELL_NAME_MAX];
	tb_err err;

	if (res->first_div < 0 || !compared(&res->cells[res->first_div]))
		return;
	c = &res->cells[res->first_div];
	tb_cell_name(&c->cell, name, sizeof name);
	fputs("<section id=\"detail\">\n<h2>The first divergence, ", out);
	esc(out, name, false);
	fputs("</h2>\n", out);
	if (c->m.n_pos > 0) {
		fprintf(out, "<p>Per position (%lld positions", (long long)c->m.n_pos);
		if (c->m.n_pos > STRIP_MAX * 4)
			fprintf(out, ", %d glyphs of the worst in each run", STRIP_MAX * 4);
		fputs("):</p>\n<pre class=\"strip\">rel_l2  ", out);
		strip(out, c, 0, STRIP_MAX * 4);
		fputs("\ncosine  ", out);
		strip(out, c, 1, STRIP_MAX * 4);
		if (c->m.first_bad_position >= 0)
			fprintf(out, "\nfirst bad position %lld", (long long)c->m.first_bad_position);
		fputs("</pre>\n", out);
	}
	if (tb_inspect_diff(c, DETAIL_TOPK, worst, &nw, &hist, &err) < 0) {
		fputs("<p class=\"note\">", out);
		esc(out, err.msg, false);
		fputs("</p>\n</section>\n", out);
		return;
	}
	fputs("<h3>Worst elements</h3>\n", out);
	elem_rows(out, c, worst, nw);
	fputs("<h3>|diff| by decade</h3>\n<table class=\"hist\"><tr><th>|diff|</th><th>elements</th></tr>\n", out);
	fprintf(out, "<tr><td>0</td><td class=\"n\">%llu</td></tr>\n", (unsigned long long)hist.zero);
	for (int b = 0; b < TB_HIST_BINS; b++)
		if (hist.bins[b])
			fprintf(out, "<tr><td>1e%+d to 1e%+d</td><td class=\"n\">%llu</td></tr>\n", TB_HIST_LO + b,
				TB_HIST_LO + b + 1, (unsigned long long)hist.bins[b]);
	if (hist.nonfinite)
		fprintf(out, "<tr><td>NaN or Inf</td><td class=\"n\">%llu</td></tr>\n", (unsigned long long)hist.nonfinite);
	fputs("</table>\n", out);
	if (c->m.first_bad_position >= 0 &&
	    tb_inspect_position(c, c->m.first_bad_position, DETAIL_CHANNELS, chan, &nc, &err) == 0) {
		fprintf(out, "<h3>Worst channels at position %lld</h3>\n", (long long)c->m.first_bad_position);
		elem_rows(out, c, chan, nc);
	}
	heads_table(out, r, c, o);
	fputs("</section>\n", out);
}

static void cell_rows(FILE *out, const tb_report *r)
{
	const tb_result *res = r->result;

	fputs("<section id=\"cells\">\n<h2>Every cell</h2>\n<div class=\"wide\"><table>\n<thead><tr><th>cell</th><th>status</th><th>rel_l2</th>"
	      "<th>cosine</th><th>max_abs</th><th>norm_ratio</th><th>allclose</th><th>first bad pos</th>"
	      "<th>ref mean / std</th><th>cand mean / std</th><th>worst element (ref, cand)</th>"
	      "<th>per position</th><th>tensors</th></tr></thead>\n<tbody>\n",
	      out);
	for (size_t i = 0; i < res->n_cells; i++) {
		const tb_cell_result *c = &res->cells[i];
		const tb_metrics *m = &c->m;
		char name[TB_CELL_NAME_MAX], idx[160];
		tb_cell_name(&c->cell, name, sizeof name);
		fputs("<tr id=\"cell-", out);
		esc(out, name, true);
		fprintf(out, "\" class=\"s-%s\" data-cell=\"", tb_status_name(c->status));
		esc(out, name, true);
		fprintf(out, "\" data-status=\"%s\"%s", tb_status_name(c->status),
			tb_cell_partial(c) ? " data-partial=\"true\"" : "");
		if (compared(c)) {
			fputs(" data-rel_l2=\"", out);
			num_pair(out, m->rel_l2, "\" data-cosine=\"", m->cosine);
			fputc('"', out);
		}
		fputs("><td>", out);
		esc(out, name, false);
		fprintf(out, "</td><td class=\"st\">%c %s%s</td>", tb_status_glyph(c->status), tb_status_name(c->status),
			tb_cell_partial(c) ? " (partial)" : "");
		if (!compared(c)) {
			fputs("<td colspan=\"10\">", out);
			esc(out, c->reason, false);
			fputs("</td>", out);
		} else {
			const double vals[] = {m->rel_l2, m->cosine, m->max_abs, m->norm_ratio, m->allclose_frac};
			num_cells(out, vals, sizeof vals / sizeof *vals);
			fputs("<td class=\"n\">", out);
			if (m->first_bad_position >= 0)
				fprintf(out, "%lld", (long long)m->first_bad_position);
			fputs("</td>", out);
			for (int side = 0; side < 2; side++) {
				fputs("<td class=\"n\">", out);
				num_pair(out, m->mean[side], " / ", m->std[side]);
				fputs("</td>", out);
			}
			tb_index_format(m->worst_index, c->ndim, c->shape, idx, sizeof idx);
			fputs("<td>", out);
			if (isfinite(m->max_abs)) {
				esc(out, idx, false);
				fputs(" (", out);
				num_pair(out, m->worst_ref, ", ", m->worst_cand);
				fputc(')', out);
			}
			fputs("</td><td class=\"strip\">", out);
			strip(out, c, 0, STRIP_MAX);
			fputs("</td>", out);
		}
		fputs("<td>", out);
		for (int side = 0; side < 2; side++) {
			const tb_tensor *t = side ? c->cand : c->ref;
			if (!t)
				continue;
			fprintf(out, "%s<code>", side && c->ref ? "<br/>" : "");
			esc(out, t->name, false);
			fprintf(out, "</code> %s", tb_dtype_name(t->dtype));
		}
		fputs("</td></tr>\n", out);
	}
	fputs("</tbody>\n</table></div>\n", out);
	for (int side = 0; side < 2; side++) {
		const tb_pairing *p = r->pairing;
		if (!p || !p->n_unp[side])
			continue;
		fprintf(out, "<h3>Unpaired in the %s (%zu)</h3>\n<ul class=\"unpaired\">\n", side ? "candidate" : "reference",
			p->n_unp[side]);
		for (size_t i = 0; i < p->n_unp[side]; i++) {
			fputs("<li><code>", out);
			esc(out, p->unp[side][i].tensor->name, false);
			fputs("</code>: ", out);
			esc(out, p->unp[side][i].reason, false);
			fputs("</li>\n", out);
		}
		fputs("</ul>\n", out);
	}
	fputs("</section>\n", out);
}

/* The MoE layers' routing, one line each. */
static void routing(FILE *out, const tb_report *r)
{
	char line[TB_ROUTING_TEXT_MAX];

	if (!r->routing || !r->routing->n)
		return;
	fputs("<section id=\"routing\">\n<h2>Routing</h2>\n<p>Per MoE layer, ", out);
	esc(out, TB_ROUTING_ABOUT, false);
	fputs(":</p>\n<ul>\n", out);
	for (size_t i = 0; i < r->routing->n; i++) {
		tb_routing_layer_text(&r->routing->v[i], line, sizeof line);
		fprintf(out, "<li data-layer=\"%d\">", r->routing->v[i].layer);
		esc(out, line, false);
		fputs("</li>\n", out);
	}
	fputs("</ul>\n</section>\n", out);
}

int tb_report_html(FILE *out, const tb_report *r, const tb_html_opts *o)
{
	const tb_result *res = r->result;
	char name[TB_CELL_NAME_MAX] = "";

	if (res->first_div >= 0)
		tb_cell_name(&res->cells[res->first_div].cell, name, sizeof name);
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>tbisect: ",
	      out);
	fputs(tb_verdict_word(res->verdict), out);
	if (name[0]) {
		fputs(", first divergence ", out);
		esc(out, name, false);
	}
	fprintf(out, "</title>\n<style>%s</style>\n</head>\n<body>\n", css);
	header(out, r, o);
	warnings(out, r);
	fputs("<main>\n", out);
	heatmap(out, r);
	causes(out, r);
	routing(out, r);
	first_detail(out, r, o);
	logits(out, res);
	history(out, r);
	cell_rows(out, r);
	fprintf(out, "</main>\n<script>//<![CDATA[\n%s\n//]]></script>\n</body>\n</html>\n", script);
	return ferror(out) ? -1 : 0;
}
