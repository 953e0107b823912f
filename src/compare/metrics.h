/*
 * metrics: the fused one-pass comparison kernel and the per-cell metrics
 * doc/report.md defines.
 *
 * tb_acc_run folds a run of (ref, cand) float32 pairs into double
 * accumulators: squared norms, dot product, |diff| sum and max with its
 * index, allclose count, NaN/Inf counts, per-side min/max/sum.  The sums
 * are of float terms summed over short float blocks: each is within
 * TB_ACC_BOUND of the sum of its terms' magnitudes (acc_kernel.inc says
 * why), plus double's own rounding; allclose is decided on |c - r|
 * rounded to float, as numpy has it on float32 arrays; max_abs is exact;
 * tb_acc_run_raw does the same reading f32, bf16 or f16 elements in place
 * (one specialised, vectorised loop per dtype pair, see simd.h).  Runs never
 * cross a row (a position of an [.., S, H] activation), so the run's own
 * sums are also returned for the per-position profile.  Accumulators from
 * different runs merge exactly, so work can be split across threads.
 * tb_metrics_finish turns them into the reported numbers.
 *
 * tb_metrics owns its per-position arrays; tb_metrics_done frees them.
 */
#ifndef TB_METRICS_H
#define TB_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/dtype.h"

/* Vectors of 8 pairs per float block of the kernel, and the bound (to
 * first order) on a sum's error relative to the sum of its terms'
 * magnitudes: 3 roundings in a term, one per add in a block's lane. */
#define TB_ACC_BLOCK 16
#define TB_ACC_BOUND ((TB_ACC_BLOCK + 2) * 0x1p-24)

typedef struct tb_tolerance {
	double atol, rtol; /* element ok iff |c-r| <= atol + rtol*|r| */
	double diverge;    /* rel_l2 above this: diverged */
	double max_kl;     /* logits: mean KL above this: diverged */
	bool absolute;     /* judge by max_abs > diverge instead of rel_l2 (near-zero tensors) */
} tb_tolerance;

void tb_tolerance_default(tb_tolerance *t);

typedef struct tb_acc {
	uint64_t n;         /* element pairs seen */
	uint64_t finite;    /* pairs with both sides finite (the sums cover these) */
	double sdd, srr, scc, src, sad; /* sum d^2, r^2, c^2, r*c, |d| */
	double sr, sc;      /* sum r, sum c */
	double rmin, rmax, cmin, cmax;
	double max_abs;     /* largest |c-r| over finite pairs */
	uint64_t worst;     /* its flat index */
	float worst_r, worst_c;
	uint64_t close;     /* pairs passing allclose */
	uint64_t nan[2], inf[2];
	uint64_t mismatch;  /* pairs non-finite on one side, or differently */
	/* Per side, elements finite there whose partner is not: a side's own
	 * statistics (mean, std, min, max, L2) add these to the finite pairs. */
	uint64_t lone_n[2];
	double lone_s[2], lone_ss[2], lone_min[2], lone_max[2];
} tb_acc;

/* Sums of one run, for the per-position profile, and what a position's
 * metrics need when others are left out (compare/routing.h). */
typedef struct tb_run_sums {
	double sdd, srr, scc, src;
	double sad, mx;    /* sum and largest of |c - r| over finite pairs */
	uint64_t n;        /* pairs */
	uint64_t close;    /* pairs passing allclose */
	uint64_t mismatch; /* pairs non-finite on one side, or differently */
} tb_run_sums;

void tb_acc_init(tb_acc *a);
void tb_acc_merge(tb_acc *into, const tb_acc *from);
/* base: flat index of r[0]. */
void tb_acc_run(tb_acc *a, const float *r, const float *c, size_t n, uint64_t base, double atol, double rtol,
		tb_run_sums *run);
/* Can tb_acc_run_raw read this dtype in place?  (f32, bf16, f16) */
bool tb_acc_reads(tb_dtype dt);
/* The element source (tb_src, base/simd.h) the kernels read dt as, or -1
 * when they cannot read it in place. */
int tb_dtype_src(tb_dtype dt);
/* tb_acc_run on n little-endian elements of rdt at r and cdt at c (any
 * alignment); both dtypes must pass tb_acc_reads.  Results are those of
 * tb_acc_run on the exactly decoded float32 values. */
void tb_acc_run_raw(tb_acc *a, const void *r, tb_dtype rdt, const void *c, tb_dtype cdt, size_t n, uint64_t base,
		    double atol, double rtol, tb_run_sums *run);

typedef struct tb_metrics {
	uint64_t n;
	double max_abs, mean_abs, rel_l2, cosine, norm_ratio, allclose_frac;
	uint64_t nan[2], inf[2], mismatch; /* [0] ref, [1] cand */
	uint64_t worst_index;
	float worst_ref, worst_cand;
	double mean[2], std[2], min[2], max[2], l2[2]; /* per side, over that side's finite elements */
	int64_t n_pos;        /* positions (S of [.., S, H]); 0 when not an activation */
	int64_t pos_seen;     /* of them, those with values: a partial dump prints some rows
			       * only, and the others' entries are NaN */
	double *pos_rel_l2;   /* n_pos each, owned; infinite where NaN/Inf differ */
	double *pos_cos;
	double *pos_norm_ratio;
	int64_t first_bad_position; /* -1: none */
	/* A sketch took part (doc/report.md, the JSON report's "estimated"): rel_l2, cosine and the
	 * per-position profile are estimates, rel_l2 within [rel_l2_lo,
	 * rel_l2_hi] and cosine within [cosine_lo, cosine_hi]; max_abs,
	 * mean_abs and allclose_frac are unknown (NaN), unless exact: every
	 * block of values hashed equal. */
	bool estimated, exact;
	double rel_l2_lo, rel_l2_hi, cosine_lo, cosine_hi;
	double bias_frac; /* estimated: the share of the error a per-channel offset explains (NaN: unknown) */
	double shift_frac; /* estimated: of the positions but the first, the share whose candidate row has
			    * the reference's norm at p-1 or at p+1 and not at p (NaN: unknown) */
} tb_metrics;

/* rel_l2, cosine and norm ratio from the four sums (0 / 1 conventions for zeros). */
double tb_rel_l2(double sdd, double srr);
double tb_cosine(double src, double srr, double scc);
double tb_norm_ratio(double scc, double srr);

/* The sums of each position from per-row sums (row i is position i %
 * n_pos): n_pos entries, owned by the caller, or NULL when out of memory. */
tb_run_sums *tb_run_sums_by_position(const tb_run_sums *rows, uint64_t n_rows, int64_t n_pos);
/* Fill m from a merged accumulator and per-row sums (rows may be NULL when
 * n_pos is 0; row i is position i % n_pos).  diverge sets first_bad_position. */
int tb_metrics_finish(tb_metrics *m, const tb_acc *a, const tb_run_sums *rows, uint64_t n_rows, int64_t n_pos,
		      double diverge);
/* The per-position profile of a partial dump's cell (m finished without
 * one): pos[p] sums position p's printed elements, seen[p] says it has
 * any; the others stay NaN.  first_bad_position is the first printed
 * position past diverge.  -1 when out of memory. */
int tb_metrics_positions(tb_metrics *m, const tb_run_sums *pos, const bool *seen, int64_t n_pos, double diverge);
void tb_metrics_done(tb_metrics *m);

#endif
