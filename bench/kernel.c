/*
 * tbbench-kernel: speed of the fused metric kernel and the logit kernel on
 * cache-resident data, per dtype pair and instruction-set variant, in
 * nanoseconds per element pair, and of sketching (one thread, rows of
 * ROW_LEN, a quarter of a megabyte) in nanoseconds per value.  For checking that the kernels stay
 * compute-cheap next to memory bandwidth; `make bench` does not run it.
 * Times are CPU time, so other load on the machine matters less.
 *
 *   tbbench-kernel [ROW_LEN]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "compare/logits.h"
#include "compare/metrics.h"
#include "base/simd.h"
#include "tensor/sketch.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ns per value of sketching n values as rows of row_len, of a dtype. */
static double sketch_speed(void *values, tb_dtype dt, size_t n, size_t row_len, size_t reps)
{
	int64_t shape[2] = {(int64_t)(n / row_len), (int64_t)row_len};
	tb_tensor t = {0};
	tb_blob *blob = tb_blob_new();
	tb_sketch_params p;
	tb_err err = {0};
	double t0;

	if (!blob)
		return -1;
	blob->data = values; /* borrowed: never set as owned */
	blob->size = n * tb_dtype_size(dt);
	blob->refs = 1;
	t.name = (char *)"x";
	t.path = "mem";
	t.dtype = dt;
	t.blob = blob;
	if (tb_tensor_set_shape(&t, 2, shape, "mem", &err) < 0)
		return -1;
	tb_sketch_params_for(&t, 1, &p);
	t0 = now();
	for (size_t k = 0; k < reps; k++) {
		tb_sketch s;
		if (tb_sketch_alloc(&s, &p) < 0 || tb_sketch_tensor(&t, &s, 1, &err) < 0)
			return -1;
		tb_sketch_done(&s);
	}
	t0 = now() - t0;
	blob->data = NULL;
	blob->refs = 0;
	tb_blob_free(blob);
	return 1e9 * t0 / (double)(reps * (n / row_len * row_len));
}

int main(int argc, char **argv)
{
	static const tb_dtype dts[] = {TB_DT_F32, TB_DT_BF16, TB_DT_F16};
	static const char *const isas[] = {"generic", "avx2", "avx512"};
	size_t n = argc > 1 ? (size_t)atol(argv[1]) : 4096, reps = (size_t)(1u << 26) / (n ? n : 1);
	float *r = malloc(n * sizeof *r), *c = malloc(n * sizeof *c);
	uint16_t *r16[3], *c16[3];

	if (!r || !c || n == 0)
		return 2;
	for (size_t i = 0; i < n; i++) {
		r[i] = (float)((double)rand() / RAND_MAX - 0.5);
		c[i] = r[i] + (float)(1e-3 * ((double)rand() / RAND_MAX - 0.5));
	}
	for (int k = 1; k < 3; k++) {
		r16[k] = malloc(n * 2);
		c16[k] = malloc(n * 2);
		for (size_t i = 0; i < n; i++) {
			r16[k][i] = k == 1 ? tb_f32_to_bf16(r[i]) : tb_f32_to_f16(r[i]);
			c16[k][i] = k == 1 ? tb_f32_to_bf16(c[i]) : tb_f32_to_f16(c[i]);
		}
	}
	for (int v = 0; v < 3; v++) {
		if (tb_simd_force(isas[v]) < 0)
			continue;
		for (int a = 0; a < 3; a++)
			for (int b = 0; b < 3; b++) {
				const void *rp = a ? (const void *)r16[a] : r, *cp = b ? (const void *)c16[b] : c;
				tb_acc acc;
				tb_run_sums s;
				double t0 = now();
				tb_acc_init(&acc);
				for (size_t k = 0; k < reps; k++)
					tb_acc_run_raw(&acc, rp, dts[a], cp, dts[b], n, 0, 1e-4, 1e-4, &s);
				double t = now() - t0;
				printf("%-8s acc  %-4s x %-4s %6.3f ns/pair (sdd %.6g)\n", isas[v], tb_dtype_name(dts[a]),
				       tb_dtype_name(dts[b]), 1e9 * t / (double)(reps * n), acc.sdd);
			}
		tb_logit_row row;
		double t0 = now();
		for (size_t k = 0; k < reps / 4; k++)
			tb_logits_row(r, c, (int64_t)n, &row);
		printf("%-8s logits f32  x f32  %6.3f ns/pair (kl %.6g)\n", isas[v],
		       1e9 * (now() - t0) / (double)(reps / 4 * n), row.kl);
		{
			size_t sn = (1u << 18) / n * n, sreps = (size_t)(1u << 28) / sn / (v ? 1 : 8);
			float *sv = malloc(sn * sizeof *sv);
			uint16_t *sh = malloc(sn * sizeof *sh);
			if (!sv || !sh || sn == 0)
				return 2;
			for (size_t i = 0; i < sn; i++) {
				sv[i] = r[i % n];
				sh[i] = r16[1][i % n];
			}
			printf("%-8s sketch f32         %6.3f ns/value\n", isas[v],
			       sketch_speed(sv, TB_DT_F32, sn, n, sreps));
			printf("%-8s sketch bf16        %6.3f ns/value\n", isas[v],
			       sketch_speed(sh, TB_DT_BF16, sn, n, sreps));
			free(sv);
			free(sh);
		}
	}
	return 0;
}
