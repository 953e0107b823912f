/*
 * npy: the .npy preamble and header parser, shared by the npy reader, the
 * npz reader (whose members are npy files) and the Polygraphy reader
 * (whose arrays are base64 npy files).  Never evaluates the
 * header: a hand parser accepts exactly the three keys, string literals,
 * True/False and tuples of non-negative integers.  Pure functions over
 * caller-owned bytes.
 */
#ifndef TB_NPY_H
#define TB_NPY_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "tensor/tensor.h"
#include "formats/reader.h"

/* NumPy itself caps headers at 10000 characters; leave room for odd writers. */
#define TB_NPY_MAX_HEADER (64 * 1024)
/* Bytes that always hold a whole preamble and header. */
#define TB_NPY_MAX_PREAMBLE (12 + TB_NPY_MAX_HEADER)

typedef struct tb_npy_info {
	uint64_t data_off; /* where the array data starts */
	tb_dtype dtype;
	bool big_endian;
	bool fortran;
	int ndim;
	int64_t shape[TB_MAX_DIMS];
} tb_npy_info;

/* Parse the preamble and header at d[0..size) (size: the bytes available,
 * at least the header).  path names the file in errors and locates a
 * dtypes.json manifest for void dtypes. */
int tb_npy_parse(const unsigned char *d, uint64_t size, const char *path, const tb_open_opts *opts,
		 tb_npy_info *info, tb_err *err);
/* Give t (named, not yet shaped) the dtype, shape and strides of info. */
int tb_npy_apply(tb_tensor *t, const tb_npy_info *info, const char *path, tb_err *err);
/* tb_npy_apply, then check that a whole npy file of size bytes holds the
 * data after its header; *data_bytes: the data's length. */
int tb_npy_apply_sized(tb_tensor *t, const tb_npy_info *info, uint64_t size, const char *path, uint64_t *data_bytes,
		       tb_err *err);

#endif
