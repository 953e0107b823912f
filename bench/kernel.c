/*
 * tbbench-kernel: speed of the fused metric kernel and the logit kernel on
 * cache-resident data, per dtype pair and instruction-set variant, in
 * nanoseconds per element pair.  For checking that the kernels stay
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

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
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
	}
	return 0;
}
