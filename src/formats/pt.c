#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/pt.h"
#include "formats/reader.h"
#include "formats/sidecar.h"
#include "base/jsonutil.h"
#include "formats/pickle.h"
#include "formats/zip.h"

/* data.pkl holds names and shapes only: a few hundred bytes per tensor. */
#define PT_MAX_PICKLE (512ull << 20)
/* Dict nesting followed when naming tensors (also stops cycles). */
#define PT_MAX_DEPTH 64
/* Elements of a view that reads its storage more than once (expand): each
 * is visited when compared, so a hostile stride-0 view must stay bounded. */
#define PT_MAX_ALIASED (1ull << 30)

/* Only these suffixes claim a file that does not sniff as torch.save: a raw
 * ".bin" dump beside it must stay a skipped file, not an error. */
static const char *const pt_suffixes[] = {".pt", ".pth", NULL};

/* Records torch writes first (data.pkl in current torch, version in old). */
static const char *const pt_first_records[] = {"data.pkl", "version", ".data/version", ".format_version", "byteorder",
					       ".storage_alignment", NULL};

/* The legacy (pre-1.6) torch.save format opens with a pickle of this
 * number (torch/serialization.py MAGIC_NUMBER = 0x1950a86a20f9469cfc6c,
 * written by legacy_save), so as pickle opcodes: PROTO p, an optional
 * FRAME (protocol 4 and later), then LONG1 of these 10 little-endian bytes. */
static const unsigned char legacy_magic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

static bool legacy_torch(const unsigned char *head, size_t n)
{
	size_t at = 2;

	if (n < 2 || head[0] != 0x80)
		return false;
	if (n > at && head[at] == 0x95) /* FRAME and its 8-byte length */
		at += 9;
	return n >= at + sizeof legacy_magic && !memcmp(head + at, legacy_magic, sizeof legacy_magic);
}

/* A torch.save zip: its first member is one of torch's own records inside
 * the archive folder (any other zip is left alone unless named .pt); or a
 * legacy torch.save file, claimed so it is refused by name. */
static bool pt_sniff(const unsigned char *head, size_t n)
{
	const unsigned char *name, *slash;
	size_t len, rest;

	if (legacy_torch(head, n))
		return true;
	name = tb_zip_head_name(head, n, &len);
	if (!name || !(slash = memchr(name, '/', len)))
		return false;
	rest = len - (size_t)(slash + 1 - name);
	for (int i = 0; pt_first_records[i]; i++)
		if (rest == strlen(pt_first_records[i]) && !memcmp(slash + 1, pt_first_records[i], rest))
			return true;
	return rest > 5 && !memcmp(slash + 1, "data/", 5);
}

enum {
	F_REBUILD_V1,
	F_REBUILD_V2,
	F_REBUILD_V3,
	F_PARAMETER,
	F_PARAMETER_STATE,
	F_SIZE,
	F_DEVICE,
	F_STORAGE = 100, /* + index in storage_types */
	F_DTYPE = 200,   /* + index in torch_dtypes */
};

enum { OBJ_STORAGE = 1, OBJ_TENSOR };

/* Legacy typed storage classes; dtype -1: known, not supported. */
static const struct {
	const char *name;
	int dtype;
} storage_types[] = {
	{"FloatStorage", TB_DT_F32}, {"DoubleStorage", TB_DT_F64}, {"HalfStorage", TB_DT_F16},
	{"BFloat16Storage", TB_DT_BF16}, {"LongStorage", TB_DT_I64}, {"IntStorage", TB_DT_I32},
	{"ShortStorage", TB_DT_I16}, {"CharStorage", TB_DT_I8}, {"ByteStorage", TB_DT_U8},
	{"BoolStorage", TB_DT_BOOL}, {"UntypedStorage", TB_DT_U8}, {"ComplexFloatStorage", -1},
	{"ComplexDoubleStorage", -1}, {"QInt8Storage", -1}, {"QInt32Storage", -1}, {"QUInt8Storage", -1},
	{"QUInt4x2Storage", -1}, {"QUInt2x4Storage", -1},
};
#define UNTYPED_INDEX 10

/* torch dtype globals (the 7th argument of _rebuild_tensor_v3). */
static const struct {
	const char *name;
	int dtype;
} torch_dtypes[] = {
	{"float32", TB_DT_F32}, {"float64", TB_DT_F64}, {"float16", TB_DT_F16}, {"bfloat16", TB_DT_BF16},
	{"float8_e4m3fn", TB_DT_F8_E4M3FN}, {"float8_e5m2", TB_DT_F8_E5M2},
	{"float8_e4m3fnuz", TB_DT_F8_E4M3FNUZ}, {"float8_e5m2fnuz", TB_DT_F8_E5M2FNUZ},
	{"int64", TB_DT_I64}, {"int32", TB_DT_I32}, {"int16", TB_DT_I16}, {"int8", TB_DT_I8},
	{"uint64", TB_DT_U64}, {"uint32", TB_DT_U32}, {"uint16", TB_DT_U16}, {"uint8", TB_DT_U8},
	{"bool", TB_DT_BOOL}, {"complex32", -1}, {"complex64", -1}, {"complex128", -1},
	{"float8_e8m0fnu", -1}, {"float4_e2m1fn_x2", -1},
};

#define N_STORAGE (sizeof storage_types / sizeof *storage_types)
#define N_DTYPE (sizeof torch_dtypes / sizeof *torch_dtypes)

/* The allowlist, built once from the tables above. */
static tb_pk_global pt_globals[16 + N_STORAGE + N_DTYPE];
static pthread_once_t pt_globals_once = PTHREAD_ONCE_INIT;

static void pt_globals_init(void)
{
	static const tb_pk_global fns[] = {
		{"torch._utils", "_rebuild_tensor", F_REBUILD_V1},
		{"torch._utils", "_rebuild_tensor_v2", F_REBUILD_V2},
		{"torch._utils", "_rebuild_tensor_v3", F_REBUILD_V3},
		{"torch._utils", "_rebuild_parameter", F_PARAMETER},
		{"torch._utils", "_rebuild_parameter_with_state", F_PARAMETER_STATE},
		{"torch", "Size", F_SIZE},
		{"torch", "device", F_DEVICE},
		{"torch.storage", "UntypedStorage", F_STORAGE + UNTYPED_INDEX},
	};
	size_t k = 0;

	for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
		pt_globals[k++] = fns[i];
	for (size_t i = 0; i < N_STORAGE; i++)
		pt_globals[k++] = (tb_pk_global){"torch", storage_types[i].name, F_STORAGE + (int)i};
	for (size_t i = 0; i < N_DTYPE; i++)
		pt_globals[k++] = (tb_pk_global){"torch", torch_dtypes[i].name, F_DTYPE + (int)i};
	pt_globals[k] = (tb_pk_global){NULL, NULL, 0};
}

/* A storage: one data/<key> record, shared by every tensor that names it. */
typedef struct pt_storage {
	int type;       /* index in storage_types */
	uint64_t numel; /* in elements of its type (bytes when untyped) */
	tb_blob *blob;
} pt_storage;

typedef struct pt_tensor {
	pt_storage *storage;
	tb_dtype dtype;
	int64_t offset; /* elements */
	int ndim;
	int64_t size[TB_MAX_DIMS], stride[TB_MAX_DIMS];
} pt_tensor;

/* What the hooks need while the pickle runs. */
typedef struct pt_ctx {
	tb_builder *b;
	const tb_file *f;
	const tb_zip *z;
	const char *prefix; /* "archive/" */
	tb_blob **blob_of;  /* per zip entry, once made */
	pt_storage **storage_of;
	const char *dims;   /* the payload's sharding note, given to its tensors */
} pt_ctx;

static int entry_index(const tb_zip *z, const tb_zip_entry *e)
{
	return (int)(e - tb_zip_entry_at(z, 0));
}

static tb_pk_value *pt_persistent_load(tb_pk *pk, tb_pk_value *pid, tb_err *err)
{
	pt_ctx *c = tb_pk_ctx(pk);
	const char *path = c->f->path;
	char rec[TB_MAX_NAME + 64], key[256];
	const tb_zip_entry *e;
	tb_pk_value **v, *out;
	pt_storage *s;
	int64_t numel;
	uint64_t bytes;
	int type, idx;

	if (pid->kind != TB_PK_TUPLE || pid->u.seq.n < 5 || !tb_pk_is_str(pid->u.seq.v[0], "storage")) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "pickle: persistent id is not a ('storage', type, key, location, numel) tuple");
		return NULL;
	}
	v = pid->u.seq.v;
	if (v[1]->kind != TB_PK_GLOBAL || v[1]->u.g.id < F_STORAGE || v[1]->u.g.id >= F_STORAGE + (int)N_STORAGE) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "pickle: storage type is not a torch storage class");
		return NULL;
	}
	type = v[1]->u.g.id - F_STORAGE;
	if (storage_types[type].dtype < 0) {
		tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "torch.%s tensors are not supported",
			    storage_types[type].name);
		return NULL;
	}
	if (v[2]->kind != TB_PK_STR || v[2]->u.s.n == 0 || v[2]->u.s.n >= sizeof key ||
	    memchr(v[2]->u.s.p, '/', v[2]->u.s.n) || memchr(v[2]->u.s.p, 0, v[2]->u.s.n)) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "pickle: storage key is not a plain name");
		return NULL;
	}
	memcpy(key, v[2]->u.s.p, v[2]->u.s.n);
	key[v[2]->u.s.n] = '\0';
	if (!strcmp(key, ".") || !strcmp(key, "..")) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "pickle: storage key is not a plain name");
		return NULL;
	}
	if (tb_pk_get_int(pk, v[4], "storage numel", &numel, err) < 0)
		return NULL;
	if (numel < 0 ||
	    __builtin_mul_overflow((uint64_t)numel, (uint64_t)tb_dtype_size((tb_dtype)storage_types[type].dtype), &bytes)) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "storage '%s': numel %lld is out of range", key, (long long)numel);
		return NULL;
	}
	snprintf(rec, sizeof rec, "%sdata/%s", c->prefix, key);
	e = tb_zip_find(c->z, rec);
	if (!e) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "storage record '%s' is missing", rec);
		return NULL;
	}
	if (e->usize != bytes) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "storage record '%s' holds %llu bytes, the pickle declares %llu (%lld x %s)", rec,
			   (unsigned long long)e->usize, (unsigned long long)bytes, (long long)numel,
			   storage_types[type].name);
		return NULL;
	}
	idx = entry_index(c->z, e);
	s = c->storage_of[idx];
	if (s && (s->type != type || s->numel != (uint64_t)numel)) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "storage '%s' is declared twice with different types or sizes", key);
		return NULL;
	}
	out = tb_pk_object(pk, OBJ_STORAGE, sizeof *s, err);
	if (!out)
		return NULL;
	if (!s) {
		s = out->u.obj.p;
		s->type = type;
		s->numel = (uint64_t)numel;
		if (!c->blob_of[idx]) {
			c->blob_of[idx] = tb_builder_blob(c->b, err);
			if (!c->blob_of[idx] || tb_zip_blob(c->z, e, c->blob_of[idx], err) < 0)
				return NULL;
		}
		s->blob = c->blob_of[idx];
		c->storage_of[idx] = s;
	} else {
		out->u.obj.p = s;
	}
	return out;
}

static tb_pk_value *rebuild_tensor(tb_pk *pk, int id, tb_pk_value *args, tb_err *err)
{
	pt_ctx *c = tb_pk_ctx(pk);
	const char *path = c->f->path;
	size_t n = args->u.seq.n, want = id == F_REBUILD_V1 ? 4 : id == F_REBUILD_V2 ? 6 : 7;
	tb_pk_value **v = args->u.seq.v, *out;
	pt_storage *s;
	pt_tensor *t;
	int nd, ns;

	if (n < want || n > want + 1) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "pickle: tensor rebuild takes %zu or %zu arguments, got %zu", want, want + 1, n);
		return NULL;
	}
	s = tb_pk_as(v[0], OBJ_STORAGE);
	if (!s) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "pickle: tensor rebuild without a storage (got a %s)", tb_pk_kind_name(v[0]->kind));
		return NULL;
	}
	out = tb_pk_object(pk, OBJ_TENSOR, sizeof *t, err);
	if (!out)
		return NULL;
	t = out->u.obj.p;
	t->storage = s;
	t->dtype = (tb_dtype)storage_types[s->type].dtype;
	if (id == F_REBUILD_V3) {
		int d = v[6]->kind == TB_PK_GLOBAL ? v[6]->u.g.id - F_DTYPE : -1;
		if (d < 0 || d >= (int)N_DTYPE) {
			tb_err_setc(err, TB_ERR_FORMAT, path, "pickle: _rebuild_tensor_v3 without a torch dtype");
			return NULL;
		}
		if (torch_dtypes[d].dtype < 0) {
			tb_err_setc(err, TB_ERR_UNSUPPORTED, path, "torch.%s tensors are not supported",
				    torch_dtypes[d].name);
			return NULL;
		}
		t->dtype = (tb_dtype)torch_dtypes[d].dtype;
	}
	if (tb_pk_get_int(pk, v[1], "storage offset", &t->offset, err) < 0)
		return NULL;
	if (t->offset < 0) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "pickle: negative storage offset");
		return NULL;
	}
	nd = tb_pk_get_dims(pk, v[2], "tensor size", t->size, TB_MAX_DIMS, err);
	ns = nd < 0 ? -1 : tb_pk_get_dims(pk, v[3], "tensor stride", t->stride, TB_MAX_DIMS, err);
	if (ns < 0)
		return NULL;
	if (nd != ns) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "pickle: tensor has %d sizes but %d strides", nd, ns);
		return NULL;
	}
	t->ndim = nd;
	return out;
}

static tb_pk_value *pt_reduce(tb_pk *pk, int id, tb_pk_value *args, tb_err *err)
{
	const char *path = tb_pk_path(pk);
	size_t n = args->u.seq.n;

	switch (id) {
	case F_REBUILD_V1:
	case F_REBUILD_V2:
	case F_REBUILD_V3:
		return rebuild_tensor(pk, id, args, err);
	case F_PARAMETER:
	case F_PARAMETER_STATE:
		if (n < 1 || !tb_pk_as(args->u.seq.v[0], OBJ_TENSOR)) {
			tb_err_setc(err, TB_ERR_FORMAT, path, "pickle: _rebuild_parameter without a tensor");
			return NULL;
		}
		return args->u.seq.v[0];
	case F_SIZE:
		if (n == 0)
			return args;
		if (n == 1 && (args->u.seq.v[0]->kind == TB_PK_TUPLE || args->u.seq.v[0]->kind == TB_PK_LIST))
			return args->u.seq.v[0];
		break;
	case F_DEVICE:
		if (n >= 1 && args->u.seq.v[0]->kind == TB_PK_STR)
			return args->u.seq.v[0];
		break;
	default:
		break;
	}
	tb_err_setc(err, TB_ERR_FORMAT, path, "pickle: a torch %s cannot be called here",
		   id >= F_DTYPE ? "dtype" : id >= F_STORAGE ? "storage class" : "function");
	return NULL;
}

/* Turn a rebuilt tensor into a tree tensor. */
static int add_tensor(pt_ctx *c, const pt_tensor *pt, const char *name, bool big, tb_err *err)
{
	tb_tensor *t = tb_builder_add(c->b, c->f->path, "", name, err);
	size_t es;

	if (!t)
		return -1;
	t->dtype = pt->dtype;
	t->dims = c->dims;
	es = tb_dtype_size(pt->dtype);
	t->big_endian = big && es > 1;
	if (tb_tensor_set_shape(t, pt->ndim, pt->size, c->f->path, err) < 0)
		return -1;
	memcpy(t->stride, pt->stride, sizeof pt->stride);
	t->blob = pt->storage->blob;
	if (__builtin_mul_overflow((uint64_t)pt->offset, (uint64_t)es, &t->offset))
		return tb_err_setc(err, TB_ERR_FORMAT, c->f->path, "tensor '%s': storage offset overflows", name);
	if (t->numel > PT_MAX_ALIASED && t->numel * es > t->blob->size)
		return tb_err_setc(err, TB_ERR_LIMIT, c->f->path,
				   "tensor '%s': a view of %llu elements over a %llu-byte storage is too large", name,
				   (unsigned long long)t->numel, (unsigned long long)t->blob->size);
	return tb_tensor_check_bounds(t, c->f->path, err);
}

/* Walk the unpickled object: tensors anywhere in dicts, lists and tuples. */
typedef struct walk {
	pt_ctx *c;
	bool big;
	size_t skipped;
} walk;

static int walk_value(walk *w, const tb_pk_value *v, char *name, size_t len, int depth, tb_err *err);

static int walk_child(walk *w, const tb_pk_value *v, char *name, size_t len, const char *key, size_t klen, int depth,
		      tb_err *err)
{
	size_t add = (len ? 1 : 0) + klen;

	if (len + add > TB_MAX_NAME)
		return tb_err_setc(err, TB_ERR_LIMIT, w->c->f->path, "tensor name longer than %d bytes", TB_MAX_NAME);
	if (len)
		name[len] = '.';
	memcpy(name + len + (len ? 1 : 0), key, klen);
	name[len + add] = '\0';
	int rc = walk_value(w, v, name, len + add, depth + 1, err);
	name[len] = '\0';
	return rc;
}

static int walk_value(walk *w, const tb_pk_value *v, char *name, size_t len, int depth, tb_err *err)
{
	const pt_tensor *t = tb_pk_as(v, OBJ_TENSOR);
	const char *path = w->c->f->path;
	char idx[32];

	if (t)
		return add_tensor(w->c, t, name, w->big, err);
	if (depth > PT_MAX_DEPTH)
		return tb_err_setc(err, TB_ERR_LIMIT, path, "containers nested deeper than %d (or a cycle)",
				   PT_MAX_DEPTH);
	if (v->kind == TB_PK_DICT) {
		for (size_t i = 0; i + 1 < v->u.seq.n; i += 2) {
			const tb_pk_value *k = v->u.seq.v[i];
			int rc;
			if (k->kind == TB_PK_STR) {
				if (k->u.s.n == 0 || memchr(k->u.s.p, 0, k->u.s.n) || !tb_utf8_valid(k->u.s.p, k->u.s.n))
					return tb_err_setc(err, TB_ERR_FORMAT, path, "dict key is empty, holds a NUL or is not UTF-8");
				rc = walk_child(w, v->u.seq.v[i + 1], name, len, (const char *)k->u.s.p, k->u.s.n, depth, err);
			} else if (k->kind == TB_PK_INT) {
				snprintf(idx, sizeof idx, "%lld", (long long)k->u.i);
				rc = walk_child(w, v->u.seq.v[i + 1], name, len, idx, strlen(idx), depth, err);
			} else {
				return tb_err_setc(err, TB_ERR_FORMAT, path, "dict key of type %s cannot name a tensor", tb_pk_kind_name(k->kind));
			}
			if (rc < 0)
				return -1;
		}
		return 0;
	}
	if (v->kind == TB_PK_LIST || v->kind == TB_PK_TUPLE) {
		for (size_t i = 0; i < v->u.seq.n; i++) {
			snprintf(idx, sizeof idx, "%zu", i);
			if (walk_child(w, v->u.seq.v[i], name, len, idx, strlen(idx), depth, err) < 0)
				return -1;
		}
		return 0;
	}
	w->skipped++;
	return 0;
}

/* The archive prefix: text before the first '/' of the first member. */
static int archive_prefix(const tb_zip *z, const char *path, char *prefix, size_t size, tb_err *err)
{
	const tb_zip_entry *first = tb_zip_entry_at(z, 0);
	const char *slash;

	if (!first)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "torch.save archive is empty");
	slash = strchr(first->name, '/');
	if (!slash || (size_t)(slash - first->name) + 2 > size)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "not a torch.save archive: first member '%s' is not inside a folder",
				  first->name);
	snprintf(prefix, size, "%.*s/", (int)(slash - first->name), first->name);
	return 0;
}

/* torch.jit.save writes the module's code under code/ and its tensor
 * constants to constants.pkl beside data.pkl (torch/csrc/jit/docs/
 * serialization.md); torch.save writes neither. */
static bool torchscript(const tb_zip *z, const char *prefix)
{
	char rec[TB_MAX_NAME + 32];
	size_t n = strlen(prefix);

	snprintf(rec, sizeof rec, "%sconstants.pkl", prefix);
	if (tb_zip_find(z, rec))
		return true;
	for (size_t i = 0; i < tb_zip_count(z); i++) {
		const char *name = tb_zip_entry_at(z, i)->name;
		if (!strncmp(name, prefix, n) && !strncmp(name + n, "code/", 5))
			return true;
	}
	return false;
}

static int read_byteorder(const tb_zip *z, const char *prefix, const char *path, bool *big, tb_err *err)
{
	char rec[TB_MAX_NAME + 32];
	const unsigned char *d;
	unsigned char *owned;
	const tb_zip_entry *e;
	size_t n;

	*big = false;
	snprintf(rec, sizeof rec, "%sbyteorder", prefix);
	e = tb_zip_find(z, rec);
	if (!e)
		return 0; /* older torch: native, i.e. little-endian for the files we meet */
	if (tb_zip_read(z, e, 64, &d, &owned, err) < 0)
		return -1;
	n = (size_t)e->usize;
	while (n && (d[n - 1] == '\n' || d[n - 1] == ' '))
		n--;
	if (n == 3 && !memcmp(d, "big", 3))
		*big = true;
	else if (!(n == 6 && !memcmp(d, "little", 6))) {
		free(owned);
		return tb_err_setc(err, TB_ERR_FORMAT, path, "byteorder record says neither 'little' nor 'big'");
	}
	free(owned);
	return 0;
}

/* The entry of a dict under a string key, or NULL. */
static const tb_pk_value *dict_get(const tb_pk_value *d, const char *key)
{
	size_t n = strlen(key);

	if (d->kind != TB_PK_DICT)
		return NULL;
	for (size_t i = 0; i + 1 < d->u.seq.n; i += 2) {
		const tb_pk_value *k = d->u.seq.v[i];
		if (k->kind == TB_PK_STR && k->u.s.n == n && !memcmp(k->u.s.p, key, n))
			return d->u.seq.v[i + 1];
	}
	return NULL;
}

/* named: the caller's name for the payload (a dumper's record, see pt.h),
 * or NULL to name tensors by the file and the dict keys. */
static int index_archive(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, const char *named,
			 tb_err *err)
{
	tb_pk_hooks hooks = {.reduce = pt_reduce, .persistent_load = pt_persistent_load};
	char aprefix[TB_MAX_NAME + 2], rec[TB_MAX_NAME + 32], *name = NULL;
	const unsigned char *pkl;
	unsigned char *owned = NULL;
	const tb_zip_entry *e;
	tb_pk_value *root;
	pt_ctx c = {0};
	tb_pk *pk = NULL;
	tb_zip *z;
	walk w = {0};
	int rc = -1;

	if (legacy_torch(f->data, f->size < TB_SNIFF_BYTES ? (size_t)f->size : TB_SNIFF_BYTES))
		return tb_err_setc(err, TB_ERR_UNSUPPORTED, f->path,
				   "a legacy (pre-1.6) torch.save file: re-save with torch>=1.6");
	if (f->size >= 2 && f->data[0] == 0x80)
		return tb_err_setc(err, TB_ERR_UNSUPPORTED, f->path,
				   "a bare pickle, not a torch.save archive (nor a legacy one)");
	if (tb_zip_open(f, &z, err) < 0)
		return -1;
	if (archive_prefix(z, f->path, aprefix, sizeof aprefix, err) < 0)
		goto out;
	if (torchscript(z, aprefix)) {
		tb_err_setc(err, TB_ERR_UNSUPPORTED, f->path,
			    "a TorchScript archive (torch.jit.save), not torch.save: save its state_dict() with torch.save");
		goto out;
	}
	snprintf(rec, sizeof rec, "%sdata.pkl", aprefix);
	e = tb_zip_find(z, rec);
	if (!e) {
		tb_err_setc(err, TB_ERR_FORMAT, f->path, "not a torch.save archive: no '%s'", rec);
		goto out;
	}
	if (read_byteorder(z, aprefix, f->path, &w.big, err) < 0 ||
	    tb_zip_read(z, e, PT_MAX_PICKLE, &pkl, &owned, err) < 0)
		goto out;
	pthread_once(&pt_globals_once, pt_globals_init);
	hooks.globals = pt_globals;
	hooks.ctx = &c;
	c.b = b;
	c.f = f;
	c.z = z;
	c.prefix = aprefix;
	c.blob_of = calloc(tb_zip_count(z), sizeof *c.blob_of);
	c.storage_of = calloc(tb_zip_count(z), sizeof *c.storage_of);
	name = malloc(TB_MAX_NAME + 1);
	pk = tb_pk_new(f->path, &hooks);
	if (!c.blob_of || !c.storage_of || !name || !pk) {
		tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
		goto out;
	}
	if (tb_pk_run(pk, pkl, (size_t)e->usize, owned ? -1 : (int64_t)e->data_off, &root, err) < 0) {
		tb_err_prefix(err, "%s", rec);
		goto out;
	}
	w.c = &c;
	if (named) {
		const tb_pk_value *value = dict_get(root, "value"), *meta = dict_get(root, "meta");
		const tb_pk_value *dims = meta ? dict_get(meta, "dims") : NULL;
		if (dims && dims->kind == TB_PK_STR && dims->u.s.n < 256 && !memchr(dims->u.s.p, 0, dims->u.s.n) &&
		    !(c.dims = tb_builder_keep(b, (const char *)dims->u.s.p, dims->u.s.n))) {
			tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
			goto out;
		}
		snprintf(name, TB_MAX_NAME + 1, "%s", named);
		/* a record whose value holds no tensor (SGLang's rids, a list of
		 * request ids) is bookkeeping: nothing to note */
		if (walk_value(&w, value ? value : root, name, strlen(name), 0, err) < 0)
			goto out;
		rc = 0;
		goto out;
	}
	/* A lone tensor takes the file's name; a dict's keys are names; a list's
	 * indices are not, so they stay under the file's name. */
	if (root->kind == TB_PK_DICT)
		snprintf(name, TB_MAX_NAME + 1, "%.*s", (int)(strlen(prefix) ? strlen(prefix) - 1 : 0), prefix);
	else
		snprintf(name, TB_MAX_NAME + 1, "%s", stem);
	if (walk_value(&w, root, name, strlen(name), 0, err) < 0)
		goto out;
	if (w.skipped)
		tb_builder_note(b, "%s: %zu non-tensor values ignored", f->path, w.skipped);
	rc = 0;
out:
	tb_pk_free(pk);
	free(owned);
	free(name);
	free(c.blob_of);
	free(c.storage_of);
	tb_zip_free(z);
	return rc;
}

static int pt_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	if (tb_sidecar_check_vllm_record(f->path, err) < 0)
		return -1;
	return index_archive(b, f, stem, prefix, NULL, err);
}

int tb_pt_index_named(tb_builder *b, const tb_file *f, const char *name, tb_err *err)
{
	return index_archive(b, f, name, "", name, err);
}

const tb_format tb_fmt_pt = {
	.name = "torch",
	.label = ".pt, .pth, .bin (torch.save)",
	.suffixes = pt_suffixes,
	.sniff = pt_sniff,
	.index = pt_index,
};
