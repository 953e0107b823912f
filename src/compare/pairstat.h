/*
 * pairstat: synchronous helpers for the diagnosis steps that re-read a few
 * tensors: load a whole tensor as float32, two tensors' metrics (any two of equal element count, not only a paired
 * cell) and whether they are equal.  Callers own the returned buffers
 * (free()).
 */
#ifndef TB_PAIRSTAT_H
#define TB_PAIRSTAT_H

#include <stdint.h>

#include "base/error.h"
#include "compare/metrics.h"
#include "tensor/tensor.h"

/* Tensors larger than this are not loaded whole. */
#define TB_LOAD_MAX_ELEMS (64ull << 20)

/* The tensor decoded to float32 in C order (malloc'd); NULL and err when it
 * cannot be read or is over TB_LOAD_MAX_ELEMS. */
float *tb_tensor_load_f32(const tb_tensor *t, tb_err *err);

/* Metrics of a against b as reference over their first n elements (all
 * when n is 0 or more than they have; no per-position profile).  Fails
 * when element counts differ. */
int tb_tensor_pair_metrics(const tb_tensor *ref, const tb_tensor *cand, uint64_t n, const tb_tolerance *tol, tb_metrics *m,
			   tb_err *err);

/* 1 when a and b hold the same values bit for bit (as float32, read a
 * block at a time, or, where either is a sketch, every block hash equal),
 * 0 when not, -1 and err when either cannot be read. */
int tb_tensors_equal(tb_tensor *a, tb_tensor *b, tb_err *err);

#endif
