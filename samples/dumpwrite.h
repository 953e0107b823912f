/*
 * dumpwrite: writers for the dump formats tbisect reads (.npy and
 * safetensors, single or sharded), used by the sample generators and the
 * tests to make their own fixtures; also zip (npz, torch.save) and MaxText
 * golden files, with the pickles assembled opcode by opcode.  Not part of tbisect itself, which never
 * writes dumps.  Errors: -1 with errno set; nothing is printed.
 */
#ifndef TB_DUMPWRITE_H
#define TB_DUMPWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/dtype.h"

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

/* ---- zip containers, npz, torch.save and MaxText golden files ---- */

/* A growable byte buffer. */
typedef struct dw_buf {
	unsigned char *p;
	size_t n, cap;
} dw_buf;

int dw_buf_add(dw_buf *b, const void *data, size_t n);
void dw_buf_free(dw_buf *b);

/* How one zip member is stored. */
typedef struct dw_zip_opts {
	bool deflate;       /* method 8 (raw deflate), else stored */
	bool zip64_local;   /* zip64 extra in the local header, as numpy's force_zip64 */
	bool zip64_central; /* zip64 extra in the central entry (sizes and offset 0xFFFFFFFF) */
	unsigned align;     /* pad the data start to this boundary with an 'FB' extra (torch) */
} dw_zip_opts;

typedef struct dw_zip dw_zip;

dw_zip *dw_zip_new(void);
void dw_zip_free(dw_zip *z);
/* Add a member (o may be NULL: stored, no extras). */
int dw_zip_add(dw_zip *z, const char *name, const void *data, size_t n, const dw_zip_opts *o);
/* The finished archive (valid until the next call on z); zip64_end adds
 * the zip64 end record and locator. */
const unsigned char *dw_zip_bytes(dw_zip *z, bool zip64_end, size_t *n);
int dw_zip_write(dw_zip *z, const char *path, bool zip64_end);

/* The bytes of an npy file (version 1, 2 or 3) as dw_write_npy writes it. */
int dw_npy_bytes(dw_buf *out, int version, const char *descr, bool fortran, int ndim, const int64_t *shape,
		 const void *data, size_t nbytes);
/* An npz of npy members named "<name>.npy" (o: how members are stored). */
int dw_write_npz(const char *path, const dw_tensor *ts, size_t n, const dw_zip_opts *o);

/* A protocol-2 pickle being assembled by hand, as torch writes it: strings
 * as BINUNICODE, memo slots with BINPUT, repeats of the same global or
 * string fetched back with BINGET. */
typedef struct dw_pk {
	dw_buf b;
	uint32_t memo;    /* next memo slot */
	char *cache[64];  /* interned strings / globals ... */
	uint32_t slot[64]; /* ... and their memo slots */
	int n_cache;
	int protocol;     /* 0 or 2: BINPUT/GLOBAL; 4, 5: MEMOIZE/STACK_GLOBAL */
} dw_pk;

/* PROTO: start a pickle of this protocol (2, 4 or 5). */
void dw_pk_begin(dw_pk *p, int protocol);
void dw_pk_op(dw_pk *p, int op);
void dw_pk_raw(dw_pk *p, const void *data, size_t n);
void dw_pk_put(dw_pk *p);                 /* BINPUT next slot (LONG_BINPUT past 255) */
void dw_pk_str(dw_pk *p, const char *s);  /* BINUNICODE + put */
void dw_pk_int(dw_pk *p, int64_t v);      /* BININT1/BININT2/BININT/LONG1 as CPython picks */
void dw_pk_global(dw_pk *p, const char *module, const char *name); /* GLOBAL + put, or BINGET */
void dw_pk_shared_str(dw_pk *p, const char *s); /* a string written once, then BINGET */
void dw_pk_free(dw_pk *p);

/* One tensor of a torch.save file. */
typedef struct dw_pt_tensor {
	const char *name;
	tb_dtype dtype;
	int ndim;
	int64_t shape[8];
	int64_t stride[8];     /* used when strided, else C-contiguous */
	bool strided;
	int64_t offset;        /* storage offset, in elements */
	const void *storage;   /* the whole storage (little-endian unless big_endian) */
	size_t storage_bytes;
	const char *key;       /* storage key; tensors with equal keys share it (NULL: own key) */
	const char *location;  /* the storage's device ("cuda:1"); NULL: "cpu" */
} dw_pt_tensor;

/* Emit _rebuild_tensor_v2 (or _v3 with an UntypedStorage) of t on storage key. */
void dw_pk_tensor(dw_pk *p, const dw_pt_tensor *t, const char *key, bool v3);

typedef struct dw_pt_opts {
	const char *prefix; /* archive folder; NULL: "archive" */
	bool ordered;       /* collections.OrderedDict with a BUILD of {'_metadata': ...} */
	bool lone;          /* the pickle holds ts[0] alone, not a dict */
	bool v3;            /* _rebuild_tensor_v3 with UntypedStorage */
	bool big_endian;    /* byteorder record "big" (storages given big-endian) */
	bool no_byteorder;  /* omit the byteorder record */
	bool deflate;       /* deflate every record */
} dw_pt_opts;

/* A torch.save-like zip: data.pkl, byteorder, data/<key>..., version. */
int dw_write_pt(const char *path, const dw_pt_tensor *ts, size_t n, const dw_pt_opts *o);
/* The same archive around a pickle the caller assembled. */
int dw_write_pt_pickle(const char *path, const void *pkl, size_t n, const dw_pt_tensor *ts, size_t nt,
		       const dw_pt_opts *o);

/* One prompt of a MaxText golden file. */
typedef struct dw_golden_rec {
	const char *prompt;
	const int64_t *tokens;
	size_t n_tokens;
	const float *logits; /* [S][V] */
	int64_t seq, vocab;
	const float *const *hidden; /* n_layers arrays of [S][H], or NULL */
	int n_layers;
	int64_t hid;
} dw_golden_rec;

/* JSON lines, numbers as Python writes them (NaN, Infinity, -Infinity bare). */
int dw_write_golden_jsonl(const char *path, const dw_golden_rec *recs, size_t n);
/* pickle.dump of the records as numpy arrays: protocol 2 or 4 (_reconstruct)
 * or 5 (_frombuffer with in-band bytearrays). */
int dw_write_golden_pickle(const char *path, const dw_golden_rec *recs, size_t n, int protocol);
