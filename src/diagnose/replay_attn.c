#include "config.h"

#include <cblas.h>
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/replay_heads.h"
#include "diagnose/replay_ops.h"

/* The float error of the ops themselves on f32 dumps.  Hugging Face builds
 * its RoPE angles in float32, which is off by about 1e-4 at position
 * 2048, and a softmax over thousands of keys in float loses about as
 * much; half-width dumps get HALF_ROUNDINGS of their rounding, since
 * both q*cos + rotate(q)*sin and the attention are rounded several times. */
#define ROPE_F32_FLOOR 2e-4
#define CORE_F32_FLOOR 1e-4
#define HALF_ROUNDINGS 4

#define MAX_HD TB_HEADS_MAX_HD
#define SAMPLE_EARLY 32 /* rows 0..31, where the RoPE angles are small */
#define SAMPLE_LATE 32  /* and rows spread to the end */
#define MAX_SAMPLE (SAMPLE_EARLY + SAMPLE_LATE)
#define PROBE_ROWS 8 /* rows that choose the head dim */

/* The rows a replay compares: all of a short sequence, else the first
 * SAMPLE_EARLY and SAMPLE_LATE spread to the last.  Returns how many. */
static int sample_rows(int64_t S, int64_t *rows)
{
	int n = 0;

	if (S <= MAX_SAMPLE) {
		for (int64_t i = 0; i < S; i++)
			rows[n++] = i;
		return n;
	}
	for (int i = 0; i < SAMPLE_EARLY; i++)
		rows[n++] = i;
	for (int i = 1; i <= SAMPLE_LATE; i++)
		rows[n++] = SAMPLE_EARLY + (S - 1 - SAMPLE_EARLY) * i / SAMPLE_LATE;
	return n;
}


/* What both attention replays start from: the positions, the head dims
 * to try, the sampled rows and the few that choose the head dim. */
typedef struct attn_plan {
	int64_t S, rows[MAX_SAMPLE], probe[PROBE_ROWS];
	int hds[TB_HEADS_N_DIMS], nhd, nrows, nprobe;
} attn_plan;

/* Plan the replay of the four taps p; false, with out->note saying which
 * taps to dump (missing), when one is not dumped on both sides. */
static bool plan(const tb_replay_in *in, const tb_pair *const *p, const char *missing, tb_replay *out, attn_plan *pl)
{
	const tb_tensor *shapes[4];

	for (int i = 0; i < 4; i++) {
		if (!p[i]) {
			snprintf(out->note, sizeof out->note, "%s", missing);
			return false;
		}
		shapes[i] = p[i]->ref;
	}
	pl->S = tb_heads_positions(shapes, 4);
	pl->nhd = tb_heads_dim_choices(shapes, 4, in->heads, pl->S, pl->hds);
	pl->nrows = sample_rows(pl->S, pl->rows);
	pl->nprobe = pl->nrows < PROBE_ROWS ? pl->nrows : PROBE_ROWS;
	for (int k = 0; k < PROBE_ROWS; k++)
		pl->probe[k] = pl->rows[(int64_t)k * pl->nrows / PROBE_ROWS];
	return true;
}

/* The four tensors of one side of an op, loaded once for both sides
 * (tb_replay_load_pairs), and their views as heads of hd channels (which
 * the replay may try several of). */
typedef struct side4 {
	tb_tensor *t[4];
	const float *data[4]; /* borrowed from the loaded pairs */
	tb_heads_view v[4];
} side4;

/* One side of the op's loaded pairs. */
static void side_of(side4 *s, const tb_pair *const *p, const tb_replay_sides *loaded, bool cand)
{
	memset(s, 0, sizeof *s);
	for (int i = 0; i < 4; i++) {
		s->t[i] = cand ? p[i]->cand : p[i]->ref;
		s->data[i] = cand ? loaded[i].cand : loaded[i].ref;
	}
}

/* View the side as S positions of hd-channel heads; false when a tensor
 * does not hold them, or heads[i] != heads[same[i]] for the pairs the op
 * needs equal (same[i] < 0: no constraint). */
static bool side_view(side4 *s, int64_t S, int hd, const int *same)
{
	for (int i = 0; i < 4; i++) {
		if (!tb_heads_fit(s->t[i], S, hd, &s->v[i]))
			return false;
		s->v[i].v = s->data[i];
	}
	for (int i = 0; i < 4; i++)
		if (same[i] >= 0 && s->v[i].nh != s->v[same[i]].nh)
			return false;
	return true;
}

/* ------------------------------------------------------------------ */
/* RoPE: attn.q, attn.k (before) -> attn.q_rope, attn.k_rope            */

typedef struct rope_cfg {
	bool interleaved; /* pairs (2i, 2i+1), else rotate-half (i, i + rot/2) */
	int sign;         /* +1: Hugging Face's rotate_half; -1: rotation by -theta */
	int rot;          /* channels rotated per head (partial rotary) */
	double theta;
	int64_t table;    /* positions from table on reuse the last row, or wrap (0: none) */
	bool wrap;        /* ... read position % table */
	unsigned transposed; /* 1: q, 2: k viewed as [hd, heads] before RoPE */
	bool head_norm;   /* an RMSNorm per head (unit weight) before RoPE */
	bool none;        /* no rotation at all: a NoPE layer */
	double gain;      /* the attention factor on cos and sin (YaRN's mscale); 0: none */
	double pos_scale; /* positions times this (1 / a linear scaling factor); 0: 1 */
	bool measured;    /* the inverse frequencies are inv[], read off a side's own q and q_rope ... */
	double span;      /* ... at positions up to this one */
	double inv[MAX_HD / 2];
} rope_cfg;

static double or1(double x)
{
	return x != 0 ? x : 1;
}

/* The configuration's inverse frequency of channel pair i. */
static double rope_inv(const rope_cfg *c, int i)
{
	return (c->measured ? c->inv[i] : pow(c->theta, -2.0 * i / c->rot)) * or1(c->pos_scale);
}

/* Rotate one head's vector x (read through its view, transposed or not)
 * at position pos; adds the squared error against y and y's norm. */
static void rope_head(const rope_cfg *c, const tb_heads_view *in, int64_t pos, int head, bool transposed,
		      const double *cs, const double *sn, const float *y, double *dd, double *yy)
{
	double x[MAX_HD], r[MAX_HD];
	int hd = in->hd;

	if (transposed) {
		const float *row = tb_heads_row(in, pos, 0);
		for (int d = 0; d < hd; d++)
			x[d] = row[(size_t)d * in->nh + head];
	} else {
		const float *row = tb_heads_row(in, pos, head);
		for (int d = 0; d < hd; d++)
			x[d] = row[d];
	}
	if (c->head_norm) {
		double ss = 0;
		for (int d = 0; d < hd; d++)
			ss += x[d] * x[d];
		double inv = 1 / sqrt(ss / hd + 1e-6);
		for (int d = 0; d < hd; d++)
			x[d] *= inv;
	}
	memcpy(r, x, (size_t)hd * sizeof *r);
	for (int i = 0; i < c->rot / 2; i++) {
		int a = c->interleaved ? 2 * i : i, b = c->interleaved ? 2 * i + 1 : i + c->rot / 2;
		r[a] = x[a] * cs[i] - x[b] * sn[i];
		r[b] = x[b] * cs[i] + x[a] * sn[i];
	}
	for (int d = 0; d < hd; d++) {
		double e = r[d] - y[d];
		*dd += e * e;
		*yy += (double)y[d] * y[d];
	}
}

/* rel_l2 of the configuration's q_rope and k_rope over the rows; per
 * row too when row_rel is not NULL. */
static double rope_residual(const side4 *s, const rope_cfg *c, const int64_t *rows, int nrows, double *row_rel)
{
	double cs[MAX_HD / 2], sn[MAX_HD / 2], dd = 0, yy = 0;

	for (int k = 0; k < nrows; k++) {
		int64_t pos = !c->table || rows[k] < c->table ? rows[k] : c->wrap ? rows[k] % c->table : c->table - 1;
		double rd = 0, ry = 0;
		for (int i = 0; i < c->rot / 2; i++) {
			double ang = (double)pos * rope_inv(c, i);
			cs[i] = c->none ? 1 : or1(c->gain) * cos(ang);
			sn[i] = c->none ? 0 : or1(c->gain) * c->sign * sin(ang);
		}
		for (int t = 0; t < 2; t++)
			for (int h = 0; h < s->v[t].nh; h++)
				rope_head(c, &s->v[t], rows[k], h, c->transposed >> t & 1, cs, sn, tb_heads_row(&s->v[2 + t], rows[k], h),
					  &rd, &ry);
		dd += rd;
		yy += ry;
		if (row_rel)
			row_rel[k] = tb_rel_l2(rd, ry);
	}
	return tb_rel_l2(dd, yy);
}

/* RoPE at theta = 10^x, the rest of c kept, on some rows. */
typedef struct theta_fit {
	const side4 *s;
	rope_cfg *c;
	const int64_t *rows;
	int nrows;
} theta_fit;

static int theta_residual(void *ctx, double x, double *rel, tb_err *err)
{
	theta_fit *t = ctx;

	(void)err;
	t->c->theta = pow(10, x);
	*rel = rope_residual(t->s, t->c, t->rows, t->nrows, NULL);
	return 0;
}

/* Fit theta for the rest of c: a grid over 1e2..1e10 (configs reach 1e8,
 * a dynamic NTK base more) on the rows whose angles are small (positions
 * 1..8, where the error is smooth in theta), then narrower searches on
 * ever later rows, whose error has ever narrower minima. */
static double fit_theta(const side4 *s, rope_cfg *c, const int64_t *rows, int nrows)
{
	int64_t early[8];
	int ne = 0, nmid = 0;
	double best = 4, best_rel;

	for (int k = 0; k < nrows && ne < 8; k++)
		if (rows[k] >= 1 && rows[k] <= 8)
			early[ne++] = rows[k];
	while (nmid < nrows && rows[nmid] < SAMPLE_EARLY)
		nmid++;
	/* rope_residual cannot fail: the fits' errors are never set */
	theta_fit fe = {s, c, early, ne}, fm = {s, c, rows, nmid}, fa = {s, c, rows, nrows};
	tb_fit_grid_min(theta_residual, &fe, 2, 0.125, 65, &best, NULL);
	tb_fit_golden_min(theta_residual, &fe, best - 0.125, best + 0.125, 24, &best, &best_rel, NULL);
	tb_fit_golden_min(theta_residual, &fm, best - 0.01, best + 0.01, 16, &best, &best_rel, NULL);
	tb_fit_golden_min(theta_residual, &fa, best - 0.001, best + 0.001, 12, &best, &best_rel, NULL);
	c->theta = pow(10, best);
	best_rel = rope_residual(s, c, rows, nrows, NULL);
	/* configs say 500000, not 499993: the round value, where it fits as well */
	double fitted = c->theta;
	for (int digits = 1; digits <= 3; digits++) {
		double unit = pow(10, floor(best) - digits + 1), round_theta = unit * nearbyint(fitted / unit), rel;
		c->theta = round_theta;
		rel = rope_residual(s, c, rows, nrows, NULL);
		if (rel <= best_rel * 1.01) {
			best_rel = rel;
			return best_rel;
		}
	}
	c->theta = fitted;
	return best_rel;
}

/* A pair whose angle over the positions read stays below this tells too
 * little of its frequency to fit a line through (nor does it matter). */
#define LINE_MIN_ANGLE 0.05

/* Read a side's own RoPE off its q and k before and after it, in the
 * pairs of c's style over every channel: each pair's angle per position,
 * refined row by row (rows ascending; an angle read at position p is good
 * to its noise / p), and the gain of the rotated channels (an attention
 * factor).  Whatever the scaling (linear, llama3, YaRN, dynamic at this
 * length) or none at all, a static RoPE is such a table. */
static void rope_measure(const side4 *s, rope_cfg *c, const int64_t *rows, int nrows)
{
	int half = s->v[0].hd / 2;
	double xx = 0, yy = 0;
	bool still = true;

	c->rot = s->v[0].hd;
	for (int i = 0; i < half; i++) {
		int a = c->interleaved ? 2 * i : i, b = c->interleaved ? 2 * i + 1 : i + half;
		double w = NAN;
		for (int k = 0; k < nrows; k++) {
			double complex z = 0;
			int64_t p = rows[k];
			if (p < 1)
				continue;
			for (int t = 0; t < 2; t++)
				for (int h = 0; h < s->v[t].nh; h++) {
					const float *x = tb_heads_row(&s->v[t], p, h), *y = tb_heads_row(&s->v[2 + t], p, h);
					double complex zx = x[a] + I * x[b], zy = y[a] + I * y[b];
					z += zy * conj(zx);
					xx += creal(zx * conj(zx));
					yy += creal(zy * conj(zy));
				}
			if (!(cabs(z) > 0))
				continue;
			w = isnan(w) ? carg(z) / (double)p : w + remainder(carg(z) - (double)p * w, 2 * M_PI) / (double)p;
		}
		c->inv[i] = isnan(w) ? 0 : w;
	}
	c->measured = true;
	c->span = nrows ? (double)rows[nrows - 1] : 0;
	/* every pair turns by less than a tenth of LINE_MIN_ANGLE over the rows read: the rounding's angles, no RoPE */
	for (int i = 0; i < half; i++)
		still = still && fabs(c->inv[i]) * c->span < LINE_MIN_ANGLE / 10;
	c->sign = 1;
	c->pos_scale = 0;
	c->table = 0;
	c->transposed = 0;
	c->head_norm = false;
	c->gain = xx > 0 && yy > 0 && fabs(log(yy / xx)) > 2e-3 ? sqrt(yy / xx) : 0;
	c->none = still && !c->gain;
}

/* Fit ln inv_i = -ln F - (2i / rot) ln theta over the pairs lo..hi-1 of a
 * measured table that turned by LINE_MIN_ANGLE at least: theta and F, and
 * the largest misfit, in radians at the last position read (INFINITY when
 * a pair turns backwards or fewer than two count; a pair that hardly turns
 * may read backwards in a half-width dump). */
static double rope_line(const rope_cfg *c, int lo, int hi, double *theta, double *factor)
{
	double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, a, b, worst = 0;
	int n = 0;

	/* weighted by the square of the angle each pair turned: the error of
	 * ln inv_i is the angles' noise over that angle */
	for (int i = lo; i < hi; i++) {
		double x = 2.0 * i / c->rot, y, w = c->inv[i] * c->span * c->inv[i] * c->span;
		if (c->inv[i] * c->span <= -LINE_MIN_ANGLE)
			return INFINITY;
		if (c->inv[i] * c->span < LINE_MIN_ANGLE)
			continue;
		n++;
		y = log(c->inv[i]);
		sw += w;
		sx += w * x;
		sy += w * y;
		sxx += w * x * x;
		sxy += w * x * y;
	}
	if (n < 2)
		return INFINITY;
	b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
	a = (sy - b * sx) / sw;
	for (int i = lo; i < hi; i++)
		if (c->inv[i] * c->span >= LINE_MIN_ANGLE)
			worst = fmax(worst, fabs(c->inv[i] - exp(a + b * 2.0 * i / c->rot)) * c->span);
	*theta = exp(-b);
	*factor = exp(-a);
	return worst;
}

/* Misfit of a table that still counts as a line, in radians at the last
 * position read: the angles of bf16 dumps (a variant built on the line
 * is judged by its residual, as every other). */
#define LINE_FIT 0.02

/* The reference's RoPE: every style, sign and rotary fraction at the
 * usual bases, then (fit_theta) theta fitted for the best three and both
 * plain styles; when none fits, its own table read off (rope_measure: a
 * scaled RoPE, YaRN's attention factor, or a NoPE layer). */
static double rope_reference(const side4 *s, rope_cfg *best, const int64_t *rows, int nrows, double floor,
			     bool fit_theta_too)
{
	static const double bases[] = {1e4, 5e5, 1e6, 1e5};
	rope_cfg top[3];
	double top_rel[3] = {INFINITY, INFINITY, INFINITY};
	int hd = s->v[0].hd;

	for (int style = 0; style < 2; style++)
		for (int sign = 1; sign >= -1; sign -= 2)
			for (int frac = 1; frac <= 4; frac *= 2) {
				if (hd % (2 * frac))
					continue;
				for (size_t b = 0; b < sizeof bases / sizeof *bases; b++) {
					rope_cfg c = {.interleaved = style, .sign = sign, .rot = hd / frac, .theta = bases[b]};
					double rel = rope_residual(s, &c, rows, nrows, NULL);
					for (int k = 0; k < 3; k++)
						if (rel < top_rel[k]) {
							memmove(top + k + 1, top + k, (size_t)(2 - k) * sizeof *top);
							memmove(top_rel + k + 1, top_rel + k, (size_t)(2 - k) * sizeof *top_rel);
							top[k] = c;
							top_rel[k] = rel;
							break;
						}
				}
			}
	*best = top[0];
	if (top_rel[0] <= floor)
		return top_rel[0];
	double rel = top_rel[0];
	/* and both plain styles: far from every base (a dynamic NTK base of 1.46e8), the three closest may
	 * be a partial rotary's, which no theta makes right */
	rope_cfg fits[5] = {top[0], top[1], top[2], {.sign = 1, .rot = hd, .theta = 1e4},
			    {.interleaved = true, .sign = 1, .rot = hd, .theta = 1e4}};
	for (int k = 0; k < 5 && fit_theta_too; k++) {
		rope_cfg c = fits[k];
		bool again = false;
		for (int j = 0; j < k; j++)
			again = again ||
				(fits[j].interleaved == c.interleaved && fits[j].sign == c.sign && fits[j].rot == c.rot);
		double r = again ? INFINITY : fit_theta(s, &c, rows, nrows);
		if (r < rel) {
			rel = r;
			*best = c;
		}
	}
	for (int style = 0; style < 2 && rel > floor; style++) {
		rope_cfg c = {.interleaved = style};
		double r;
		rope_measure(s, &c, rows, nrows);
		r = rope_residual(s, &c, rows, nrows, NULL);
		if (r < rel) {
			rel = r;
			*best = c;
		}
	}
	return rel;
}

static void describe_rope(const rope_cfg *c, int hd, char *buf, size_t size)
{
	double theta, factor;
	int half = c->rot / 2;

	if (c->none) {
		snprintf(buf, size, "no RoPE (a NoPE layer)");
		return;
	}
	if (c->measured) {
		/* short: the report holds 63 characters */
		const char *style = c->interleaved ? "interleaved" : "rotate-half";
		if (rope_line(c, 0, half, &theta, &factor) > LINE_FIT)
			snprintf(buf, size, "RoPE %s, frequencies read off", style);
		else if (fabs(log(factor)) > 0.01)
			snprintf(buf, size, "RoPE %s, theta %.3g, linear x%.3g", style, theta, factor);
		else
			snprintf(buf, size, "RoPE %s, theta %.3g", style, theta);
		if (c->gain)
			snprintf(buf + strlen(buf), size - strlen(buf), ", attention factor %.4g", c->gain);
		return;
	}
	snprintf(buf, size, "RoPE %s%s, theta %.3g%s", c->interleaved ? "interleaved pairs" : "rotate-half",
		 c->sign < 0 ? " by -theta" : "", c->theta, c->rot < hd ? ", partial" : "");
	if (c->rot < hd)
		snprintf(buf + strlen(buf), size - strlen(buf), " (%d of %d channels)", c->rot, hd);
}

typedef struct rope_variant {
	rope_cfg cfg;
	tb_cause_id cause;
	char name[96];
	double rel;
} rope_variant;

/* The first row the reference's configuration misses on the candidate:
 * where a RoPE table that ends early starts to repeat its last row. */
static int64_t first_missed_row(const side4 *s, const rope_cfg *c0, double floor)
{
	int64_t S = s->v[2].S;
	int64_t *rows, first = 0;
	double *rel;

	if (S <= 0 || S > INT32_MAX)
		return 0;
	rows = malloc((size_t)S * sizeof *rows);
	rel = malloc((size_t)S * sizeof *rel);
	if (!rows || !rel) {
		free(rows);
		free(rel);
		return 0;
	}
	for (int64_t i = 0; i < S; i++)
		rows[i] = i;
	rope_residual(s, c0, rows, (int)S, rel);
	for (int64_t i = 0; i < S && !first; i++)
		if (rel[i] > 10 * floor)
			first = i;
	free(rows);
	free(rel);
	return first;
}

/* The scaling variants of a reference: no rotation (NoPE) and its
 * attention factor applied 0 or 2 times.  Returns how many, at most 3. */
static int scaling_variants(const rope_cfg *c0, rope_variant *v)
{
	int n = 0;

	if (!c0->none) {
		v[n] = (rope_variant){*c0, TB_CAUSE_NOPE_LAYERS, "", 0};
		v[n].cfg.none = true;
		snprintf(v[n++].name, sizeof v->name, "no rotation (a NoPE layer)");
	}
	for (int times = 0; times <= 2 && c0->gain; times += 2) {
		v[n] = (rope_variant){*c0, TB_CAUSE_YARN_SCALING, "", 0};
		v[n].cfg.gain = times ? c0->gain * c0->gain : 0;
		snprintf(v[n++].name, sizeof v->name, "its attention factor %.4g applied %d times", c0->gain, times);
	}
	return n;
}

/* RoPE with positions times 10^x (a linear scaling factor 10^-x). */
static int pos_scale_residual(void *ctx, double x, double *rel, tb_err *err)
{
	theta_fit *t = ctx;

	(void)err;
	t->c->pos_scale = pow(10, x);
	*rel = rope_residual(t->s, t->c, t->rows, t->nrows, NULL);
	return 0;
}

/* x to a number of significant digits. */
static double round_to(double x, int digits)
{
	double unit = pow(10, floor(log10(fabs(x))) - digits + 1);

	return unit * nearbyint(x / unit);
}

/* Configs say theta 1e6 and factor 8, and a table read off a half-width
 * dump gives 9.93e5 and 8.002: c's theta and linear factor rounded to 1, 2
 * or 3 significant digits, whichever fits best (the fit itself too). */
static void round_line(const side4 *s, rope_cfg *c, const int64_t *rows, int nrows)
{
	double theta = c->theta, factor = 1 / c->pos_scale, best = rope_residual(s, c, rows, nrows, NULL);
	rope_cfg t = *c;

	for (int dt = 1; dt <= 3; dt++)
		for (int df = 1; df <= 3; df++) {
			double rel;
			t.theta = round_to(theta, dt);
			t.pos_scale = 1 / round_to(factor, df);
			rel = rope_residual(s, &t, rows, nrows, NULL);
			if (rel < best) {
				best = rel;
				*c = t;
			}
		}
}

/* The candidate's own RoPE as a line (rope_line: theta and a linear
 * factor) against the reference's: another theta with the same scaling
 * (rope-theta), another scaling (rope-scaling; against a YaRN reference,
 * its ramp left out: yarn-scaling), or a rotation where the reference has
 * none (nope-layers).  False when the candidate's table is no line or the
 * same as the reference's. */
static bool own_line_variant(const side4 *s, const rope_cfg *c0, const rope_cfg *own, const int64_t *rows, int nrows,
			     rope_variant *t)
{
	int half = own->rot / 2;
	double theta, factor, theta0 = c0->theta, factor0 = 1 / or1(c0->pos_scale);

	if (own->none || rope_line(own, 0, half, &theta, &factor) > LINE_FIT)
		return false;
	if (c0->measured && rope_line(c0, 0, half, &theta0, &factor0) > LINE_FIT)
		factor0 = NAN; /* the reference's table is no line: llama3, YaRN */
	*t = (rope_variant){{.interleaved = own->interleaved, .sign = 1, .rot = own->rot, .theta = theta,
			     .pos_scale = 1 / factor, .gain = c0->none ? own->gain : c0->gain},
			    TB_CAUSE_ROPE_SCALING, "", 0};
	round_line(s, &t->cfg, rows, nrows);
	theta = t->cfg.theta;
	factor = 1 / t->cfg.pos_scale;
	t->rel = rope_residual(s, &t->cfg, rows, nrows, NULL);
	if (c0->none) {
		t->cause = TB_CAUSE_NOPE_LAYERS;
		snprintf(t->name, sizeof t->name, "RoPE (theta %.3g) where the reference has none", theta);
	} else if (fabs(log(factor / factor0)) < 0.01) {
		/* fit_theta's round theta names a plain reference's */
		if (!c0->measured || fabs(log(theta / theta0)) < 0.01)
			return false;
		t->cause = TB_CAUSE_ROPE_THETA;
		snprintf(t->name, sizeof t->name, "theta %.3g (the reference: %.3g), the same scaling", theta, theta0);
	} else if (c0->gain) {
		t->cause = TB_CAUSE_YARN_SCALING;
		snprintf(t->name, sizeof t->name, "YaRN without its ramp: every frequency divided by %.3g", factor);
	} else if (fabs(log(factor)) < 0.01) {
		snprintf(t->name, sizeof t->name, "theta %.3g without the reference's scaling", theta);
	} else {
		snprintf(t->name, sizeof t->name, "theta %.3g with linear scaling x%.3g", theta, factor);
	}
	return true;
}

/* The candidate's own table (rope_measure), which no line or one factor
 * explains, against the reference's: the pairs that turn otherwise by
 * more than LINE_FIT at the last position read, and by how much.  A band
 * of slower pairs, the two fastest kept, is against YaRN another ramp
 * (yarn-scaling), else other scaling factors or bounds (llama3's
 * low_freq_factor and high_freq_factor, original_max_position_embeddings:
 * rope-scaling).  False when no pair turns otherwise, or the second
 * fastest does: a theta changes every pair but the first, and one changed
 * on a scaled table moves which pairs scale too, so that a theta and a
 * scaling changed look alike. */
static bool own_table_variant(const rope_cfg *c0, rope_variant *t)
{
	const rope_cfg *own = &t->cfg;
	int lo = -1, hi = -1;
	double rmin = INFINITY, rmax = 0;

	for (int i = 0; i < own->rot / 2; i++) {
		double ir = rope_inv(c0, i), ic = own->inv[i];
		if (fabs(ic - ir) * own->span <= LINE_FIT)
			continue;
		if (lo < 0)
			lo = i;
		hi = i;
		if (fabs(ir) * own->span >= LINE_MIN_ANGLE && ic / ir > 0) {
			rmin = fmin(rmin, ic / ir);
			rmax = fmax(rmax, ic / ir);
		}
	}
	if (lo < 2)
		return false;
	t->cause = c0->gain ? TB_CAUSE_YARN_SCALING : TB_CAUSE_ROPE_SCALING;
	if (rmax > 0)
		snprintf(t->name, sizeof t->name, "its own frequencies: pairs %d-%d turn x%.3g-%.3g", lo, hi, rmin,
			 rmax);
	else
		snprintf(t->name, sizeof t->name, "its own frequencies: pairs %d-%d turn otherwise", lo, hi);
	return true;
}

/* The fitted scaling variants, when no cheaper one reproduced the
 * candidate: the candidate's own table as a line (own_line_variant), an
 * attention factor the reference has none of, and its positions scaled by
 * one factor (linear scaling missing, extra or another; fitted as
 * fit_theta fits theta, on 1/128..128).  Each replaces *best when it fits
 * better. */
static void fitted_scaling(const side4 *s, const rope_cfg *c0, const int64_t *rows, int nrows, double floor,
			   rope_variant *best)
{
	rope_cfg own = {.interleaved = c0->interleaved}, c = *c0;
	int64_t early[8];
	int ne = 0;
	double x = 0, rel;
	rope_variant t;

	rope_measure(s, &own, rows, nrows);
	if (own_line_variant(s, c0, &own, rows, nrows, &t) && t.rel < best->rel)
		*best = t;
	if (!c0->gain && own.gain) {
		t = (rope_variant){*c0, TB_CAUSE_YARN_SCALING, "", 0};
		t.cfg.gain = own.gain;
		t.rel = rope_residual(s, &t.cfg, rows, nrows, NULL);
		snprintf(t.name, sizeof t.name, "an attention factor %.4g the reference does not apply", own.gain);
		if (t.rel < best->rel)
			*best = t;
	}
	if (best->rel <= floor || c0->none)
		return;
	for (int k = 0; k < nrows && ne < 8; k++)
		if (rows[k] >= 1 && rows[k] <= 8)
			early[ne++] = rows[k];
	theta_fit fe = {s, &c, early, ne}, fa = {s, &c, rows, nrows};
	tb_fit_grid_min(pos_scale_residual, &fe, -2.1, 0.05, 85, &x, NULL);
	tb_fit_golden_min(pos_scale_residual, &fe, x - 0.05, x + 0.05, 20, &x, &rel, NULL);
	tb_fit_golden_min(pos_scale_residual, &fa, x - 0.002, x + 0.002, 16, &x, &rel, NULL);
	if (fabs(x) > 0.005 && rel < best->rel) {
		t = (rope_variant){c, TB_CAUSE_ROPE_SCALING, "", rel};
		t.cfg.pos_scale = pow(10, x);
		snprintf(t.name, sizeof t.name, "positions times %.4g: another linear scaling factor", pow(10, x));
		*best = t;
	}
	if (best->rel > floor && !own.none && own.rot == c0->rot) {
		t = (rope_variant){own, TB_CAUSE_ROPE_SCALING, "", 0};
		t.rel = rope_residual(s, &own, rows, nrows, NULL);
		if (t.rel < best->rel && own_table_variant(c0, &t))
			*best = t;
	}
}

/* Whether side s tells c's theta from one 0.1% larger (for
 * tb_replay_theta_change). */
static bool theta_resolved(const side4 *s, const rope_cfg *c, const int64_t *rows, int nrows)
{
	rope_cfg t = *c;

	t.theta *= 1.001;
	return rope_residual(s, &t, rows, nrows, NULL) > 1.01 * rope_residual(s, c, rows, nrows, NULL);
}

/* The candidate's variants: the reference's configuration with one
 * thing changed.  Returns the best one. */
static rope_variant rope_candidate(const side4 *ref, const side4 *s, const rope_cfg *c0, const int64_t *rows,
				   int nrows, double floor, bool can_transpose)
{
	rope_variant v[20], best;
	int n = 0, hd = s->v[0].hd;

	v[n] = (rope_variant){*c0, TB_CAUSE_ROPE_STYLE, "", 0};
	v[n].cfg.interleaved = !c0->interleaved;
	snprintf(v[n++].name, sizeof v->name, "%s", c0->interleaved ? "rotate-half pairs" : "interleaved pairs (2i, 2i+1)");
	v[n] = (rope_variant){*c0, TB_CAUSE_ROTATE_HALF_SIGN, "", 0};
	v[n].cfg.sign = -c0->sign;
	snprintf(v[n++].name, sizeof v->name, "%s", "rotation by -theta (rotate_half's sign)");
	for (int frac = 1; frac <= 4 && !c0->measured && !c0->none; frac *= 2)
		if (hd / frac != c0->rot && hd % (2 * frac) == 0) {
			v[n] = (rope_variant){*c0, TB_CAUSE_PARTIAL_ROPE, "", 0};
			v[n].cfg.rot = hd / frac;
			snprintf(v[n++].name, sizeof v->name, "rotary on %d of %d channels", hd / frac, hd);
		}
	if (can_transpose) {
		for (unsigned t = 1; t <= 3; t += 2) {
			v[n] = (rope_variant){*c0, TB_CAUSE_ATTENTION_LAYOUT, "", 0};
			v[n].cfg.transposed = c0->transposed ^ t;
			snprintf(v[n++].name, sizeof v->name, "%s viewed as [head_dim, heads]", t == 1 ? "q" : "q and k");
		}
	}
	v[n] = (rope_variant){*c0, TB_CAUSE_QK_NORM, "", 0};
	v[n].cfg.head_norm = !c0->head_norm;
	snprintf(v[n++].name, sizeof v->name, "%s", c0->head_norm ? "no norm on q and k" : "an RMSNorm per head on q and k");
	int64_t from = first_missed_row(s, c0, floor);
	for (int wrap = 0; wrap < 2 && from > 1; wrap++) {
		v[n] = (rope_variant){*c0, TB_CAUSE_DECODE_POSITION, "", 0};
		v[n].cfg.table = from;
		v[n].cfg.wrap = wrap;
		snprintf(v[n++].name, sizeof v->name, "a RoPE table of %lld positions%s", (long long)from,
			 wrap ? ", read modulo its length" : "");
	}
	n += scaling_variants(c0, v + n);
	for (int i = 0; i < n; i++)
		v[i].rel = rope_residual(s, &v[i].cfg, rows, nrows, NULL);
	best = v[0];
	for (int i = 1; i < n; i++)
		if (v[i].rel < best.rel)
			best = v[i];
	if (best.rel > floor && !c0->measured && !c0->none) {
		rope_variant t = {*c0, TB_CAUSE_ROPE_THETA, "", 0};
		t.rel = fit_theta(s, &t.cfg, rows, nrows);
		if (fabs(log10(t.cfg.theta / c0->theta)) > 0.01 && t.rel < best.rel) {
			bool up = t.cfg.theta > c0->theta;
			t.cause = tb_replay_theta_change(t.cfg.theta, c0->theta, t.cfg.rot, s->v[2].S,
							 theta_resolved(up ? s : ref, up ? &t.cfg : c0, rows, nrows),
							 t.name, sizeof t.name);
			best = t;
		}
	}
	if (best.rel > floor)
		fitted_scaling(s, c0, rows, nrows, floor, &best);
	return best;
}

/* A reference without RoPE fits at every head dim: the one whose pairs
 * the candidate's own table (rope_measure) reproduces best, on a few rows;
 * hd when none does better. */
static int rotating_head_dim(side4 *cand, const attn_plan *pl, const int *same, int hd)
{
	double best = INFINITY;
	int pick = hd;

	for (int k = 0; k < pl->nhd; k++) {
		rope_cfg c = {0};
		double rel;
		if (!side_view(cand, pl->S, pl->hds[k], same))
			continue;
		rope_measure(cand, &c, pl->probe, pl->nprobe);
		if ((rel = rope_residual(cand, &c, pl->probe, pl->nprobe, NULL)) < best) {
			best = rel;
			pick = pl->hds[k];
		}
	}
	return pick;
}

int tb_replay_rope(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	int layer = in->target->cell.layer;
	/* the side's order: q, k before RoPE, q, k after it; before and after hold as many heads */
	const tb_pair *p[4] = {tb_replay_pair(in, layer, TB_TAP_ATTN_Q), tb_replay_pair(in, layer, TB_TAP_ATTN_K),
			       tb_replay_pair(in, layer, TB_TAP_ATTN_Q_ROPE), tb_replay_pair(in, layer, TB_TAP_ATTN_K_ROPE)};
	static const int same[4] = {2, 3, -1, -1};
	attn_plan pl;
	int hd = 0;
	side4 ref, cand;
	tb_replay_sides loaded[4];
	rope_cfg c0 = {0};
	double floor, ref_rel = INFINITY;
	char ref_name[128];
	bool finite;

	if (!plan(in, p,
		  "replaying RoPE needs attn.q and attn.k before RoPE and attn.q_rope and attn.k_rope after it, on both "
		  "sides (mkdemo --replay; dump_hf.py --replay)",
		  out, &pl))
		return 0;
	floor = fmax(tb_replay_floor(p[2]->ref, p[2]->cand, ROPE_F32_FLOOR, HALF_ROUNDINGS),
		     tb_replay_floor(p[3]->ref, p[3]->cand, ROPE_F32_FLOOR, HALF_ROUNDINGS));
	if (tb_replay_load_pairs(p, 4, loaded, &finite, err) < 0)
		return -1;
	side_of(&ref, p, loaded, false);
	side_of(&cand, p, loaded, true);
	if (!finite) {
		snprintf(out->note, sizeof out->note, "no replay from non-finite values");
		goto done;
	}
	/* the head dim: the one the usual RoPEs fit best on a few rows */
	for (int k = 0; k < pl.nhd; k++) {
		double rel;
		if (!side_view(&ref, pl.S, pl.hds[k], same) ||
		    (rel = rope_reference(&ref, &c0, pl.probe, pl.nprobe, floor, false)) >= ref_rel)
			continue;
		ref_rel = rel;
		hd = pl.hds[k];
	}
	if (hd && side_view(&ref, pl.S, hd, same))
		ref_rel = rope_reference(&ref, &c0, pl.rows, pl.nrows, floor, true);
	if (hd && c0.none)
		c0.rot = hd = rotating_head_dim(&cand, &pl, same, hd);
	if (!hd || !side_view(&ref, pl.S, hd, same) || !side_view(&cand, pl.S, hd, same)) {
		snprintf(out->note, sizeof out->note, "%s",
			 hd ? "the candidate's q and k differ in shape from the reference's: no RoPE replay"
			    : "attn.q, attn.k, attn.q_rope and attn.k_rope do not hold the same positions and heads: no RoPE replay");
		goto done;
	}
	out->tried = true;
	rope_variant best = rope_candidate(&ref, &cand, &c0, pl.rows, pl.nrows, floor, !ref.v[0].hsd && !cand.v[0].hsd);
	describe_rope(&c0, hd, ref_name, sizeof ref_name);
	tb_replay_decide(in, out, floor,
			 &(tb_replay_fit){ref_name, ref_rel, rope_residual(&cand, &c0, pl.rows, pl.nrows, NULL), best.name,
					  best.cause, best.rel, 0});
done:
	tb_replay_unload(loaded, 4);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Attention core: attn.q_rope, attn.k_rope, attn.v -> attn.core        */

typedef enum mask_kind { CAUSAL, FULL, BEFORE, AHEAD, N_MASKS } mask_kind;

static const char *const mask_names[N_MASKS] = {
	[CAUSAL] = "causal mask",
	[FULL] = "no causal mask",
	[BEFORE] = "causal mask without the diagonal (j < i)",
	[AHEAD] = "causal mask one position ahead (j <= i + 1)",
};

/* The KV caches a decode step may read K and V back from, at scale 1
 * (vLLM's kv_cache_dtype fp8 and fp8_e5m2 without calibrated scales): a
 * saturating cast of every key and value (the step's own included). */
static const struct {
	tb_dtype dt;
	const char *name;
} kv_caches[] = {{TB_DT_F8_E4M3FN, "fp8 e4m3"}, {TB_DT_F8_E5M2, "fp8 e5m2"}};
#define N_KV_CACHES (int)(sizeof kv_caches / sizeof *kv_caches)

typedef struct core_cfg {
	double scale;
	mask_kind mask;
	int64_t window; /* keys i - window + 1 .. i; 0: none */
	bool tile;      /* q head h reads kv head h % kv_heads, else h / group */
	double softcap; /* scores = cap * tanh(scores / cap); 0: none */
	const double *sinks; /* a learned sink logit per q head, one more column in each softmax (gpt-oss); NULL: none */
	int cache;          /* rows from cache_from on read K and V from kv_caches[cache - 1] (decode steps); 0: none */
	int64_t cache_from;
} core_cfg;

/* One side's q (after RoPE), k (after RoPE), v and attention output, and
 * what the replay computes from them on the sampled rows. */
typedef struct core_side {
	side4 in;
	const int64_t *rows;
	int nrows;
	float *scores[2]; /* [nh][nrows][S] q.k for each kv mapping (repeat, tile); NULL until needed */
	float *p;         /* [nrows][S] one head's attention weights */
	float *pred;      /* [nrows][nh * hd] the last prediction */
	double *row_dd;   /* [nrows] its squared error, row by row */
	double *sinks;    /* [nh] the sink logits fitted on this side, or NULL */
} core_side;

/* Drop what the replay computed (the loaded tensors are not the side's). */
static void core_side_reset(core_side *s)
{
	free(s->scores[0]);
	free(s->scores[1]);
	free(s->p);
	free(s->pred);
	free(s->row_dd);
	free(s->sinks);
	s->scores[0] = s->scores[1] = s->p = s->pred = NULL;
	s->row_dd = s->sinks = NULL;
}

/* Ready the side, viewed as heads of hd channels, for replays on rows:
 * false when its tensors are not one attention of such heads. */
static int core_side_view(core_side *s, int64_t S, int hd, const int64_t *rows, int nrows, bool *fits, tb_err *err)
{
	static const int same[4] = {3, 2, -1, -1}; /* q and output, k and v hold as many heads */

	core_side_reset(s);
	*fits = side_view(&s->in, S, hd, same) && s->in.v[1].nh > 0 && s->in.v[0].nh % s->in.v[1].nh == 0;
	if (!*fits)
		return 0;
	s->rows = rows;
	s->nrows = nrows;
	s->p = malloc((size_t)nrows * S * sizeof *s->p);
	s->pred = malloc((size_t)nrows * s->in.v[0].nh * hd * sizeof *s->pred);
	s->row_dd = malloc((size_t)nrows * sizeof *s->row_dd);
	if (!s->p || !s->pred || !s->row_dd)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	return 0;
}

static int kv_head(const core_side *s, const core_cfg *c, int h)
{
	int nh = s->in.v[0].nh, nkv = s->in.v[1].nh;

	return c->tile ? h % nkv : h / (nh / nkv);
}

/* The raw scores q.k of every head of rows[0..R) against the keys k, for
 * c's kv mapping: out [nh][R][S]; -1 on allocation failure. */
static int head_scores(const core_side *s, const core_cfg *c, const tb_heads_view *k, const int64_t *rows, int R,
		       float *out, tb_err *err)
{
	const tb_heads_view *q = &s->in.v[0];
	int hd = q->hd;
	int64_t S = q->S;
	float *qr = malloc((size_t)R * hd * sizeof *qr);

	if (!qr)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	for (int h = 0; h < q->nh; h++) {
		for (int r = 0; r < R; r++)
			memcpy(qr + (size_t)r * hd, tb_heads_row(q, rows[r], h), (size_t)hd * sizeof *qr);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, (int)S, hd, 1.0f, qr, hd,
			    tb_heads_row(k, 0, kv_head(s, c, h)), tb_heads_stride(k), 0.0f, out + (size_t)h * R * S,
			    (int)S);
	}
	free(qr);
	return 0;
}

/* The raw scores of every head on the sampled rows, for a kv mapping,
 * kept for the side's later replays; -1 on allocation failure. */
static int core_scores(core_side *s, bool tile, tb_err *err)
{
	core_cfg c = {.tile = tile};

	if (s->scores[tile])
		return 0;
	s->scores[tile] = malloc((size_t)s->in.v[0].nh * s->nrows * s->in.v[0].S * sizeof(float));
	if (!s->scores[tile])
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	return head_scores(s, &c, &s->in.v[1], s->rows, s->nrows, s->scores[tile], err);
}

/* What the rows that read c's cache see: K and V through it (copies, in
 * kc and vc) and their scores, [nh][R - r0][S] in *sc, for the sampled
 * rows from r0 on; *r0 = nrows when c reads no cache. */
typedef struct cache_read {
	int r0;
	float *k, *v, *sc;
	tb_heads_view kc, vc;
} cache_read;

static void cache_read_free(cache_read *cr)
{
	free(cr->k);
	free(cr->v);
	free(cr->sc);
}

static int cache_read_of(const core_side *s, const core_cfg *c, cache_read *cr, tb_err *err)
{
	const tb_heads_view *q = &s->in.v[0];
	size_t n = (size_t)q->S * s->in.v[1].nh * q->hd;

	*cr = (cache_read){s->nrows, NULL, NULL, NULL, s->in.v[1], s->in.v[2]};
	if (!c->cache)
		return 0;
	for (cr->r0 = 0; cr->r0 < s->nrows && s->rows[cr->r0] < c->cache_from; cr->r0++)
		;
	cr->k = malloc(n * sizeof *cr->k);
	cr->v = malloc(n * sizeof *cr->v);
	cr->sc = malloc((size_t)q->nh * (s->nrows - cr->r0) * q->S * sizeof *cr->sc);
	if (!cr->k || !cr->v || !cr->sc) {
		cache_read_free(cr);
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		cr->k[i] = tb_f32_round_f8(s->in.v[1].v[i], kv_caches[c->cache - 1].dt);
		cr->v[i] = tb_f32_round_f8(s->in.v[2].v[i], kv_caches[c->cache - 1].dt);
	}
	cr->kc.v = cr->k;
	cr->vc.v = cr->v;
	if (head_scores(s, c, &cr->kc, s->rows + cr->r0, s->nrows - cr->r0, cr->sc, err) < 0) {
		cache_read_free(cr);
		return -1;
	}
	return 0;
}

/* The keys row i attends to under c: [*lo, *hi], empty when *lo > *hi. */
static void key_range(const core_cfg *c, int64_t i, int64_t S, int64_t *lo, int64_t *hi)
{
	*lo = 0;
	*hi = c->mask == FULL ? S - 1 : c->mask == BEFORE ? i - 1 : c->mask == AHEAD && i + 1 < S ? i + 1 : i;
	if (c->window > 0 && i - c->window + 1 > 0)
		*lo = i - c->window + 1;
}

static double score(const core_cfg *c, float raw)
{
	double x = raw * c->scale;

	return c->softcap > 0 ? c->softcap * tanh(x / c->softcap) : x;
}

/* rel_l2 of c's attention output against the side's on the sampled rows;
 * perm (NULL: identity) says which predicted head each output head holds.
 * The prediction stays in s->pred, its squared error by row in s->row_dd. */
static int core_residual(core_side *s, const core_cfg *c, const int *perm, double *rel, tb_err *err)
{
	const tb_heads_view *q = &s->in.v[0], *o = &s->in.v[3];
	int R = s->nrows, nh = q->nh, hd = q->hd;
	int64_t S = q->S;
	double dd = 0, yy = 0;
	cache_read cr;

	if (core_scores(s, c->tile, err) < 0 || cache_read_of(s, c, &cr, err) < 0)
		return -1;
	for (int h = 0; h < nh; h++) {
		for (int r = 0; r < R; r++) {
			const float *sc = r < cr.r0 ? s->scores[c->tile] + ((size_t)h * R + r) * S
						    : cr.sc + ((size_t)h * (R - cr.r0) + (r - cr.r0)) * S;
			float *p = s->p + (size_t)r * S;
			int64_t lo, hi;
			double mx = -INFINITY, sum = 0;
			key_range(c, s->rows[r], S, &lo, &hi);
			memset(p, 0, (size_t)S * sizeof *p);
			for (int64_t j = lo; j <= hi; j++)
				mx = fmax(mx, score(c, sc[j]));
			if (c->sinks) {
				mx = fmax(mx, c->sinks[h]);
				sum = exp(c->sinks[h] - mx);
			}
			for (int64_t j = lo; j <= hi; j++)
				sum += (p[j] = (float)exp(score(c, sc[j]) - mx));
			for (int64_t j = lo; j <= hi; j++)
				p[j] = (float)(p[j] / sum);
		}
		/* the rows before r0 read V as computed, the others through the cache */
		for (int part = 0; part < 2; part++) {
			int lo = part ? cr.r0 : 0, n = part ? R - cr.r0 : cr.r0;
			const tb_heads_view *v = part ? &cr.vc : &s->in.v[2];
			if (n > 0)
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, hd, (int)S, 1.0f,
					    s->p + (size_t)lo * S, (int)S, tb_heads_row(v, 0, kv_head(s, c, h)),
					    tb_heads_stride(v), 0.0f, s->pred + ((size_t)lo * nh + h) * hd, nh * hd);
		}
	}
	cache_read_free(&cr);
	for (int r = 0; r < R; r++) {
		s->row_dd[r] = 0;
		for (int h = 0; h < nh; h++) {
			const float *y = tb_heads_row(o, s->rows[r], h), *x = s->pred + ((size_t)r * nh + (perm ? perm[h] : h)) * hd;
			for (int d = 0; d < hd; d++) {
				double e = (double)x[d] - y[d];
				s->row_dd[r] += e * e;
				yy += (double)y[d] * y[d];
			}
		}
		dd += s->row_dd[r];
	}
	*rel = tb_rel_l2(dd, yy);
	return 0;
}

/* The window that best explains the side's output under c: for a few late
 * rows, every first key lo is tried at once by summing the keys from the
 * row back (a running softmax); 0 when no row shows a window. */
static int64_t fit_window(core_side *s, const core_cfg *c)
{
	const tb_heads_view *q = &s->in.v[0], *v = &s->in.v[2], *o = &s->in.v[3];
	int R = s->nrows, nh = q->nh, hd = q->hd;
	int64_t S = q->S;
	double num[MAX_HD];

	for (int r = R - 1; r >= 0 && r >= R - 4; r--) {
		int64_t i = s->rows[r], best = 0;
		double *err = calloc((size_t)i + 1, sizeof *err);
		if (!err || i < 2) {
			free(err);
			continue;
		}
		for (int h = 0; h < nh; h++) {
			const float *sc = s->scores[c->tile] + ((size_t)h * R + r) * S, *y = tb_heads_row(o, i, h);
			double mx = -INFINITY, den = 0;
			for (int64_t j = 0; j <= i; j++)
				mx = fmax(mx, score(c, sc[j]));
			memset(num, 0, (size_t)hd * sizeof *num);
			for (int64_t lo = i; lo >= 0; lo--) {
				const float *vj = tb_heads_row(v, lo, kv_head(s, c, h));
				double w = exp(score(c, sc[lo]) - mx);
				den += w;
				for (int d = 0; d < hd; d++) {
					num[d] += w * vj[d];
					double e = num[d] / den - y[d];
					err[lo] += e * e;
				}
			}
		}
		for (int64_t lo = 1; lo <= i; lo++)
			if (err[lo] < err[best])
				best = lo;
		free(err);
		if (best > 0)
			return i - best + 1;
	}
	return 0;
}

/* Which predicted head each of the side's output heads matches best;
 * true when that is a permutation other than the identity. */
static bool fit_permutation(const core_side *s, int *perm)
{
	int R = s->nrows, nh = s->in.v[0].nh, hd = s->in.v[0].hd;
	bool moved = false;
	unsigned char *taken = calloc((size_t)nh, 1);

	if (!taken)
		return false;
	for (int h = 0; h < nh; h++) {
		double best = INFINITY;
		for (int g = 0; g < nh; g++) {
			double dd = 0;
			for (int r = 0; r < R; r++) {
				const float *y = tb_heads_row(&s->in.v[3], s->rows[r], h), *x = s->pred + ((size_t)r * nh + g) * hd;
				for (int d = 0; d < hd; d++)
					dd += ((double)x[d] - y[d]) * ((double)x[d] - y[d]);
			}
			if (dd < best) {
				best = dd;
				perm[h] = g;
			}
		}
		moved |= perm[h] != h;
		if (taken[perm[h]]++) {
			free(taken);
			return false;
		}
	}
	free(taken);
	return moved;
}

/* The sink logit of each head that fits the side's output under c (which
 * has none): a sink scales row i's output by Z / (Z + e^sink), Z the sum of
 * its keys' exp(score); read off the row it shrinks most (row 0, one key,
 * in a causal attention), where it is best measured.  Into s->sinks; false
 * when no head shrinks (no sinks) or out of memory (then the variant is
 * not tried: the others still are). */
static bool fit_sinks(core_side *s, const core_cfg *c)
{
	tb_err err;
	const tb_heads_view *q = &s->in.v[0], *v = &s->in.v[2], *o = &s->in.v[3];
	int R = s->nrows, nh = q->nh, hd = q->hd;
	int64_t S = q->S;
	bool any = false;

	free(s->sinks);
	s->sinks = malloc((size_t)nh * sizeof *s->sinks);
	if (!s->sinks || core_scores(s, c->tile, &err) < 0) {
		free(s->sinks);
		s->sinks = NULL;
		return false;
	}
	for (int h = 0; h < nh; h++) {
		const float *sc = s->scores[c->tile] + (size_t)h * R * S, *vh = tb_heads_row(v, 0, kv_head(s, c, h));
		double least = 1, sink = -INFINITY;
		for (int r = 0; r < R; r++) {
			const float *y = tb_heads_row(o, s->rows[r], h);
			int64_t lo, hi;
			double mx = -INFINITY, z = 0, uy = 0, uu = 0, u[MAX_HD] = {0};
			key_range(c, s->rows[r], S, &lo, &hi);
			for (int64_t j = lo; j <= hi; j++)
				mx = fmax(mx, score(c, sc[(size_t)r * S + j]));
			for (int64_t j = lo; j <= hi; j++) {
				double w = exp(score(c, sc[(size_t)r * S + j]) - mx);
				z += w;
				for (int d = 0; d < hd; d++)
					u[d] += w * vh[(size_t)j * tb_heads_stride(v) + d];
			}
			for (int d = 0; d < hd && z > 0; d++) {
				u[d] /= z;
				uy += u[d] * y[d];
				uu += u[d] * u[d];
			}
			if (uu > 0 && uy / uu > 0 && uy / uu < least) {
				least = uy / uu;
				sink = log(z * (1 / least - 1)) + mx;
			}
		}
		s->sinks[h] = sink;
		any |= isfinite(sink);
	}
	if (!any) {
		free(s->sinks);
		s->sinks = NULL;
	}
	return any;
}

typedef struct core_variant {
	core_cfg cfg;
	tb_cause_id cause;
	char name[80];
	double rel;
	bool permuted;
} core_variant;

static void describe_core(const core_cfg *c, char *buf, size_t size)
{
	int n = snprintf(buf, size, "scale %.3g, %s", c->scale, mask_names[c->mask]);

	if (c->window && n >= 0 && (size_t)n < size)
		n += snprintf(buf + n, size - (size_t)n, ", window %lld", (long long)c->window);
	if (c->softcap > 0 && n >= 0 && (size_t)n < size)
		n += snprintf(buf + n, size - (size_t)n, ", soft-cap %g", c->softcap);
	if (c->sinks && n >= 0 && (size_t)n < size)
		n += snprintf(buf + n, size - (size_t)n, ", sinks");
	if (c->cache && n >= 0 && (size_t)n < size)
		snprintf(buf + n, size - (size_t)n, ", an %s KV cache from position %lld", kv_caches[c->cache - 1].name,
			 (long long)c->cache_from);
}

/* Does position `row` of the side read K and V through cache number
 * `cache` rather than as c0 computes them?  Its one row replayed both ways. */
static int reads_cache(const core_side *s, const core_cfg *c0, int cache, int64_t row, bool *yes, tb_err *err)
{
	core_side one = {.in = s->in};
	core_cfg c = *c0;
	double rel, dd0;
	bool fits;
	int rc = core_side_view(&one, s->in.v[0].S, s->in.v[0].hd, &row, 1, &fits, err);

	c.cache = cache;
	c.cache_from = 0;
	*yes = false;
	if (rc == 0 && fits && (rc = core_residual(&one, c0, NULL, &rel, err)) == 0) {
		dd0 = one.row_dd[0];
		rc = core_residual(&one, &c, NULL, &rel, err);
		*yes = rc == 0 && one.row_dd[0] < dd0;
	}
	core_side_reset(&one);
	return rc;
}

/* The KV caches the side's later rows may read (kv-cache): for each, every
 * sampled row replayed through it, and the first row that reads it where
 * that leaves the least error, the rows before it read as computed (a
 * prefill, then decode steps); between two sampled rows, the first that
 * reads it by bisection.  Into v[*n..]. */
static int cache_variants(core_side *s, const core_cfg *c0, core_variant *v, int *n, tb_err *err)
{
	int R = s->nrows;
	double rel, *dd0 = malloc((size_t)R * sizeof *dd0);

	if (!dd0)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	if (core_residual(s, c0, NULL, &rel, err) < 0)
		goto fail;
	memcpy(dd0, s->row_dd, (size_t)R * sizeof *dd0);
	for (int i = 0; i < N_KV_CACHES; i++) {
		core_cfg c = *c0;
		double cost = 0, least;
		int from = 0;
		c.cache = i + 1;
		c.cache_from = 0;
		if (core_residual(s, &c, NULL, &rel, err) < 0)
			goto fail;
		for (int r = 0; r < R; r++)
			cost += s->row_dd[r];
		least = cost;
		/* cost: the error with the rows before r as computed, the others through the cache */
		for (int r = 0; r < R; r++) {
			cost += dd0[r] - s->row_dd[r];
			if (cost < least) {
				least = cost;
				from = r + 1;
			}
		}
		if (from == R)
			continue;
		c.cache_from = s->rows[from];
		for (int64_t lo = from ? s->rows[from - 1] : c.cache_from - 1; c.cache_from - lo > 1;) {
			int64_t mid = lo + (c.cache_from - lo) / 2;
			bool yes;
			if (reads_cache(s, c0, c.cache, mid, &yes, err) < 0)
				goto fail;
			if (yes)
				c.cache_from = mid;
			else
				lo = mid;
		}
		v[*n] = (core_variant){c, TB_CAUSE_KV_CACHE, "", 0, false};
		snprintf(v[(*n)++].name, sizeof v->name, "K and V through an %s cache from position %lld on",
			 kv_caches[i].name, (long long)c.cache_from);
	}
	free(dd0);
	return 0;
fail:
	free(dd0);
	return -1;
}

/* The side's variants of c0 that change one thing; returns how many, or -1. */
static int core_variants(core_side *s, const core_cfg *c0, core_variant *v, tb_err *err)
{
	int n = 0, hd = s->in.v[0].hd, nh = s->in.v[0].nh, nkv = s->in.v[1].nh;
	const double scales[] = {1 / sqrt(hd), 1.0 / hd, 1};
	char ref[32];

	snprintf(ref, sizeof ref, "%.3g", c0->scale);
	for (size_t i = 0; i < sizeof scales / sizeof *scales; i++)
		if (fabs(scales[i] / c0->scale - 1) > 1e-6) {
			v[n] = (core_variant){*c0, TB_CAUSE_SOFTMAX_SCALE, "", 0, false};
			v[n].cfg.scale = scales[i];
			snprintf(v[n++].name, sizeof v->name, "softmax scale %.3g (the reference: %s)", scales[i], ref);
		}
	for (int m = 0; m < N_MASKS; m++)
		if ((mask_kind)m != c0->mask) {
			v[n] = (core_variant){*c0, TB_CAUSE_ATTENTION_MASK, "", 0, false};
			v[n].cfg.mask = (mask_kind)m;
			snprintf(v[n++].name, sizeof v->name, "%s", mask_names[m]);
		}
	int64_t w = fit_window(s, c0);
	if (w && w != c0->window) {
		v[n] = (core_variant){*c0, TB_CAUSE_SLIDING_WINDOW, "", 0, false};
		v[n].cfg.window = w;
		snprintf(v[n++].name, sizeof v->name, "a sliding window of %lld positions", (long long)w);
	}
	if (c0->window) {
		v[n] = (core_variant){*c0, TB_CAUSE_SLIDING_WINDOW, "", 0, false};
		v[n].cfg.window = 0;
		snprintf(v[n++].name, sizeof v->name, "no sliding window (the reference: %lld)", (long long)c0->window);
	}
	if (nkv > 1 && nkv < nh) {
		v[n] = (core_variant){*c0, TB_CAUSE_GQA_REPEAT, "", 0, false};
		v[n].cfg.tile = !c0->tile;
		snprintf(v[n++].name, sizeof v->name, "%s", c0->tile ? "kv heads repeated (h / group)" : "kv heads tiled (h % kv_heads)");
	}
	for (double cap = 50; cap >= 30; cap -= 20)
		if (cap != c0->softcap) {
			v[n] = (core_variant){*c0, TB_CAUSE_SOFTMAX_SCALE, "", 0, false};
			v[n].cfg.softcap = cap;
			snprintf(v[n++].name, sizeof v->name, "logit soft-capping at %g", cap);
		}
	if (c0->softcap > 0) {
		v[n] = (core_variant){*c0, TB_CAUSE_SOFTMAX_SCALE, "", 0, false};
		v[n].cfg.softcap = 0;
		snprintf(v[n++].name, sizeof v->name, "no logit soft-capping (the reference: %g)", c0->softcap);
	}
	if (c0->sinks) {
		core_cfg bare = *c0;
		v[n] = (core_variant){*c0, TB_CAUSE_ATTENTION_SINK, "", 0, false};
		v[n].cfg.sinks = NULL;
		snprintf(v[n++].name, sizeof v->name, "no attention sinks (the reference: learned, fitted per head)");
		/* sinks of other values: the side's own, fitted as the reference's
		 * were (not on the side they were fitted on, whose array they are) */
		bare.sinks = NULL;
		if (s->sinks != c0->sinks && fit_sinks(s, &bare)) {
			int h = 0;
			for (int i = 1; i < nh; i++)
				h = fabs(s->sinks[i] - c0->sinks[i]) > fabs(s->sinks[h] - c0->sinks[h]) ? i : h;
			v[n] = (core_variant){*c0, TB_CAUSE_ATTENTION_SINK, "", 0, false};
			v[n].cfg.sinks = s->sinks;
			snprintf(v[n++].name, sizeof v->name, "attention sinks of other values (head %d: %.3g, the reference: %.3g)", h,
				 s->sinks[h], c0->sinks[h]);
		}
	} else if (fit_sinks(s, c0)) {
		v[n] = (core_variant){*c0, TB_CAUSE_ATTENTION_SINK, "", 0, false};
		v[n].cfg.sinks = s->sinks;
		snprintf(v[n++].name, sizeof v->name, "learned attention sinks (fitted per head)");
	}
	if (c0->cache) {
		v[n] = (core_variant){*c0, TB_CAUSE_KV_CACHE, "", 0, false};
		v[n].cfg.cache = 0;
		snprintf(v[n++].name, sizeof v->name, "K and V as computed (the reference: an %s cache)",
			 kv_caches[c0->cache - 1].name);
	} else if (cache_variants(s, c0, v, &n, err) < 0)
		return -1;
	return n;
}

#define MAX_CORE_VARIANTS 20

/* The attention at softmax scale e^x, the rest of c kept. */
typedef struct scale_fit {
	core_side *s;
	core_cfg c;
} scale_fit;

static int scale_residual(void *ctx, double x, double *rel, tb_err *err)
{
	scale_fit *f = ctx;

	f->c.scale = exp(x);
	return core_residual(f->s, &f->c, NULL, rel, err);
}

/* The softmax scale that fits the side best, the rest of c0 kept: a grid
 * over a factor of 100 either way, then a golden-section search around
 * its best point, in log scale. */
static int fit_scale(core_side *s, const core_cfg *c0, core_variant *out, tb_err *err)
{
	const double span = log(100);
	scale_fit f = {s, *c0};
	double best = log(c0->scale), rel;

	if (tb_fit_grid_min(scale_residual, &f, best - span, span / 8, 17, &best, err) < 0 ||
	    tb_fit_golden_min(scale_residual, &f, best - span / 8, best + span / 8, 24, &best, &rel, err) < 0)
		return -1;
	f.c.scale = exp(best);
	*out = (core_variant){f.c, TB_CAUSE_SOFTMAX_SCALE, "", rel, false};
	snprintf(out->name, sizeof out->name, "softmax scale %.3g, fitted (the reference: %.3g)", f.c.scale, c0->scale);
	return 0;
}

/* The best variant of c0 on the side, the head permutation included, and
 * a fitted scale when no other comes within the floor. */
static int core_best(core_side *s, const core_cfg *c0, double at_c0, bool permute, double floor, core_variant *best,
		     tb_err *err)
{
	core_variant v[MAX_CORE_VARIANTS];
	int n;

	best->rel = INFINITY;
	if (permute) {
		int *perm = malloc((size_t)s->in.v[0].nh * sizeof *perm);
		double rel;
		if (!perm)
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		if (core_residual(s, c0, NULL, &rel, err) < 0 || (fit_permutation(s, perm) && core_residual(s, c0, perm, &rel, err) < 0)) {
			free(perm);
			return -1;
		}
		if (rel < at_c0) {
			int h = 0;
			while (perm[h] == h)
				h++;
			*best = (core_variant){*c0, TB_CAUSE_ATTENTION_LAYOUT, "", rel, true};
			snprintf(best->name, sizeof best->name, "heads in another order (output head %d holds head %d)", h, perm[h]);
		}
		free(perm);
	}
	if ((n = core_variants(s, c0, v, err)) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		if (core_residual(s, &v[i].cfg, NULL, &v[i].rel, err) < 0)
			return -1;
		if (v[i].rel < best->rel)
			*best = v[i];
	}
	if (best->rel > floor && at_c0 > floor) {
		core_variant f;
		if (fit_scale(s, c0, &f, err) < 0)
			return -1;
		if (f.rel < best->rel && fabs(log(f.cfg.scale / c0->scale)) > 0.01)
			*best = f;
	}
	return 0;
}

/* The reference's attention: the usual one, else the best single change
 * of it, taken while it helps, at most three times. */
static int core_reference(core_side *s, core_cfg *c, double floor, double *rel, tb_err *err)
{
	*c = (core_cfg){.scale = 1 / sqrt(s->in.v[0].hd), .mask = CAUSAL};
	if (core_residual(s, c, NULL, rel, err) < 0)
		return -1;
	for (int round = 0; round < 3 && *rel > floor; round++) {
		core_variant b;
		if (core_best(s, c, *rel, false, floor, &b, err) < 0)
			return -1;
		if (!(b.rel < *rel / 2))
			break;
		*c = b.cfg;
		*rel = b.rel;
	}
	return 0;
}

int tb_replay_attn_core(const tb_replay_in *in, tb_replay *out, tb_err *err)
{
	int layer = in->target->cell.layer;
	/* the side's order */
	const tb_pair *p[4] = {tb_replay_pair(in, layer, TB_TAP_ATTN_Q_ROPE), tb_replay_pair(in, layer, TB_TAP_ATTN_K_ROPE),
			       tb_replay_pair(in, layer, TB_TAP_ATTN_V), tb_replay_pair(in, layer, TB_TAP_ATTN_CORE)};
	attn_plan pl;
	int hd = 0;
	core_side ref = {0}, cand = {0};
	tb_replay_sides loaded[4];
	core_cfg c0;
	core_variant best;
	double floor, ref_rel = INFINITY, cand_at_ref;
	char ref_name[80];
	bool fits, finite;
	int rc = 0;

	if (!plan(in, p,
		  "replaying attn.core needs attn.q_rope, attn.k_rope (after RoPE) and attn.v on both sides "
		  "(mkdemo --replay; dump_hf.py --replay)",
		  out, &pl))
		return 0;
	floor = tb_replay_floor(p[3]->ref, p[3]->cand, CORE_F32_FLOOR, HALF_ROUNDINGS);
	if (tb_replay_load_pairs(p, 4, loaded, &finite, err) < 0)
		return -1;
	side_of(&ref.in, p, loaded, false);
	side_of(&cand.in, p, loaded, true);
	if (!finite) {
		snprintf(out->note, sizeof out->note, "no replay from non-finite values");
		goto done;
	}
	/* the head dim: the usual attention's best fit on a few rows */
	for (int k = 0; k < pl.nhd; k++) {
		double rel;
		if (core_side_view(&ref, pl.S, pl.hds[k], pl.probe, pl.nprobe, &fits, err) < 0)
			goto fail;
		if (!fits)
			continue;
		c0 = (core_cfg){.scale = 1 / sqrt(pl.hds[k]), .mask = CAUSAL};
		if (core_residual(&ref, &c0, NULL, &rel, err) < 0)
			goto fail;
		if (rel < ref_rel) {
			ref_rel = rel;
			hd = pl.hds[k];
		}
	}
	if (!hd) {
		snprintf(out->note, sizeof out->note,
			 "attn.q_rope, attn.k_rope, attn.v and attn.core do not hold the same positions and heads: no attention replay");
		goto done;
	}
	if (core_side_view(&ref, pl.S, hd, pl.rows, pl.nrows, &fits, err) < 0 ||
	    core_side_view(&cand, pl.S, hd, pl.rows, pl.nrows, &fits, err) < 0)
		goto fail;
	if (!fits) {
		snprintf(out->note, sizeof out->note, "the candidate's attention differs in shape from the reference's: no replay");
		goto done;
	}
	out->tried = true;
	if (core_reference(&ref, &c0, floor, &ref_rel, err) < 0 || core_residual(&cand, &c0, NULL, &cand_at_ref, err) < 0 ||
	    core_best(&cand, &c0, cand_at_ref, true, floor, &best, err) < 0)
		goto fail;
	describe_core(&c0, ref_name, sizeof ref_name);
	tb_replay_decide(in, out, floor,
			 &(tb_replay_fit){ref_name, ref_rel, cand_at_ref, best.rel < INFINITY ? best.name : NULL, best.cause,
					  best.rel, 0});
	goto done;
fail:
	rc = -1;
done:
	core_side_reset(&ref);
	core_side_reset(&cand);
	tb_replay_unload(loaded, 4);
	return rc;
}
