#include "config.h"

#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/pattern.h"
#include "tui/view.h"

double view_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const tb_pairing *view_pairing(const view *v)
{
	return v->run.sess.pairing;
}

const tb_result *view_result(const view *v)
{
	return v->run.res ? v->run.res : v->run.job ? tb_job_result(v->run.job) : NULL;
}

bool view_cell_ready(const view *v, size_t i)
{
	if (v->run.res)
		return i < v->run.res->n_cells;
	return v->run.job ? tb_job_cell_done(v->run.job, i) : false;
}

int view_cell_status(const view *v, size_t i)
{
	return view_cell_ready(v, i) ? (int)view_result(v)->cells[i].status : TB_ST_PENDING;
}

long view_first_divergence(const view *v)
{
	const tb_result *r = view_result(v);

	if (v->run.res)
		return v->run.res->first_div;
	for (size_t i = 0; r && i < r->n_cells; i++)
		if (view_cell_status(v, i) == TB_ST_DIVERGED)
			return (long)i;
	return -1;
}

const char *view_cell_label(const view *v, long i, char *buf, size_t size)
{
	const tb_pairing *p = view_pairing(v);

	if (!p || i < 0 || (size_t)i >= p->n_pairs)
		snprintf(buf, size, "none");
	else
		tb_cell_name(&p->pairs[i].cell, buf, size);
	return buf;
}

const tb_diagnosis *view_diag(const view *v)
{
	return v->run.have_diag ? &v->run.diag : NULL;
}

void view_message(view *v, bool error, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(v->msg, sizeof v->msg, fmt, ap);
	va_end(ap);
	v->msg_err = error;
}

static bool pair_matches(const regex_t *re, const tb_pair *p)
{
	char name[TB_CELL_NAME_MAX];

	tb_cell_name(&p->cell, name, sizeof name);
	return !regexec(re, name, 0, NULL, 0) || (p->ref && !regexec(re, p->ref->name, 0, NULL, 0)) ||
	       (p->cand && !regexec(re, p->cand->name, 0, NULL, 0));
}

int view_search(view *v, const char *pattern, int dir, char *why, size_t size)
{
	const tb_pairing *p = view_pairing(v);
	long n = (long)p->n_pairs, start = grid_selected(&v->g);
	regex_t re;

	if (tb_pattern_compile(&re, pattern, REG_NOSUB | REG_ICASE, why, size) < 0)
		return -1;
	for (long k = 1; k <= n; k++) {
		long i = ((start < 0 ? -dir : start) + dir * k + n * 2) % n;
		if (pair_matches(&re, &p->pairs[i])) {
			regfree(&re);
			return grid_select(&v->g, i) ? 1 : 0;
		}
	}
	regfree(&re);
	return 0;
}

static bool newer_than(const struct stat *st, const struct timespec *t)
{
	return st->st_mtim.tv_sec > t->tv_sec || (st->st_mtim.tv_sec == t->tv_sec && st->st_mtim.tv_nsec > t->tv_nsec);
}

bool view_refuse_stale(view *v, const tb_cell_result *c)
{
	const tb_tensor *side[2] = {c->ref, c->cand};
	char name[TB_CELL_NAME_MAX];

	tb_cell_name(&c->cell, name, sizeof name);
	if (v->stale) {
		view_message(v, true, "%s: the dump files changed since this view read them; not re-read until a reload succeeds",
			     name);
		return true;
	}
	for (int s = 0; s < 2; s++) {
		struct stat st;
		if (side[s] && (stat(side[s]->path, &st) < 0 || newer_than(&st, &v->run.opened))) {
			view_message(v, true, "%s: %s changed on disk since it was read; r reloads", name, side[s]->path);
			return true;
		}
	}
	return false;
}
