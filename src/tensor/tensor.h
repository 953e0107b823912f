/*
 * tensor: one tensor found in a dump tree: raw name, dtype, shape, strides,
 * and where its bytes live (a blob).  No data is read when a tensor is
 * indexed; tb_tensor_acquire makes the bytes available (a view of the file
 * mapping, or a lazily loaded buffer such as an inflated zip member) and
 * tb_tensor_read_f32 decodes any range of elements, in C order, to float32.
 * A streamed blob (a deflated zip member) is never held whole: contiguous
 * tensors on it read through a bounded window that moves front to back, so
 * they read fastest in order (tb_tensor_streamed); strided views of it
 * load it whole.
 *
 * Ownership: tensors and blobs belong to the tree that indexed them
 * (tree.h); callers borrow them for the tree's lifetime.  acquire/release
 * are reference counted and thread-safe, so workers may read one tensor
 * concurrently.
 */
#ifndef TB_TENSOR_H
#define TB_TENSOR_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tensor/dtype.h"
#include "base/error.h"
#include "base/mapfile.h"

#define TB_MAX_DIMS 16

typedef struct tb_blob tb_blob;

/* A window of a streamed blob holds at least this many bytes from the
 * offset asked for (or all that is left): more than any element. */
#define TB_BLOB_MIN_RUN 16

/* How a lazy blob produces its bytes (an inflated zip member, ...). */
typedef struct tb_blob_ops {
	/* Fill *data (heap, owned by the blob until unload) with exactly size bytes. */
	int (*load)(void *ctx, uint64_t size, unsigned char **data, tb_err *err);
	/* Optional, for a source that can be read front to back without ever
	 * being held whole (a deflated member): open when the first reader
	 * acquires, close when the last releases.  window gives bytes
	 * [off, off + *got) of the source, 0 < *got <= n and *got >=
	 * min(n, TB_BLOB_MIN_RUN), valid until the next call; NULL when the
	 * source fails (it changed since it was checked).  The blob's lock
	 * serialises the calls. */
	int (*open)(void *ctx, tb_err *err);
	const unsigned char *(*window)(void *ctx, uint64_t off, uint64_t n, uint64_t *got);
	void (*close)(void *ctx);
	void (*free_ctx)(void *ctx);
} tb_blob_ops;

struct tb_blob {
	const tb_file *file; /* mapped source, or NULL */
	uint64_t offset;     /* into file */
	uint64_t size;       /* bytes */
	unsigned char *owned; /* heap bytes (owned or loaded), freed with the blob */
	const tb_blob_ops *ops; /* lazy source, or NULL */
	void *ctx;
	pthread_mutex_t lock;
	unsigned refs;
	unsigned whole;      /* of refs, those that need the bytes loaded whole (lazy blobs) */
	const unsigned char *data; /* valid while refs > 0 (whole > 0 for lazy blobs; always for owned) */
};

/* How a composite tensor (compose.h) is made of others. */
typedef enum tb_parts_kind {
	TB_PARTS_CONCAT,  /* parts joined along `axis` */
	TB_PARTS_SUM,     /* parts of one shape added element by element */
	TB_PARTS_COLUMNS, /* columns [start, start+width) of the one part's last axis */
	TB_PARTS_GATHER,  /* elements index[0..numel) of the one part, in C order */
} tb_parts_kind;

typedef struct tb_tensor_parts {
	tb_parts_kind kind;
	struct tb_tensor **part; /* borrowed */
	int n;
	int axis;                /* TB_PARTS_CONCAT */
	int64_t *at;             /* TB_PARTS_CONCAT: n + 1 offsets along axis */
	int64_t start;           /* TB_PARTS_COLUMNS */
	uint64_t *index;         /* TB_PARTS_GATHER: flat C-order indices into the part, owned */
	void *held;              /* a block the composite owns beside its parts (the tb_partial
				  * it carries, when it made one), or NULL */
} tb_tensor_parts;

/* What of a whole tensor a dump printed, when it printed only some of its
 * values (llama.cpp's text dumps show the first and last few of each
 * axis): the tensor that carries this holds those values, 1-D, in index
 * order. */
typedef struct tb_partial {
	int ndim;
	int64_t shape[TB_MAX_DIMS]; /* the whole tensor's */
	uint64_t n;                 /* values dumped */
	const uint64_t *index;      /* ascending flat C-order indices into shape */
} tb_partial;

typedef struct tb_tensor {
	char *name;          /* raw name (tbisect-dumps(5) NAMING), owned */
	const char *path;    /* file it came from, borrowed from the tree */
	tb_dtype dtype;
	bool big_endian;     /* element bytes are big-endian */
	int ndim;
	int64_t shape[TB_MAX_DIMS];
	int64_t stride[TB_MAX_DIMS]; /* in elements, may be 0 (expand) */
	uint64_t numel;
	tb_blob *blob;       /* borrowed from the tree */
	uint64_t offset;     /* byte offset of element 0 inside the blob */
	bool contiguous;     /* strides are C-contiguous */
	tb_tensor_parts *parts; /* a composite's parts (then blob is NULL), owned */
	const char *dims;    /* how the dumper says its ranks join (SGLang's "t h[tp]"), or NULL;
			      * owned by the tree */
	const tb_partial *partial; /* only some values were dumped (see tb_partial), or NULL;
				    * owned by the tree */
	const struct tb_sketch *sketch; /* a fingerprint in place of the values (a .tbsk file's
					 * tensor, see sketch.h), or NULL; owned by the tree */
	const char *role;    /* the canonical name ("layers.0.attn") that what the file says the
			      * tensor computes gives it (llama.cpp's op line: MUL_MAT by
			      * blk.0.attn_output.weight, whatever the node is called), which
			      * naming reads in place of the raw name; "" for a node that computes
			      * no tap (a graph internal, no cell); NULL when the file says
			      * nothing.  Owned by the tree */
	const char *origin;  /* how the file describes the tensor ("MUL_MAT(blk.0.attn_output.weight,
			      * kqv_merged_cont-0)"), or NULL; owned by the tree */
	const char *stored_as; /* the dtype the file names for values it holds as text ("f16"
				* for llama.cpp's printed f16 tensors), or NULL; owned by the tree */
	int gguf_qk_head_dim; /* a query or key of llama.cpp, each head's channels in the order
			       * convert_hf_to_gguf puts them in (model/qkorder.h), heads of this
			       * many channels; 0 otherwise */
	const char *note;    /* how pairing laid the tensor out to meet the other side's, or NULL
			      * (static, or owned with the view) */
} tb_tensor;

/* A blob with no source yet; tb_blob_free releases it and what it owns. */
tb_blob *tb_blob_new(void);
void tb_blob_free(tb_blob *b);
/* Give a new blob its source (call one, once). */
void tb_blob_set_mapped(tb_blob *b, const tb_file *f, uint64_t offset, uint64_t size);
/* Takes ownership of data (malloc'd). */
void tb_blob_set_owned(tb_blob *b, unsigned char *data, uint64_t size);
/* Takes ownership of ctx (freed by ops->free_ctx). */
void tb_blob_set_lazy(tb_blob *b, const tb_blob_ops *ops, void *ctx, uint64_t size);

/* Set shape with C-contiguous strides; checks rank, negative dims and
 * overflow of numel and numel * element size. */
int tb_tensor_set_shape(tb_tensor *t, int ndim, const int64_t *shape, const char *file, tb_err *err);
/* Recompute `contiguous` and check that every reachable element lies inside
 * the blob (after shape, strides, offset and blob are set). */
int tb_tensor_check_bounds(tb_tensor *t, const char *file, tb_err *err);

/* Shape with leading size-1 axes removed, all of them: [1] and [1, 1]
 * become [], so a scalar pairs with a one-element tensor.  Returns the new
 * rank. */
int tb_tensor_squeezed(const tb_tensor *t, int64_t *shape);
/* The same for any shape (a partial dump's whole one). */
int tb_shape_squeeze(int ndim, const int64_t *shape, int64_t *out);
/* "[2, 16, 64]" */
void tb_shape_format(int ndim, const int64_t *shape, char *buf, size_t size);

/* "36 of 1024 values dumped (whole shape [1, 1, 16, 64])", or for every
 * value of one position "the last position only (512 values), ..." */
void tb_partial_describe(const tb_partial *p, char *buf, size_t size);
/* Do two partial dumps hold the same elements of tensors of one shape
 * (leading size-1 axes aside)?  False when either is NULL. */
bool tb_partial_same(const tb_partial *a, const tb_partial *b);
/* Can a whole tensor t be read at p's elements, and from which element on
 * (*base)?  Yes for t of p's shape (leading size-1 axes aside), of its
 * positions with heads and channels folded otherwise ([S, heads, d]
 * against [S, heads*d]), and, when p holds one position and t several,
 * at t's last position. */
bool tb_partial_place(const tb_partial *p, const tb_tensor *t, uint64_t *base);

/* Are any of t's bytes read through a streamed blob's window?  Then one
 * reader going front to back reads it at the stream's speed; readers
 * taking turns at distant offsets restart the stream (correct, slow). */
bool tb_tensor_streamed(const tb_tensor *t);

int tb_tensor_acquire(const tb_tensor *t, tb_err *err);
void tb_tensor_release(const tb_tensor *t);
/* A composite is acquired with all its parts; it has no bytes in place,
 * and tb_tensor_read_f32 reads through to the parts. */
/* The elements in place, when contiguous and in native byte order (any
 * dtype, any alignment), or NULL (only while acquired). */
const void *tb_tensor_data(const tb_tensor *t);
/* Aligned, native-order, contiguous float32 data in place, or NULL when the
 * tensor must be decoded (only while acquired). */
const float *tb_tensor_f32_direct(const tb_tensor *t);
/* Decode elements [start, start+n) in C order to float32 (only while acquired). */
void tb_tensor_read_f32(const tb_tensor *t, uint64_t start, uint64_t n, float *out);

/* Called with blocks of two tensors' elements (float32, C order) starting
 * at element off; a positive return stops the walk and is returned. */
typedef int (*tb_block_fn)(void *ctx, const float *a, const float *b, size_t n, uint64_t off);
/* Walk the first n elements of a and b (all they share when n is 0) a
 * block at a time, acquiring and releasing both: fn's last return, or -1
 * and err when either cannot be read. */
int tb_tensor_pair_blocks(const tb_tensor *a, const tb_tensor *b, uint64_t n, tb_block_fn fn, void *ctx, tb_err *err);

/* Give back the pages of elements [start, start+n) once they are read
 * (a no-op unless the bytes are a contiguous view of a file mapping). */
void tb_tensor_drop(const tb_tensor *t, uint64_t start, uint64_t n);

#endif
