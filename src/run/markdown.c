#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "run/markdown.h"

/* Causes listed at most: a summary, not the report. */
#define MD_CAUSES 3

/* Text from the dumps and the rules, with the characters Markdown would
 * read as markup escaped. */
static void md_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (strchr("\\`*_[]<>|#", *s))
			fputc('\\', out);
		fputc(*s, out);
	}
}

/* A name or path as inline code; a backtick inside would end it early. */
static void md_code(FILE *out, const char *s)
{
	fputc('`', out);
	for (; *s; s++)
		fputc(*s == '`' ? '\'' : *s, out);
	fputc('`', out);
}

static void heading(FILE *out, const tb_result *res)
{
	char name[TB_CELL_NAME_MAX];

	fprintf(out, "## tbisect: %s", tb_verdict_word(res->verdict));
	if (res->first_div >= 0) {
		const tb_cell_result *c = &res->cells[res->first_div];
		tb_cell_name(&c->cell, name, sizeof name);
		fprintf(out, ", first divergence ");
		md_code(out, name);
		if (c->m.first_bad_position >= 0)
			fprintf(out, " at position %lld", (long long)c->m.first_bad_position);
	} else {
		fprintf(out, ", no cell diverged");
	}
	fprintf(out, "\n\n");
}

static void facts(FILE *out, const tb_report *r)
{
	const tb_result *res = r->result;

	for (int side = 0; side < 2; side++) {
		char lay[160];
		fprintf(out, side ? "- **Candidate:** " : "- **Reference:** ");
		md_code(out, side ? r->cand_path : r->ref_path);
		tb_layout_text(r->layout[side], lay, sizeof lay);
		if (lay[0]) {
			fputs(" (", out);
			md_text(out, lay);
			fputc(')', out);
		}
		fputc('\n', out);
	}
	if (r->coverage) {
		char cov[TB_COVERAGE_TEXT_MAX];
		tb_coverage_text(r->coverage, cov, sizeof cov);
		fprintf(out, "- **Coverage:** ");
		md_text(out, cov);
		fputc('\n', out);
	}
	fprintf(out, "- **Cells:** %zu: %zu match, %zu close, %zu diverged, %zu missing\n", res->n_cells,
		res->count[TB_ST_MATCH], res->count[TB_ST_CLOSE], res->count[TB_ST_DIVERGED], res->count[TB_ST_MISSING]);
	fprintf(out, "- **Tolerance:** atol %g, rtol %g, diverge %g, max-kl %g\n", res->tol.atol, res->tol.rtol,
		res->tol.diverge, res->tol.max_kl);
	if (res->first_div >= 0) {
		const tb_cell_result *c = &res->cells[res->first_div];
		fprintf(out, "- **First divergence:** rel_l2 %.3g, cosine %.4f, norm_ratio %.4f (ref ", c->m.rel_l2,
			c->m.cosine, c->m.norm_ratio);
		md_code(out, c->ref ? c->ref->name : "-");
		fprintf(out, ", cand ");
		md_code(out, c->cand ? c->cand->name : "-");
		fprintf(out, ")%s\n", tb_cell_partial(c) ? ", at the elements a partial dump printed" : "");
	}
	if (r->diag && r->diag->origin.text[0]) {
		fprintf(out, "- **Origin:** ");
		md_text(out, r->diag->origin.text);
		fputc('\n', out);
	}
	fputc('\n', out);
}

typedef struct md_warnings {
	FILE *out;
	int n; /* written so far: quote lines between them */
} md_warnings;

static void md_warning(void *ctx, const char *id, const char *text)
{
	md_warnings *w = ctx;

	fprintf(w->out, "%s> **Warning (%s):** ", w->n++ ? ">\n" : "", id);
	md_text(w->out, text);
	fputc('\n', w->out);
}

/* Warnings first in the reader's eye: coverage, the map, the dumps. */
static void warnings(FILE *out, const tb_report *r)
{
	md_warnings w = {out, 0};

	tb_report_each_warning(r, md_warning, &w);
	if (w.n)
		fputc('\n', out);
}

static void causes(FILE *out, const tb_report *r)
{
	const tb_diagnosis *d = r->diag;
	const tb_result *res = r->result;
	char name[TB_CELL_NAME_MAX];

	if (!d || r->partial || (res->first_div < 0 && !d->causes.n))
		return;
	if (res->first_div < 0) {
		/* a close pair's causes (precision drift) are still named */
		fprintf(out, "### Likely causes (no cell diverged)\n\n");
	} else {
		tb_cell_name(&res->cells[res->first_div].cell, name, sizeof name);
		fprintf(out, "### Likely causes of ");
		md_code(out, name);
		fprintf(out, "\n\n");
	}
	if (!d->causes.n) {
		fprintf(out, "No diagnosis rule matches this pattern.\n\n");
		return;
	}
	for (size_t i = 0; i < d->causes.n && i < MD_CAUSES; i++) {
		const tb_cause *c = &d->causes.v[i];
		char cf[160];
		fprintf(out, "%zu. **%s** (score %.2f): ", i + 1, c->id, c->score);
		if (tb_cause_confirmation(c, cf, sizeof cf)) {
			md_text(out, cf);
			fputs("; ", out);
		}
		md_text(out, c->why);
		fprintf(out, "  \n   *Look at:* ");
		md_text(out, c->look_at);
		fputc('\n', out);
	}
	if (d->causes.n > MD_CAUSES)
		fprintf(out, "\n%zu more in `tbisect check` or its JSON report.\n", d->causes.n - MD_CAUSES);
	fputc('\n', out);
}

/* The MoE layers' routing, one line each. */
static void routing(FILE *out, const tb_report *r)
{
	char line[TB_ROUTING_TEXT_MAX];

	if (!r->routing || !r->routing->n)
		return;
	fprintf(out, "### Routing\n\nPer MoE layer, %s:\n\n", TB_ROUTING_ABOUT);
	for (size_t i = 0; i < r->routing->n; i++) {
		tb_routing_layer_text(&r->routing->v[i], line, sizeof line);
		fprintf(out, "- %s\n", line);
	}
	fputc('\n', out);
}

int tb_report_markdown(FILE *out, const tb_report *r)
{
	heading(out, r->result);
	warnings(out, r);
	facts(out, r);
	causes(out, r);
	routing(out, r);
	fprintf(out, "### Cells\n\n```text\n");
	tb_report_grid(out, r->result, TB_MARKDOWN_FOLD_ABOVE);
	fprintf(out, "```\n");
	return ferror(out) ? -1 : 0;
}
