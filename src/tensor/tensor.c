#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

tb_blob *tb_blob_new(void)
{
	tb_blob *b = calloc(1, sizeof *b);

	if (b)
		pthread_mutex_init(&b->lock, NULL);
	return b;
}

void tb_blob_free(tb_blob *b)
{
	if (!b)
		return;
	free(b->owned);
	if (b->ops && b->ops->free_ctx)
		b->ops->free_ctx(b->ctx);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

void tb_blob_set_mapped(tb_blob *b, const tb_file *f, uint64_t offset, uint64_t size)
{
	b->file = f;
	b->offset = offset;
	b->size = size;
}

void tb_blob_set_owned(tb_blob *b, unsigned char *data, uint64_t size)
{
	free(b->owned);
	b->owned = data;
	b->data = data;
	b->size = size;
}

void tb_blob_set_lazy(tb_blob *b, const tb_blob_ops *ops, void *ctx, uint64_t size)
{
	b->ops = ops;
	b->ctx = ctx;
	b->size = size;
}

/* whole: the reader needs all the bytes in place (b->data), not a window. */
static int blob_acquire(tb_blob *b, bool whole, tb_err *err)
{
	int rc = 0;

	pthread_mutex_lock(&b->lock);
	if (b->file && b->refs == 0) {
		b->data = tb_file_view(b->file, b->offset, b->size);
		if (!b->data)
			rc = tb_err_setc(err, TB_ERR_FORMAT, b->file->path, "data range leaves the file");
	} else if (b->ops) {
		if (b->refs == 0 && b->ops->open)
			rc = b->ops->open(b->ctx, err);
		if (rc == 0 && whole && b->whole == 0) {
			unsigned char *data = NULL;
			rc = b->ops->load(b->ctx, b->size, &data, err);
			b->owned = data;
			b->data = data;
			if (rc < 0 && b->refs == 0 && b->ops->close)
				b->ops->close(b->ctx);
		}
	}
	if (rc == 0) {
		b->refs++;
		b->whole += whole;
	}
	pthread_mutex_unlock(&b->lock);
	return rc;
}

static void blob_release(tb_blob *b, bool whole)
{
	pthread_mutex_lock(&b->lock);
	if (b->refs > 0) {
		b->refs--;
		b->whole -= whole;
		if (b->file && b->refs == 0) {
			tb_file_drop(b->file, b->offset, b->size);
			b->data = NULL;
		} else if (b->ops) {
			if (whole && b->whole == 0) {
				free(b->owned);
				b->owned = NULL;
				b->data = NULL;
			}
			if (b->refs == 0 && b->ops->close)
				b->ops->close(b->ctx);
		}
	}
	pthread_mutex_unlock(&b->lock);
}

/* Does t read its blob through the blob's window?  A strided view would
 * jump about its bytes, each jump back restarting the stream, so it loads
 * them whole instead. */
static bool windowed(const tb_tensor *t)
{
	return t->blob->ops && t->blob->ops->window && t->contiguous;
}

int tb_tensor_set_shape(tb_tensor *t, int ndim, const int64_t *shape, const char *file, tb_err *err)
{
	uint64_t n = 1, bytes;

	if (ndim < 0 || ndim > TB_MAX_DIMS)
		return tb_err_setc(err, TB_ERR_LIMIT, file, "tensor '%s': rank %d is not supported (max %d)", t->name,
				   ndim, TB_MAX_DIMS);
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 0)
			return tb_err_setc(err, TB_ERR_FORMAT, file, "tensor '%s': negative dimension %lld", t->name,
					  (long long)shape[i]);
		if (__builtin_mul_overflow(n, (uint64_t)shape[i], &n))
			return tb_err_setc(err, TB_ERR_FORMAT, file, "tensor '%s': element count overflows", t->name);
	}
	if (__builtin_mul_overflow(n, (uint64_t)tb_dtype_size(t->dtype), &bytes) || bytes > INT64_MAX)
		return tb_err_setc(err, TB_ERR_FORMAT, file, "tensor '%s': byte size overflows", t->name);
	/* With a zero dimension the element count cannot overflow, but the
	 * strides of the other dimensions still can. */
	int64_t s = 1, stride[TB_MAX_DIMS];
	for (int i = ndim - 1; i >= 0; i--) {
		stride[i] = s;
		if (__builtin_mul_overflow(s, shape[i] ? shape[i] : 1, &s))
			return tb_err_setc(err, TB_ERR_FORMAT, file, "tensor '%s': its strides overflow", t->name);
	}
	t->ndim = ndim;
	t->numel = n;
	for (int i = 0; i < ndim; i++) {
		t->shape[i] = shape[i];
		t->stride[i] = stride[i];
	}
	t->contiguous = true;
	return 0;
}

int tb_tensor_check_bounds(tb_tensor *t, const char *file, tb_err *err)
{
	uint64_t last = 0, es = tb_dtype_size(t->dtype), end;
	int64_t expect = 1;

	t->contiguous = true;
	for (int i = t->ndim - 1; i >= 0; i--) {
		if (t->stride[i] < 0)
			return tb_err_setc(err, TB_ERR_FORMAT, file, "tensor '%s': negative stride", t->name);
		if (t->shape[i] > 1 && t->stride[i] != expect)
			t->contiguous = false;
		expect *= t->shape[i] ? t->shape[i] : 1;
	}
	if (!t->blob)
		return tb_err_setc(err, TB_ERR_FORMAT, file, "tensor '%s': no data", t->name);
	if (t->numel == 0)
		return t->offset <= t->blob->size ? 0
						  : tb_err_setc(err, TB_ERR_FORMAT, file, "tensor '%s': data offset leaves the file", t->name);
	for (int i = 0; i < t->ndim; i++) {
		uint64_t step;
		if (__builtin_mul_overflow((uint64_t)(t->shape[i] - 1), (uint64_t)t->stride[i], &step) ||
		    __builtin_add_overflow(last, step, &last))
			return tb_err_setc(err, TB_ERR_FORMAT, file, "tensor '%s': view extent overflows", t->name);
	}
	if (__builtin_mul_overflow(last + 1, es, &end) || __builtin_add_overflow(end, t->offset, &end) ||
	    end > t->blob->size)
		return tb_err_setc(err, TB_ERR_FORMAT, file, "tensor '%s': data extends past its storage (%llu bytes needed, %llu present)",
				  t->name, (unsigned long long)end, (unsigned long long)t->blob->size);
	return 0;
}

/* shape without its leading size-1 axes into out; the new rank. */
int tb_shape_squeeze(int ndim, const int64_t *shape, int64_t *out)
{
	int k = 0, n = 0;

	while (k < ndim && shape[k] == 1)
		k++;
	for (; k < ndim; k++)
		out[n++] = shape[k];
	return n;
}

int tb_tensor_squeezed(const tb_tensor *t, int64_t *shape)
{
	return tb_shape_squeeze(t->ndim, t->shape, shape);
}

void tb_shape_format(int ndim, const int64_t *shape, char *buf, size_t size)
{
	size_t len = 0;

	len += (size_t)snprintf(buf, size, "[");
	for (int i = 0; i < ndim && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (len < size)
		snprintf(buf + len, size - len, "]");
}

void tb_partial_describe(const tb_partial *p, char *buf, size_t size)
{
	uint64_t whole = 1;
	char shape[128];

	for (int d = 0; d < p->ndim; d++)
		whole *= (uint64_t)p->shape[d];
	tb_shape_format(p->ndim, p->shape, shape, sizeof shape);
	/* every value of one position: a dump of the last position only */
	if (p->n == whole && p->ndim >= 1 && whole == (uint64_t)p->shape[p->ndim - 1]) {
		snprintf(buf, size, "the last position only (%llu values), read at the other side's last",
			 (unsigned long long)p->n);
		return;
	}
	snprintf(buf, size, "%llu of %llu values dumped (whole shape %s)", (unsigned long long)p->n,
		 (unsigned long long)whole, shape);
}

bool tb_partial_same(const tb_partial *a, const tb_partial *b)
{
	int64_t sa[TB_MAX_DIMS], sb[TB_MAX_DIMS];
	int na, nb;

	if (!a || !b)
		return false;
	if (a == b)
		return true;
	na = tb_shape_squeeze(a->ndim, a->shape, sa);
	nb = tb_shape_squeeze(b->ndim, b->shape, sb);
	return na == nb && !memcmp(sa, sb, (size_t)na * sizeof *sa) && a->n == b->n &&
	       (a->n == 0 || !memcmp(a->index, b->index, (size_t)a->n * sizeof *a->index));
}

static uint64_t count(int n, const int64_t *shape)
{
	uint64_t c = 1;

	for (int i = 0; i < n; i++)
		c *= (uint64_t)shape[i];
	return c;
}

bool tb_partial_place(const tb_partial *p, const tb_tensor *t, uint64_t *base)
{
	int64_t sp[TB_MAX_DIMS], st[TB_MAX_DIMS];
	int np = tb_shape_squeeze(p->ndim, p->shape, sp), nt = tb_shape_squeeze(t->ndim, t->shape, st);
	uint64_t n = count(np, sp);

	*base = 0;
	if (t->partial)
		return false;
	if (np == nt && !memcmp(sp, st, (size_t)np * sizeof *sp))
		return true;
	/* the same positions, heads split from channels ([S, heads, d] against
	 * [S, heads*d]): the same C order */
	if (np >= 1 && nt >= 1 && sp[0] == st[0] && n == t->numel)
		return true;
	/* one position (llama.cpp computes the last layer's outputs for the
	 * last token only) against all of them: the last one */
	if (nt >= 2 && st[0] > 1 && count(nt - 1, st + 1) == n && !(np >= 1 && sp[0] == st[0])) {
		*base = (uint64_t)(st[0] - 1) * n;
		return true;
	}
	return false;
}

/* Bytes from element 0 to the last reachable element. */
static uint64_t extent_bytes(const tb_tensor *t)
{
	uint64_t last = 0;

	if (t->numel == 0)
		return 0;
	for (int i = 0; i < t->ndim; i++)
		last += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->stride[i];
	return (last + 1) * tb_dtype_size(t->dtype);
}

int tb_tensor_acquire(const tb_tensor *t, tb_err *err)
{
	if (t->sketch)
		return tb_err_setc(err, TB_ERR_UNSUPPORTED, t->path,
				   "'%s' is a sketch: its values are not here (this needs the tree itself)", t->name);
	if (t->parts) {
		for (int k = 0; k < t->parts->n; k++) {
			if (tb_tensor_acquire(t->parts->part[k], err) < 0) {
				while (k-- > 0)
					tb_tensor_release(t->parts->part[k]);
				return -1;
			}
		}
		return 0;
	}
	if (blob_acquire(t->blob, !windowed(t), err) < 0)
		return -1;
	/* Read-ahead for this tensor only: a blob may be a whole multi-GB
	 * container. */
	if (t->blob->file)
		tb_file_will_read(t->blob->file, t->blob->offset + t->offset, extent_bytes(t));
	return 0;
}

void tb_tensor_release(const tb_tensor *t)
{
	if (t->parts) {
		for (int k = 0; k < t->parts->n; k++)
			tb_tensor_release(t->parts->part[k]);
		return;
	}
	blob_release(t->blob, !windowed(t));
}

bool tb_tensor_streamed(const tb_tensor *t)
{
	if (t->parts) {
		for (int k = 0; k < t->parts->n; k++)
			if (tb_tensor_streamed(t->parts->part[k]))
				return true;
		return false;
	}
	return t->blob && windowed(t); /* a sketch's tensor has no bytes here */
}

const void *tb_tensor_data(const tb_tensor *t)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	bool native = t->big_endian || tb_dtype_size(t->dtype) == 1;
#else
	bool native = !t->big_endian || tb_dtype_size(t->dtype) == 1;
#endif
	/* A windowed tensor never holds its bytes in place: another reader's
	 * whole load of its blob is that reader's, not this one's. */
	if (t->parts || !native || !t->contiguous || windowed(t) || !t->blob->data)
		return NULL;
	return t->blob->data + t->offset;
}

const float *tb_tensor_f32_direct(const tb_tensor *t)
{
	const unsigned char *p = t->dtype == TB_DT_F32 ? tb_tensor_data(t) : NULL;

	return p && ((uintptr_t)p % sizeof(float)) == 0 ? (const float *)(const void *)p : NULL;
}

/* Elements per step of axis: the product of the dims after it. */
static uint64_t inner_size(const tb_tensor *t, int axis)
{
	uint64_t inner = 1;

	for (int d = axis + 1; d < t->ndim; d++)
		inner *= (uint64_t)t->shape[d];
	return inner;
}

/* Split elements [start, start+n) of a composite into runs that each lie
 * in one part: visit(part, start in the part, run length, offset in the
 * range).  A sum visits every part over the whole range. */
typedef void (*run_fn)(const tb_tensor *part, uint64_t start, uint64_t n, uint64_t done, void *ctx);

static void parts_runs(const tb_tensor *t, uint64_t start, uint64_t n, run_fn visit, void *ctx)
{
	const tb_tensor_parts *p = t->parts;
	uint64_t done = 0;

	if (p->kind == TB_PARTS_SUM) {
		for (int k = 0; k < p->n; k++)
			visit(p->part[k], start, n, 0, ctx);
		return;
	}
	if (p->kind == TB_PARTS_GATHER) {
		/* Runs of consecutive indices read as one. */
		const uint64_t *ix = p->index + start;
		while (done < n) {
			uint64_t m = 1;
			while (done + m < n && ix[done + m] == ix[done] + m)
				m++;
			visit(p->part[0], ix[done], m, done, ctx);
			done += m;
		}
		return;
	}
	if (p->kind == TB_PARTS_COLUMNS) {
		const tb_tensor *src = p->part[0];
		uint64_t w = (uint64_t)t->shape[t->ndim - 1], sw = (uint64_t)src->shape[src->ndim - 1];
		while (done < n) {
			uint64_t row = (start + done) / w, col = (start + done) % w, m = w - col;
			if (m > n - done)
				m = n - done;
			visit(src, row * sw + (uint64_t)p->start + col, m, done, ctx);
			done += m;
		}
		return;
	}
	uint64_t inner = inner_size(t, p->axis), row = (uint64_t)t->shape[p->axis] * inner;
	while (done < n) {
		uint64_t o = (start + done) / row, r = (start + done) % row;
		int lo = 0, hi = p->n - 1;
		while (lo < hi) {
			int mid = (lo + hi + 1) / 2;
			if ((uint64_t)p->at[mid] * inner <= r)
				lo = mid;
			else
				hi = mid - 1;
		}
		uint64_t first = (uint64_t)p->at[lo] * inner, len = (uint64_t)(p->at[lo + 1] - p->at[lo]) * inner;
		uint64_t m = first + len - r;
		if (m > n - done)
			m = n - done;
		visit(p->part[lo], o * len + (r - first), m, done, ctx);
		done += m;
	}
}

typedef struct read_ctx {
	float *out;
	bool add; /* sum: every part after the first adds to out */
} read_ctx;

static void read_run(const tb_tensor *part, uint64_t start, uint64_t n, uint64_t done, void *ctx)
{
	read_ctx *rc = ctx;
	float tmp[1024];

	if (!rc->add) {
		tb_tensor_read_f32(part, start, n, rc->out + done);
		return;
	}
	for (uint64_t i = 0; i < n; i += sizeof tmp / sizeof *tmp) {
		uint64_t m = n - i < sizeof tmp / sizeof *tmp ? n - i : sizeof tmp / sizeof *tmp;
		tb_tensor_read_f32(part, start + i, m, tmp);
		for (uint64_t j = 0; j < m; j++)
			rc->out[done + i + j] += tmp[j];
	}
}

/* Decode elements [start, start+n) of a windowed tensor a window at a
 * time, holding the blob's lock: the window is one stream that every
 * reader of the blob moves. */
static void read_window(const tb_tensor *t, uint64_t start, uint64_t n, float *out)
{
	tb_blob *b = t->blob;
	size_t es = tb_dtype_size(t->dtype);
	uint64_t at = t->offset + start * es, done = 0, got;

	pthread_mutex_lock(&b->lock);
	while (done < n) {
		const unsigned char *p = b->ops->window(b->ctx, at + done * es, (n - done) * es, &got);
		if (!p) {
			/* The source was checked when its tree opened, so only a
			 * file changed since then fails here; reads have no error
			 * channel, and NaN shows the damage where zeros would hide
			 * it. */
			while (done < n)
				out[done++] = NAN;
			break;
		}
		tb_dtype_to_f32(t->dtype, p, (size_t)(got / es), t->big_endian, out + done);
		done += got / es;
	}
	pthread_mutex_unlock(&b->lock);
}

void tb_tensor_read_f32(const tb_tensor *t, uint64_t start, uint64_t n, float *out)
{
	size_t es = tb_dtype_size(t->dtype);
	int64_t idx[TB_MAX_DIMS];
	uint64_t rem, done = 0;
	int last = t->ndim - 1;

	/* Nothing to read; with a zero dim the index split below would divide by zero. */
	if (n == 0)
		return;
	if (t->parts && t->parts->kind == TB_PARTS_SUM) {
		read_ctx rc = {.out = out, .add = true};
		tb_tensor_read_f32(t->parts->part[0], start, n, out);
		for (int k = 1; k < t->parts->n; k++)
			read_run(t->parts->part[k], start, n, 0, &rc);
		return;
	}
	if (t->parts) {
		read_ctx rc = {.out = out};
		parts_runs(t, start, n, read_run, &rc);
		return;
	}
	if (windowed(t)) {
		read_window(t, start, n, out);
		return;
	}
	const unsigned char *base = t->blob->data + t->offset;
	if (t->contiguous || t->ndim == 0) {
		tb_dtype_to_f32(t->dtype, base + start * es, n, t->big_endian, out);
		return;
	}
	rem = start;
	for (int i = last; i >= 0; i--) {
		idx[i] = (int64_t)(rem % (uint64_t)t->shape[i]);
		rem /= (uint64_t)t->shape[i];
	}
	while (done < n) {
		uint64_t off = 0, run = (uint64_t)(t->shape[last] - idx[last]);
		int64_t s = t->stride[last];

		for (int i = 0; i <= last; i++)
			off += (uint64_t)idx[i] * (uint64_t)t->stride[i];
		if (run > n - done)
			run = n - done;
		if (s == 1) {
			tb_dtype_to_f32(t->dtype, base + off * es, run, t->big_endian, out + done);
		} else {
			for (uint64_t j = 0; j < run; j++)
				tb_dtype_to_f32(t->dtype, base + (off + j * (uint64_t)s) * es, 1, t->big_endian,
						out + done + j);
		}
		done += run;
		idx[last] += (int64_t)run;
		for (int i = last; i > 0 && idx[i] >= t->shape[i]; i--) {
			idx[i] = 0;
			idx[i - 1]++;
		}
	}
}

/* Elements per block of tb_tensor_pair_blocks. */
#define PAIR_BLOCK (1u << 14)

int tb_tensor_pair_blocks(const tb_tensor *a, const tb_tensor *b, uint64_t n, tb_block_fn fn, void *ctx, tb_err *err)
{
	float x[PAIR_BLOCK], y[PAIR_BLOCK];
	int rc = 0;

	if (n == 0 || n > a->numel)
		n = a->numel;
	if (n > b->numel)
		n = b->numel;
	if (tb_tensor_acquire(a, err) < 0)
		return -1;
	if (tb_tensor_acquire(b, err) < 0) {
		tb_tensor_release(a);
		return -1;
	}
	/* float32 in place is handed over as it is: a copy would be the
	 * walk's main cost. */
	const float *da = tb_tensor_f32_direct(a), *db = tb_tensor_f32_direct(b);
	for (uint64_t off = 0; rc == 0 && off < n; off += PAIR_BLOCK) {
		size_t k = n - off < PAIR_BLOCK ? (size_t)(n - off) : PAIR_BLOCK;
		if (!da)
			tb_tensor_read_f32(a, off, k, x);
		if (!db)
			tb_tensor_read_f32(b, off, k, y);
		rc = fn(ctx, da ? da + off : x, db ? db + off : y, k, off);
	}
	tb_tensor_release(a);
	tb_tensor_release(b);
	return rc;
}

/* Runs of a shard split on a late axis are short (a row's share): giving
 * back pages run by run would cost a system call per row, so only long
 * runs are given back. */
#define DROP_MIN_BYTES (1u << 20)

static void drop_run(const tb_tensor *part, uint64_t start, uint64_t n, uint64_t done, void *ctx)
{
	(void)done;
	(void)ctx;
	if (n * tb_dtype_size(part->dtype) >= DROP_MIN_BYTES)
		tb_tensor_drop(part, start, n);
}

void tb_tensor_drop(const tb_tensor *t, uint64_t start, uint64_t n)
{
	size_t es = tb_dtype_size(t->dtype);

	if (t->parts) {
		parts_runs(t, start, n, drop_run, NULL);
		return;
	}
	if (t->blob->file && t->contiguous)
		tb_file_drop(t->blob->file, t->blob->offset + t->offset + start * es, n * es);
}
