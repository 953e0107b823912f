/*
 * dumpwrite: writers for the dump formats tbisect reads (.npy and
 * safetensors, single or sharded), used by the sample generators and the
 * tests to make their own fixtures.  Not part of tbisect itself, which never
 * writes dumps.  Errors: -1 with errno set; nothing is printed.
 */
#ifndef TB_DUMPWRITE_H
#define TB_DUMPWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

typedef struct dw_tensor {
	const char *name;
	tb_dtype dtype;
	int ndim;
	int64_t shape[8];
	const void *data; /* little-endian, C order */
	size_t nbytes;
} dw_tensor;

/* float32 values encoded as dtype (little-endian); malloc'd, *nbytes set. */
void *dw_encode(const float *x, size_t n, tb_dtype dt, size_t *nbytes);
/* The npy descr of a dtype ("<f4", "|V2" for bf16, ...). */
const char *dw_npy_descr(tb_dtype dt);
/* The safetensors dtype string ("F32", "BF16", ...). */
const char *dw_st_dtype(tb_dtype dt);

/* mkdir -p of the directory part of path. */
int dw_mkdirs_for(const char *path);

/* Write an npy file; version 1, 2 or 3; descr as it should appear. */
int dw_write_npy(const char *path, int version, const char *descr, bool fortran, int ndim, const int64_t *shape,
		 const void *data, size_t nbytes);
/* Write a safetensors file (metadata_json: an object text or NULL). */
int dw_write_safetensors(const char *path, const dw_tensor *ts, size_t n, const char *metadata_json);
/* Write n_shards shards "<stem>-0000i-of-0000n.safetensors" and
 * "<stem>.safetensors.index.json" in dir. */
int dw_write_safetensors_sharded(const char *dir, const char *stem, const dw_tensor *ts, size_t n, size_t n_shards);

#endif
