#include "config.h"

#include <math.h>

#include "diagnose/replay_heads.h"

bool tb_heads_fit(const tb_tensor *t, int64_t S, int hd, tb_heads_view *out)
{
	int64_t d[TB_MAX_DIMS];
	int n = tb_tensor_squeezed(t, d);

	out->S = S;
	out->hd = hd;
	if (n == 3 && d[2] == hd && d[1] == S) {
		out->nh = (int)d[0];
		out->hsd = true;
		return d[0] <= INT32_MAX;
	}
	out->hsd = false;
	if (n == 3 && d[2] == hd && d[0] == S) {
		out->nh = (int)d[1];
		return d[1] <= INT32_MAX;
	}
	if (n == 2 && d[0] == S && d[1] % hd == 0 && d[1] / hd <= INT32_MAX) {
		out->nh = (int)(d[1] / hd);
		return true;
	}
	return false;
}

int64_t tb_heads_positions(const tb_tensor *const *t, int n)
{
	int64_t d[TB_MAX_DIMS];

	for (int i = 0; i < n; i++)
		if (tb_tensor_squeezed(t[i], d) == 2)
			return d[0];
	for (int i = 0; i < n; i++)
		if (tb_tensor_squeezed(t[i], d) == 3)
			return d[1];
	return 0;
}

int tb_heads_dim_choices(const tb_tensor *const *t, int n, int heads, int64_t S, int *out)
{
	int64_t d[TB_MAX_DIMS], width = 0;
	int k = 0;

	for (int i = 0; i < n; i++) {
		int nd = tb_tensor_squeezed(t[i], d);
		if (nd == 3 && d[2] <= TB_HEADS_MAX_HD) {
			out[0] = (int)d[2];
			return 1;
		}
		if (nd == 2 && !width)
			width = d[1];
	}
	if (!width || !S)
		return 0;
	if (heads > 0 && width % heads == 0 && width / heads <= TB_HEADS_MAX_HD) {
		out[0] = (int)(width / heads);
		return 1;
	}
	for (int i = 0; i < TB_HEADS_N_DIMS; i++)
		if (width % tb_usual_head_dims[i] == 0)
			out[k++] = tb_usual_head_dims[i];
	return k;
}

int tb_fit_grid_min(tb_residual_fn f, void *ctx, double lo, double step, int n, double *x, tb_err *err)
{
	double best = INFINITY, rel;

	for (int i = 0; i < n; i++) {
		if (f(ctx, lo + step * i, &rel, err) < 0)
			return -1;
		if (rel < best) {
			best = rel;
			*x = lo + step * i;
		}
	}
	return 0;
}

int tb_fit_golden_min(tb_residual_fn f, void *ctx, double a, double b, int iters, double *x, double *rel, tb_err *err)
{
	const double g = (sqrt(5) - 1) / 2;
	double x1 = b - g * (b - a), x2 = a + g * (b - a), r1, r2;

	if (f(ctx, x1, &r1, err) < 0 || f(ctx, x2, &r2, err) < 0)
		return -1;
	while (iters-- > 0) {
		if (r1 < r2) {
			b = x2;
			x2 = x1;
			r2 = r1;
			x1 = b - g * (b - a);
			if (f(ctx, x1, &r1, err) < 0)
				return -1;
		} else {
			a = x1;
			x1 = x2;
			r1 = r2;
			x2 = a + g * (b - a);
			if (f(ctx, x2, &r2, err) < 0)
				return -1;
		}
	}
	*x = r1 < r2 ? x1 : x2;
	*rel = fmin(r1, r2);
	return 0;
}
