#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare/selection.h"

const char *const tb_score_fn_names[TB_N_SCORE_FNS] = {"the scores as dumped", "sigmoid", "softmax"};

#define MAX_E TB_SELECT_MAX_E
/* The bias fit: passes over the positions at most, and the work all the
 * fits of one router may take (score functions times group shapes). */
#define MAX_EPOCHS 200
#define MAX_WORK 4e8
#define N_SHAPES 48
#define SETTLE 20
#define STALL 30

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
		if (s->fn == TB_SCORE_SIGMOID)
			x = 1 / (1 + exp(-x));
		else if (s->fn == TB_SCORE_SOFTMAX)
			x = exp(x - top) / sum;
		c[i] = x + (s->bias ? s->bias[i] : 0);
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
	bool ok[MAX_E], taken[MAX_E], gtaken[MAX_E];
	int64_t per = s->groups ? s->e / s->groups : s->e;

	memset(taken, 0, (size_t)s->e);
	memset(gtaken, 0, (size_t)s->groups);
	selection_scores(s, row, c);
	*gap = INFINITY;
	*scale = 0;
	for (int64_t i = 0; i < s->e; i++) {
		*scale = fmax(*scale, fabs(c[i]));
		ok[i] = true;
	}
	if (s->groups) {
		for (int g = 0; g < s->groups; g++) {
			bool t[MAX_E];
			memset(t, 0, (size_t)per);
			int64_t a = take_top(c + g * per, per, NULL, t);
			int64_t b = per > 1 ? take_top(c + g * per, per, NULL, t) : -1;
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
	if (ids)
		ids[s->k] = next;
	if (last >= 0 && next >= 0)
		*gap = fmin(*gap, c[last] - c[next]);
}

/* Are the k ids got the set ids? */
static bool same_set(const int64_t *got, const float *ids, int64_t k)
{
	for (int64_t j = 0; j < k; j++) {
		bool found = false;
		for (int64_t i = 0; i < k && !found; i++)
			found = (double)got[i] == ids[j];
		if (!found)
			return false;
	}
	return true;
}

bool tb_select_agrees(const tb_select *s, const float *row, const float *ids, double *gap, double *scale)
{
	int64_t got[65];
	double g, sc;

	tb_select_row(s, row, got, gap ? gap : &g, scale ? scale : &sc);
	return same_set(got, ids, s->k);
}

static int64_t count_misses(const tb_select *s, const float *scores, const float *ids, int64_t positions)
{
	int64_t m = 0;

	for (int64_t p = 0; p < positions; p++)
		m += !tb_select_agrees(s, scores + p * s->e, ids + p * s->k, NULL, NULL);
	return m;
}

static int64_t set_misses(const tb_select_set *sets, int n)
{
	int64_t m = 0;

	for (int i = 0; i < n; i++)
		m += count_misses(sets[i].sel, sets[i].scores, sets[i].ids, sets[i].positions);
	return m;
}

/* One pass of the perceptron over one set: where a position's set differs,
 * the experts it missed move up and those it took wrongly down; once
 * every set is reproduced (settle), the chosen k-th and the next move
 * apart where they are nearer than the step: a bias in the middle of those
 * that fit, not at an edge. */
static void perceptron_pass(const tb_select_set *set, double lr, bool settle)
{
	const tb_select *s = set->sel;
	int64_t got[65];

	for (int64_t p = 0; p < set->positions; p++) {
		const float *want = set->ids + p * s->k, *row = set->scores + p * s->e;
		double gap, scale;
		tb_select_row(s, row, got, &gap, &scale);
		if (settle && gap < lr && got[s->k] >= 0 && same_set(got, want, s->k)) {
			s->bias[got[s->k - 1]] += lr / 2;
			s->bias[got[s->k]] -= lr / 2;
			continue;
		}
		for (int64_t j = 0; j < s->k; j++) {
			bool in = false, chosen = false;
			for (int64_t i = 0; i < s->k; i++) {
				in |= (double)got[j] == want[i];
				chosen |= (double)got[i] == want[j];
			}
			if (!in && got[j] >= 0)
				s->bias[got[j]] -= lr;
			if (!chosen && want[j] >= 0 && want[j] < (double)s->e)
				s->bias[(int64_t)want[j]] += lr;
		}
	}
}

/* The perceptron from the bias as it is with step lr, halved when it
 * stalls: the fewest misses reached, that bias left in bias. */
static int64_t descend(const tb_select_set *sets, int n, double lr, int epochs, double *spare)
{
	double *bias = sets[0].sel->bias;
	int64_t e = sets[0].sel->e, best_m = set_misses(sets, n), stale = 0;
	int settle = 0;

	memcpy(spare, bias, (size_t)e * sizeof *spare);
	for (int ep = 0; ep < epochs && lr > 0 && (best_m > 0 || settle++ < SETTLE); ep++) {
		for (int i = 0; i < n; i++)
			perceptron_pass(&sets[i], lr, best_m == 0);
		int64_t m = set_misses(sets, n);
		if (m == 0 && best_m == 0) {
			memcpy(spare, bias, (size_t)e * sizeof *spare);
		} else if (m < best_m) {
			best_m = m;
			stale = 0;
			memcpy(spare, bias, (size_t)e * sizeof *spare);
		} else if (++stale >= STALL) {
			break; /* three halvings without a position gained: this selection does not fit */
		} else if (stale % 10 == 0) {
			lr /= 2;
		}
	}
	memcpy(bias, spare, (size_t)e * sizeof *bias);
	return best_m;
}

int64_t tb_select_fit_bias(const tb_select_set *sets, int n, double *spare)
{
	/* a coarse step finds the bias fast where the sets leave it room, a
	 * fine one where they pin it to narrow gaps: both, from the same start */
	static const double steps[] = {50, 500};
	double c[MAX_E], start[MAX_E], keep[MAX_E], spread = 0, *bias = sets[0].sel->bias;
	int64_t e = sets[0].sel->e, all = 0, best_m = -1;

	for (int i = 0; i < n; i++)
		all += sets[i].positions;
	int epochs = (int)fmin(MAX_EPOCHS, fmax(3, MAX_WORK / N_SHAPES / ((double)all * (double)e)));
	for (int i = 0; i < n; i++)
		for (int64_t p = 0; p < sets[i].positions; p++) {
			double lo = INFINITY, hi = -INFINITY;
			selection_scores(sets[i].sel, sets[i].scores + p * e, c);
			for (int64_t x = 0; x < e; x++) {
				lo = fmin(lo, c[x]);
				hi = fmax(hi, c[x]);
			}
			spread += (hi - lo) / (double)all;
		}
	memcpy(start, bias, (size_t)e * sizeof *start);
	for (size_t j = 0; j < sizeof steps / sizeof *steps && best_m != 0; j++) {
		memcpy(bias, start, (size_t)e * sizeof *bias);
		int64_t m = descend(sets, n, spread / steps[j], epochs, spare);
		if (best_m < 0 || m < best_m) {
			best_m = m;
			memcpy(keep, bias, (size_t)e * sizeof *keep);
		}
	}
	memcpy(bias, keep, (size_t)e * sizeof *bias);
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
	/* the ids alone rarely tell score functions apart once a bias is fitted:
	 * the routers that choose with a bias score by sigmoid (DeepSeek-V3,
	 * GLM-4.5) more often than by softmax */
	static const tb_score_fn order[] = {TB_SCORE_SIGMOID, TB_SCORE_SOFTMAX, TB_SCORE_RAW};
	for (size_t f = 0; f < sizeof order / sizeof *order && *misses; f++)
		for (int g = 1; g <= 16 && *misses; g++) {
			/* g 1: no groups; else g groups of at least two, the best tg of them */
			if (g > 1 && (e % g || e / g < 2))
				continue;
			for (int tg = g > 1; tg <= g / 2 && *misses; tg++) {
				s = (tb_select){e, k, order[f], g > 1 ? g : 0, g > 1 ? tg : 0,
						calloc((size_t)e, sizeof(double))};
				if (!s.bias) {
					free(spare);
					tb_select_free(out);
					return -1;
				}
				if (g > 1 && tg * (e / g) < k) {
					free(s.bias);
					continue;
				}
				int64_t m = tb_select_fit_bias(&(tb_select_set){&s, scores, ids, positions}, 1, spare);
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
