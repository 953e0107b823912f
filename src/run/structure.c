#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/structure.h"

/* Elements read of each tensor (whole rows): the identities hold element
 * by element, so a prefix tells as much as the whole. */
#define PREFIX_ELEMS 16384
/* The residual identity holds to float rounding in a float32 dump; bf16
 * dumps round each term, so allow a few percent. */
#define RESIDUAL_MAX_ERR 0.05
/* A norm output's rows point where its input's do. */
#define NORM_MIN_COS 0.9

typedef struct loaded {
	float ***x;     /* [series][index] prefix, NULL where the tensor is not hidden-sized */
	int64_t hidden; /* the hidden size: the commonest last axis */
	uint64_t numel; /* the hidden-sized tensors' element count */
	size_t len;     /* elements loaded per tensor, whole rows of hidden */
} loaded;

static int64_t last_dim(const tb_tensor *t)
{
	return t->ndim ? t->shape[t->ndim - 1] : 0;
}

/* The commonest last axis of the series' tensors, and the commonest
 * element count among the tensors that have it. */
static void common_sizes(const tb_series *s, size_t ns, int64_t *hidden, uint64_t *numel)
{
	int64_t best_h = 0;
	uint64_t best_n = 0;
	size_t best_h_count = 0, best_n_count = 0;

	for (size_t i = 0; i < ns; i++) {
		for (size_t k = 0; k < s[i].n; k++) {
			int64_t h = last_dim(s[i].t[k]);
			size_t count = 0;
			for (size_t j = 0; j < ns; j++)
				for (size_t m = 0; m < s[j].n; m++)
					count += last_dim(s[j].t[m]) == h;
			if (count > best_h_count) {
				best_h_count = count;
				best_h = h;
			}
		}
	}
	for (size_t i = 0; i < ns; i++) {
		for (size_t k = 0; k < s[i].n; k++) {
			uint64_t n = s[i].t[k]->numel;
			size_t count = 0;
			if (last_dim(s[i].t[k]) != best_h)
				continue;
			for (size_t j = 0; j < ns; j++)
				for (size_t m = 0; m < s[j].n; m++)
					count += s[j].t[m]->numel == n;
			if (count > best_n_count) {
				best_n_count = count;
				best_n = n;
			}
		}
	}
	*hidden = best_h;
	*numel = best_n;
}

static float *prefix(tb_tensor *t, size_t len, tb_err *err)
{
	float *x = malloc(len * sizeof *x);

	if (!x) {
		tb_err_setc(err, TB_ERR_NOMEM, t->path, "out of memory");
		return NULL;
	}
	if (tb_tensor_acquire(t, err) < 0) {
		free(x);
		return NULL;
	}
	tb_tensor_read_f32(t, 0, len, x);
	tb_tensor_release(t);
	return x;
}

static int load(const tb_series *s, size_t ns, loaded *ld, tb_err *err)
{
	uint64_t numel;

	common_sizes(s, ns, &ld->hidden, &numel);
	ld->numel = numel;
	ld->x = calloc(ns + 1, sizeof *ld->x);
	if (!ld->x)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	if (ld->hidden <= 0)
		return 0;
	ld->len = numel < PREFIX_ELEMS ? numel : PREFIX_ELEMS;
	ld->len -= ld->len % (size_t)ld->hidden;
	if (ld->len == 0)
		ld->len = (size_t)ld->hidden;
	for (size_t i = 0; i < ns; i++) {
		ld->x[i] = calloc(s[i].n + 1, sizeof *ld->x[i]);
		if (!ld->x[i])
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		for (size_t k = 0; k < s[i].n; k++) {
			if (s[i].t[k]->numel != numel || last_dim(s[i].t[k]) != ld->hidden)
				continue;
			ld->x[i][k] = prefix(s[i].t[k], ld->len, err);
			if (!ld->x[i][k])
				return -1;
		}
	}
	return 0;
}

static void unload(const tb_series *s, size_t ns, loaded *ld)
{
	for (size_t i = 0; ld->x && i < ns; i++) {
		for (size_t k = 0; ld->x[i] && k < s[i].n; k++)
			free(ld->x[i][k]);
		free(ld->x[i]);
	}
	free(ld->x);
}

/* Series i's prefix for layer number `number`, or NULL. */
static const float *at(const tb_series *s, const loaded *ld, size_t i, long number)
{
	for (size_t k = 0; k < s[i].n; k++)
		if (s[i].number[k] == number)
			return ld->x[i][k];
	return NULL;
}

/* ||b - (p + a + m)|| / ||b|| over n elements (p may be NULL: zero). */
static double residual_err(const float *b, const float *p, const float *a, const float *m, size_t n)
{
	double num = 0, den = 0;

	for (size_t j = 0; j < n; j++) {
		double d = (double)b[j] - (p ? p[j] : 0) - a[j] - (m ? m[j] : 0);
		num += d * d;
		den += (double)b[j] * b[j];
	}
	return den > 0 ? sqrt(num / den) : INFINITY;
}

/* Mean over rows of cos(x_row, y_row + z_row) (z may be NULL). */
static double row_cos(const float *x, const float *y, const float *z, size_t n, size_t h)
{
	double sum = 0;
	size_t rows = 0;

	for (size_t r = 0; r + h <= n; r += h) {
		double xy = 0, xx = 0, yy = 0;
		for (size_t j = r; j < r + h; j++) {
			double v = (double)y[j] + (z ? z[j] : 0);
			xy += x[j] * v;
			xx += (double)x[j] * x[j];
			yy += v * v;
		}
		if (xx > 0 && yy > 0) {
			sum += xy / sqrt(xx * yy);
			rows++;
		}
	}
	return rows ? sum / (double)rows : 0;
}

/* Mean residual error of block b = previous b + a + m over the layers that
 * have all four. */
static double block_err(const tb_series *s, const loaded *ld, size_t b, size_t a, size_t m)
{
	double sum = 0;
	size_t n = 0;

	for (size_t k = 1; k < s[b].n; k++) {
		long l = s[b].number[k];
		const float *xb = at(s, ld, b, l), *xp = at(s, ld, b, l - 1), *xa = at(s, ld, a, l), *xm = at(s, ld, m, l);
		if (!xb || !xp || !xa || !xm)
			continue;
		sum += residual_err(xb, xp, xa, xm, ld->len);
		n++;
	}
	return n ? sum / (double)n : INFINITY;
}

/* Mean row cosine of series z against the previous block (plus series x
 * of the same layer, when x is not -1). */
static double norm_cos(const tb_series *s, const loaded *ld, size_t z, size_t b, long x)
{
	double sum = 0;
	size_t n = 0;

	for (size_t k = 0; k < s[z].n; k++) {
		long l = s[z].number[k];
		const float *xz = at(s, ld, z, l), *xp = at(s, ld, b, l - 1), *xx = x >= 0 ? at(s, ld, (size_t)x, l) : NULL;
		if (!xz || !xp || (x >= 0 && !xx))
			continue;
		sum += row_cos(xz, xp, xx, ld->len, (size_t)ld->hidden);
		n++;
	}
	return n ? sum / (double)n : 0;
}

int tb_structure_infer(const tb_series *s, size_t ns, tb_tensor *const *singles, size_t n1, tb_structure *out,
		       tb_err *err)
{
	loaded ld = {0};
	double best = INFINITY;
	long B = -1, A = -1, M = -1, N1 = -1, N2 = -1;
	int rc = -1;

	memset(out, 0, sizeof *out);
	out->series_tap = calloc(ns + 1, sizeof *out->series_tap);
	out->series_conf = calloc(ns + 1, sizeof *out->series_conf);
	out->single_tap = calloc(n1 + 1, sizeof *out->single_tap);
	out->single_conf = calloc(n1 + 1, sizeof *out->single_conf);
	if (!out->series_tap || !out->series_conf || !out->single_tap || !out->single_conf) {
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		goto done;
	}
	if (load(s, ns, &ld, err) < 0)
		goto done;
	/* The block: the series that is its own previous layer plus two others. */
	for (size_t b = 0; b < ns; b++)
		for (size_t a = 0; a < ns; a++)
			for (size_t m = a + 1; m < ns; m++) {
				double e;
				if (a == b || m == b)
					continue;
				e = block_err(s, &ld, b, a, m);
				if (e < best) {
					best = e;
					B = (long)b;
					A = (long)a;
					M = (long)m;
				}
			}
	if (B >= 0 && best <= RESIDUAL_MAX_ERR) {
		/* attn comes first: the MLP's input norm points where block + attn
		 * points; attn's input norm where the previous block does. */
		double score = -1;
		long attn = A, mlp = M;
		for (int swap = 0; swap < 2; swap++) {
			long x = swap ? M : A;
			for (size_t z1 = 0; z1 <= ns; z1++)
				for (size_t z2 = 0; z2 <= ns; z2++) {
					double c1 = 0, c2 = 0, sc;
					if ((z1 < ns && ((long)z1 == B || (long)z1 == A || (long)z1 == M)) ||
					    (z2 < ns && ((long)z2 == B || (long)z2 == A || (long)z2 == M)) || (z1 == z2 && z1 < ns))
						continue;
					if (z1 < ns && (c1 = norm_cos(s, &ld, z1, (size_t)B, -1)) < NORM_MIN_COS)
						continue;
					if (z2 < ns && (c2 = norm_cos(s, &ld, z2, (size_t)B, x)) < NORM_MIN_COS)
						continue;
					sc = c1 + c2;
					if (sc > score) {
						score = sc;
						attn = x;
						mlp = swap ? A : M;
						N1 = z1 < ns ? (long)z1 : -1;
						N2 = z2 < ns ? (long)z2 : -1;
					}
				}
		}
		out->series_tap[B] = "block";
		out->series_conf[B] = 1 - best / RESIDUAL_MAX_ERR / 2;
		if (N2 >= 0) {
			/* Only the MLP's input norm tells attn from mlp. */
			out->series_tap[attn] = "attn";
			out->series_tap[mlp] = "mlp";
			out->series_conf[attn] = out->series_conf[mlp] = norm_cos(s, &ld, (size_t)N2, (size_t)B, attn);
			out->series_tap[N2] = "mlp_norm";
			out->series_conf[N2] = out->series_conf[attn];
		}
		if (N1 >= 0) {
			out->series_tap[N1] = "attn_norm";
			out->series_conf[N1] = norm_cos(s, &ld, (size_t)N1, (size_t)B, -1);
		}
		snprintf(out->evidence, sizeof out->evidence,
			 "block = previous block + two others to %.2g (relative), %s", best,
			 N2 >= 0 ? "the MLP's input norm points where block + attn does" : "no norm output to tell attn from mlp");
	}
	/* Model-level tensors: the logits have another last axis; the
	 * embedding is the first layer's previous block; the final norm points
	 * where the last layer's output does. */
	for (size_t i = 0; i < n1; i++) {
		tb_tensor *t = singles[i];
		float *x;
		/* As many rows (positions) as the hidden states, a wider last axis. */
		if (ld.hidden > 0 && last_dim(t) > ld.hidden && t->numel / (uint64_t)last_dim(t) == ld.numel / (uint64_t)ld.hidden) {
			out->single_tap[i] = "logits";
			out->single_conf[i] = 0.9;
			continue;
		}
		if (B < 0 || best > RESIDUAL_MAX_ERR || last_dim(t) != ld.hidden || t->numel < ld.len)
			continue;
		x = prefix(t, ld.len, err);
		if (!x)
			goto done;
		long first = s[B].number[0], last = s[B].number[s[B].n - 1];
		const float *b0 = at(s, &ld, (size_t)B, first), *a0 = at(s, &ld, (size_t)A, first),
			    *m0 = at(s, &ld, (size_t)M, first), *bl = at(s, &ld, (size_t)B, last);
		if (b0 && a0 && m0 && residual_err(b0, x, a0, m0, ld.len) <= RESIDUAL_MAX_ERR) {
			out->single_tap[i] = "embed";
			out->single_conf[i] = 1 - residual_err(b0, x, a0, m0, ld.len) / RESIDUAL_MAX_ERR / 2;
		} else if (bl && row_cos(x, bl, NULL, ld.len, (size_t)ld.hidden) >= NORM_MIN_COS) {
			out->single_tap[i] = "final_norm";
			out->single_conf[i] = row_cos(x, bl, NULL, ld.len, (size_t)ld.hidden);
		}
		free(x);
	}
	rc = 0;
done:
	unload(s, ns, &ld);
	if (rc < 0)
		tb_structure_done(out);
	return rc;
}

void tb_structure_done(tb_structure *s)
{
	free(s->series_tap);
	free(s->series_conf);
	free(s->single_tap);
	free(s->single_conf);
	memset(s, 0, sizeof *s);
}
