#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare/selection.h"

const char *const tb_score_fn_names[TB_N_SCORE_FNS] = {"the scores as dumped", "sigmoid", "softmax"};

/* Rows wider than this are not fitted (the largest routers have 256). */
#define MAX_E 1024
/* The bias fit: passes over the positions at most, and the work all the
 * fits of one router may take (score functions times group shapes). */
#define MAX_EPOCHS 200
#define MAX_WORK 4e8
#define N_SHAPES 48

/* c[e]: the row's selection scores under s. */
static void selection_scores(const tb_select *s, const float *row, double *c)
{
	double top = -INFINITY, sum = 0;

	for (int64_t i = 0; i < s->e; i++)
		top = fmax(top, row[i]);
	for (int64_t i = 0; i < s->e && s->fn == TB_SCORE_SOFTMAX; i++)
		sum += exp(row[i] - top);
	for (int64_t i = 0; i < s->e; i++) {
		double x = row[i];
		c[i] = s->fn == TB_SCORE_SIGMOID ? 1 / (1 + exp(-x)) : s->fn == TB_SCORE_SOFTMAX ? exp(x - top) / sum : x;
		c[i] += s->bias ? s->bias[i] : 0;
	}
}

/* The largest of v[0..n) where ok and not yet taken, marked taken; -1: none. */
static int64_t take_top(const double *v, int64_t n, const bool *ok, bool *taken)
{
	int64_t best = -1;

	for (int64_t i = 0; i < n; i++)
		if ((!ok || ok[i]) && !taken[i] && (best < 0 || v[i] > v[best]))
			best = i;
	if (best >= 0)
		taken[best] = true;
	return best;
}

void tb_select_row(const tb_select *s, const float *row, int64_t *ids, double *gap, double *scale)
{
	double c[MAX_E], gs[MAX_E];
	bool ok[MAX_E], taken[MAX_E] = {false}, gtaken[MAX_E] = {false};
	int64_t per = s->groups ? s->e / s->groups : s->e;

	selection_scores(s, row, c);
	*gap = INFINITY;
	*scale = 0;
	for (int64_t i = 0; i < s->e; i++) {
		*scale = fmax(*scale, fabs(c[i]));
		ok[i] = true;
	}
	if (s->groups) {
		for (int g = 0; g < s->groups; g++) {
			bool t[MAX_E] = {false};
			int64_t a = take_top(c + g * per, per, NULL, t), b = per > 1 ? take_top(c + g * per, per, NULL, t) : -1;
			gs[g] = c[g * per + a] + (b >= 0 ? c[g * per + b] : 0);
		}
		int64_t last = -1;
		for (int j = 0; j < s->topk_groups; j++)
			last = take_top(gs, s->groups, NULL, gtaken);
		int64_t next = take_top(gs, s->groups, NULL, gtaken);
		if (last >= 0 && next >= 0)
			*gap = gs[last] - gs[next];
		/* the group taken to measure the gap is not chosen */
		for (int64_t i = 0; i < s->e; i++)
			ok[i] = gtaken[i / per] && i / per != next;
	}
	int64_t last = -1;
	for (int64_t j = 0; j < s->k; j++) {
		last = take_top(c, s->e, ok, taken);
		if (ids)
			ids[j] = last;
	}
	int64_t next = take_top(c, s->e, ok, taken);
	if (last >= 0 && next >= 0)
		*gap = fmin(*gap, c[last] - c[next]);
}

bool tb_select_agrees(const tb_select *s, const float *row, const float *ids)
{
	int64_t got[64];
	double gap, scale;

	tb_select_row(s, row, got, &gap, &scale);
	for (int64_t j = 0; j < s->k; j++) {
		bool found = false;
		for (int64_t i = 0; i < s->k && !found; i++)
			found = (double)got[i] == ids[j];
		if (!found)
			return false;
	}
	return true;
}

static int64_t count_misses(const tb_select *s, const float *scores, const float *ids, int64_t positions)
{
	int64_t m = 0;

	for (int64_t p = 0; p < positions; p++)
		m += !tb_select_agrees(s, scores + p * s->e, ids + p * s->k);
	return m;
}

/* Fit s->bias so that s chooses ids (a perceptron: where a position's set
 * differs, the experts it missed move up and those it took wrongly down);
 * the fewest misses reached. */
static int64_t fit_bias(tb_select *s, const float *scores, const float *ids, int64_t positions, double *best)
{
	double c[MAX_E], spread = 0, lr;
	int64_t got[64], best_m = count_misses(s, scores, ids, positions), stale = 0;
	int epochs = (int)fmin(MAX_EPOCHS, fmax(3, MAX_WORK / N_SHAPES / ((double)positions * (double)s->e)));

	memcpy(best, s->bias, (size_t)s->e * sizeof *best);
	for (int64_t p = 0; p < positions; p++) {
		double lo = INFINITY, hi = -INFINITY;
		selection_scores(s, scores + p * s->e, c);
		for (int64_t i = 0; i < s->e; i++) {
			lo = fmin(lo, c[i]);
			hi = fmax(hi, c[i]);
		}
		spread += (hi - lo) / (double)positions;
	}
	lr = spread / 50;
	for (int ep = 0; ep < epochs && best_m > 0 && lr > 0; ep++) {
		for (int64_t p = 0; p < positions; p++) {
			const float *want = ids + p * s->k;
			double gap, scale;
			tb_select_row(s, scores + p * s->e, got, &gap, &scale);
			for (int64_t j = 0; j < s->k; j++) {
				bool in = false, chosen = false;
				for (int64_t i = 0; i < s->k; i++) {
					in |= (double)got[j] == want[i];
					chosen |= (double)got[i] == want[j];
				}
				if (!in)
					s->bias[got[j]] -= lr;
				if (!chosen && want[j] >= 0 && want[j] < (double)s->e)
					s->bias[(int64_t)want[j]] += lr;
			}
		}
		int64_t m = count_misses(s, scores, ids, positions);
		if (m < best_m) {
			best_m = m;
			stale = 0;
			memcpy(best, s->bias, (size_t)s->e * sizeof *best);
		} else if (++stale % 10 == 0) {
			lr /= 2;
		}
	}
	memcpy(s->bias, best, (size_t)s->e * sizeof *best);
	return best_m;
}

int tb_select_fit(const float *scores, const float *ids, int64_t positions, int64_t e, int64_t k, tb_select *out,
		  int64_t *misses)
{
	tb_select s = {e, k, TB_SCORE_RAW, 0, 0, NULL};
	double *spare = NULL;

	*out = s;
	*misses = k > 0 && k <= 64 && k < e && e <= MAX_E ? count_misses(&s, scores, ids, positions) : 0;
	if (!*misses)
		return 0;
	if (!(spare = malloc((size_t)e * sizeof *spare)))
		return -1;
	for (int fn = TB_SCORE_RAW; fn < TB_N_SCORE_FNS && *misses; fn++)
		for (int g = 1; g <= 16 && *misses; g++) {
			/* g 1: no groups; else g groups of at least two, the best tg of them */
			if (g > 1 && (e % g || e / g < 2))
				continue;
			for (int tg = g > 1; tg <= g / 2 && *misses; tg++) {
				s = (tb_select){e, k, (tb_score_fn)fn, g > 1 ? g : 0, g > 1 ? tg : 0, calloc((size_t)e, sizeof(double))};
				if (!s.bias) {
					free(spare);
					tb_select_free(out);
					return -1;
				}
				if (g > 1 && tg * (e / g) < k) {
					free(s.bias);
					continue;
				}
				int64_t m = fit_bias(&s, scores, ids, positions, spare);
				if (m < *misses) {
					tb_select_free(out);
					*out = s;
					*misses = m;
				} else {
					free(s.bias);
				}
			}
		}
	free(spare);
	return 0;
}

void tb_select_free(tb_select *s)
{
	free(s->bias);
	s->bias = NULL;
}
