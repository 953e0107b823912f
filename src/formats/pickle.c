#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "formats/pickle.h"

/* Longest module or name of a GLOBAL opcode. */
#define MAX_GLOBAL_PART 256
#define BLOCK_VALUES 1024

/* Globals the machine handles itself. */
enum {
	G_ORDERED_DICT = -1,
	G_CODECS_ENCODE = -2,
	G_SET = -3,
	G_FROZENSET = -4,
	G_BYTEARRAY = -5,
};

static const tb_pk_global builtin_globals[] = {
	{"collections", "OrderedDict", G_ORDERED_DICT},
	{"_codecs", "encode", G_CODECS_ENCODE},
	{"builtins", "set", G_SET},
	{"builtins", "frozenset", G_FROZENSET},
	{"builtins", "bytearray", G_BYTEARRAY},
	{NULL, NULL, 0},
};

/* Python 2 module names that protocol-2 pickles use, as Python 3 reads them. */
static const struct {
	const char *py2, *py3;
} module_renames[] = {
	{"__builtin__", "builtins"},
	{"copy_reg", "copyreg"},
};

typedef struct block {
	struct block *next;
	size_t used;
	tb_pk_value v[BLOCK_VALUES];
} block;

typedef struct memo_slot {
	uint32_t key;
	bool used;
	tb_pk_value *v;
} memo_slot;

struct tb_pk {
	const char *path;
	const tb_pk_hooks *hooks;
	block *blocks;
	size_t n_values;
	void **allocs; /* payloads, arrays, strings */
	size_t n_allocs, cap_allocs;
	tb_pk_value **stack;
	size_t sp, stack_cap;
	size_t *marks;
	size_t n_marks, marks_cap;
	memo_slot *memo;
	size_t memo_n, memo_cap;
	const unsigned char *in;
	size_t pos, len;
	int64_t base;
};

static tb_pk_value none_value = {.kind = TB_PK_NONE};
static tb_pk_value true_value = {.kind = TB_PK_BOOL, .u.b = true};
static tb_pk_value false_value = {.kind = TB_PK_BOOL, .u.b = false};

tb_pk *tb_pk_new(const char *path, const tb_pk_hooks *hooks)
{
	tb_pk *pk = calloc(1, sizeof *pk);

	if (pk) {
		pk->path = path;
		pk->hooks = hooks;
	}
	return pk;
}

void tb_pk_free(tb_pk *pk)
{
	if (!pk)
		return;
	for (block *b = pk->blocks, *next; b; b = next) {
		next = b->next;
		for (size_t i = 0; i < b->used; i++) {
			tb_pk_kind k = b->v[i].kind;
			if (k == TB_PK_TUPLE || k == TB_PK_LIST || k == TB_PK_DICT || k == TB_PK_SET)
				free(b->v[i].u.seq.v);
		}
		free(b);
	}
	for (size_t i = 0; i < pk->n_allocs; i++)
		free(pk->allocs[i]);
	free(pk->allocs);
	free(pk->stack);
	free(pk->marks);
	free(pk->memo);
	free(pk);
}

void *tb_pk_ctx(const tb_pk *pk)
{
	return pk->hooks->ctx;
}

const char *tb_pk_path(const tb_pk *pk)
{
	return pk->path;
}

/* Errors name the file and the opcode's offset in the pickle. */
static int pk_vfail(tb_pk *pk, tb_status_code code, tb_err *err, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof msg, fmt, ap);
	return tb_err_setc(err, code, pk->path, "pickle: %s (at byte %zu)", msg, pk->pos);
}

/* A broken pickle. */
__attribute__((format(printf, 3, 4))) static int pk_fail(tb_pk *pk, tb_err *err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = pk_vfail(pk, TB_ERR_FORMAT, err, fmt, ap);
	va_end(ap);
	return rc;
}

/* A well-formed pickle of something the caller does not read (a pickled
 * config beside golden logits). */
__attribute__((format(printf, 3, 4))) static int pk_unsupported(tb_pk *pk, tb_err *err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = pk_vfail(pk, TB_ERR_UNSUPPORTED, err, fmt, ap);
	va_end(ap);
	return rc;
}

static tb_pk_value *new_value(tb_pk *pk, tb_pk_kind kind, tb_err *err)
{
	block *b = pk->blocks;

	if (pk->n_values >= TB_PK_MAX_VALUES) {
		pk_fail(pk, err, "more than %d values", TB_PK_MAX_VALUES);
		return NULL;
	}
	if (!b || b->used == BLOCK_VALUES) {
		b = calloc(1, sizeof *b);
		if (!b) {
			tb_err_setc(err, TB_ERR_NOMEM, pk->path, "out of memory");
			return NULL;
		}
		b->next = pk->blocks;
		pk->blocks = b;
	}
	pk->n_values++;
	b->v[b->used].kind = kind;
	return &b->v[b->used++];
}

void *tb_pk_alloc(tb_pk *pk, size_t size, tb_err *err)
{
	void *p;

	if (pk->n_allocs == pk->cap_allocs) {
		size_t cap = pk->cap_allocs ? pk->cap_allocs * 2 : 64;
		void **a = realloc(pk->allocs, cap * sizeof *a);
		if (!a) {
			tb_err_setc(err, TB_ERR_NOMEM, pk->path, "out of memory");
			return NULL;
		}
		pk->allocs = a;
		pk->cap_allocs = cap;
	}
	p = calloc(1, size ? size : 1);
	if (!p) {
		tb_err_setc(err, TB_ERR_NOMEM, pk->path, "out of memory");
		return NULL;
	}
	pk->allocs[pk->n_allocs++] = p;
	return p;
}

tb_pk_value *tb_pk_object(tb_pk *pk, int type, size_t size, tb_err *err)
{
	tb_pk_value *v = new_value(pk, TB_PK_OBJECT, err);

	if (!v)
		return NULL;
	v->u.obj.type = type;
	v->u.obj.p = tb_pk_alloc(pk, size, err);
	return v->u.obj.p ? v : NULL;
}

static int seq_push(tb_pk *pk, tb_pk_value *seq, tb_pk_value *item, tb_err *err)
{
	if (seq->u.seq.n == seq->u.seq.cap) {
		size_t cap = seq->u.seq.cap ? seq->u.seq.cap * 2 : 4;
		tb_pk_value **v = realloc(seq->u.seq.v, cap * sizeof *v);
		if (!v)
			return tb_err_setc(err, TB_ERR_NOMEM, pk->path, "out of memory");
		seq->u.seq.v = v;
		seq->u.seq.cap = cap;
	}
	seq->u.seq.v[seq->u.seq.n++] = item;
	return 0;
}

static int push(tb_pk *pk, tb_pk_value *v, tb_err *err)
{
	if (!v)
		return -1;
	if (pk->sp == pk->stack_cap) {
		size_t cap = pk->stack_cap ? pk->stack_cap * 2 : 64;
		tb_pk_value **s;
		if (pk->sp >= TB_PK_MAX_STACK)
			return pk_fail(pk, err, "stack deeper than %d", TB_PK_MAX_STACK);
		s = realloc(pk->stack, cap * sizeof *s);
		if (!s)
			return tb_err_setc(err, TB_ERR_NOMEM, pk->path, "out of memory");
		pk->stack = s;
		pk->stack_cap = cap;
	}
	pk->stack[pk->sp++] = v;
	return 0;
}

/* Items above the innermost mark (or the whole stack when none). */
static size_t frame_base(const tb_pk *pk)
{
	return pk->n_marks ? pk->marks[pk->n_marks - 1] : 0;
}

static tb_pk_value *pop(tb_pk *pk, tb_err *err)
{
	if (pk->sp <= frame_base(pk)) {
		pk_fail(pk, err, "stack underflow");
		return NULL;
	}
	return pk->stack[--pk->sp];
}

static tb_pk_value *top(tb_pk *pk, tb_err *err)
{
	if (pk->sp <= frame_base(pk)) {
		pk_fail(pk, err, "stack underflow");
		return NULL;
	}
	return pk->stack[pk->sp - 1];
}

/* Pop a mark: the items above it start at *start. */
static int pop_mark(tb_pk *pk, size_t *start, tb_err *err)
{
	if (!pk->n_marks)
		return pk_fail(pk, err, "no MARK on the stack");
	*start = pk->marks[--pk->n_marks];
	return 0;
}

static const unsigned char *take(tb_pk *pk, uint64_t n, tb_err *err)
{
	const unsigned char *p;

	if (n > pk->len - pk->pos) {
		pk_fail(pk, err, "%llu bytes asked for, %zu left", (unsigned long long)n, pk->len - pk->pos);
		return NULL;
	}
	p = pk->in + pk->pos;
	pk->pos += (size_t)n;
	return p;
}

static int take_uint(tb_pk *pk, int width, uint64_t *out, tb_err *err)
{
	const unsigned char *p = take(pk, (uint64_t)width, err);

	if (!p)
		return -1;
	*out = 0;
	for (int i = 0; i < width; i++)
		*out |= (uint64_t)p[i] << (8 * i);
	return 0;
}

static tb_pk_value *make_int(tb_pk *pk, int64_t i, tb_err *err)
{
	tb_pk_value *v = new_value(pk, TB_PK_INT, err);

	if (v)
		v->u.i = i;
	return v;
}

/* LONG1 / LONG4: n bytes of little-endian two's complement. */
static tb_pk_value *make_long(tb_pk *pk, const unsigned char *p, uint64_t n, tb_err *err)
{
	uint64_t u = 0;

	if (n == 0)
		return make_int(pk, 0, err);
	if (n > 8) {
		/* Wider than 64 bits unless it is sign extension of a smaller value. */
		for (uint64_t i = 8; i < n; i++)
			if (p[i] != ((p[7] & 0x80) ? 0xFF : 0x00))
				return new_value(pk, TB_PK_BIGINT, err);
		n = 8;
	}
	for (uint64_t i = 0; i < n; i++)
		u |= (uint64_t)p[i] << (8 * i);
	if (n < 8 && (p[n - 1] & 0x80))
		u |= ~0ull << (8 * n);
	return make_int(pk, (int64_t)u, err);
}

static tb_pk_value *make_str(tb_pk *pk, tb_pk_kind kind, uint64_t n, bool check_utf8, tb_err *err)
{
	size_t at = pk->pos;
	const unsigned char *p = take(pk, n, err);
	tb_pk_value *v;

	if (!p)
		return NULL;
	if (check_utf8 && !tb_utf8_valid(p, (size_t)n)) {
		pk_fail(pk, err, "string is not valid UTF-8");
		return NULL;
	}
	v = new_value(pk, kind, err);
	if (v) {
		v->u.s.p = p;
		v->u.s.n = (size_t)n;
		v->u.s.at = pk->base + (int64_t)at;
	}
	return v;
}

static tb_pk_value *make_seq(tb_pk *pk, tb_pk_kind kind, size_t start, tb_err *err)
{
	tb_pk_value *v = new_value(pk, kind, err);

	if (!v)
		return NULL;
	for (size_t i = start; i < pk->sp; i++)
		if (seq_push(pk, v, pk->stack[i], err) < 0)
			return NULL;
	pk->sp = start;
	return v;
}

/* Printable copy of an untrusted identifier, for messages. */
static void printable(const unsigned char *s, size_t n, char *out, size_t size)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k + 1 < size; i++)
		out[k++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
	out[k] = '\0';
}

static const tb_pk_global *lookup(const tb_pk_global *table, const char *module, const char *name)
{
	for (; table && table->module; table++)
		if (!strcmp(table->module, module) && !strcmp(table->name, name))
			return table;
	return NULL;
}

static tb_pk_value *make_global(tb_pk *pk, const unsigned char *mod, size_t mn, const unsigned char *name, size_t nn,
				tb_err *err)
{
	char m[MAX_GLOBAL_PART + 1], n[MAX_GLOBAL_PART + 1];
	const tb_pk_global *g;
	tb_pk_value *v;

	printable(mod, mn, m, sizeof m);
	printable(name, nn, n, sizeof n);
	if (mn > MAX_GLOBAL_PART || nn > MAX_GLOBAL_PART || memchr(mod, 0, mn) || memchr(name, 0, nn) ||
	    strlen(m) != mn || strlen(n) != nn) {
		pk_fail(pk, err, "pickle global %.60s.%.60s is not allowed", m, n);
		return NULL;
	}
	for (size_t i = 0; i < sizeof module_renames / sizeof *module_renames; i++)
		if (!strcmp(m, module_renames[i].py2))
			snprintf(m, sizeof m, "%s", module_renames[i].py3);
	g = lookup(pk->hooks->globals, m, n);
	if (!g)
		g = lookup(builtin_globals, m, n);
	if (!g) {
		pk_unsupported(pk, err, "pickle global %s.%s is not allowed", m, n);
		return NULL;
	}
	v = new_value(pk, TB_PK_GLOBAL, err);
	if (v) {
		v->u.g.id = g->id;
		v->u.g.module = g->module;
		v->u.g.name = g->name;
	}
	return v;
}

/* GLOBAL: "module\nname\n". */
static tb_pk_value *op_global(tb_pk *pk, tb_err *err)
{
	const unsigned char *mod = pk->in + pk->pos, *name, *nl;
	size_t left = pk->len - pk->pos, mn, nn;

	nl = memchr(mod, '\n', left < MAX_GLOBAL_PART + 1 ? left : MAX_GLOBAL_PART + 1);
	if (!nl) {
		pk_fail(pk, err, "GLOBAL module name is unterminated or too long");
		return NULL;
	}
	mn = (size_t)(nl - mod);
	name = nl + 1;
	left -= mn + 1;
	nl = memchr(name, '\n', left < MAX_GLOBAL_PART + 1 ? left : MAX_GLOBAL_PART + 1);
	if (!nl) {
		pk_fail(pk, err, "GLOBAL name is unterminated or too long");
		return NULL;
	}
	nn = (size_t)(nl - name);
	pk->pos += mn + nn + 2;
	return make_global(pk, mod, mn, name, nn, err);
}

/* latin-1 text (as UTF-8 in the pickle) back to the bytes it spells. */
static tb_pk_value *latin1_bytes(tb_pk *pk, const tb_pk_value *s, tb_err *err)
{
	unsigned char *out = tb_pk_alloc(pk, s->u.s.n, err);
	size_t k = 0;
	tb_pk_value *v;

	if (!out)
		return NULL;
	for (size_t i = 0; i < s->u.s.n; i++) {
		unsigned char c = s->u.s.p[i];
		if (c < 0x80) {
			out[k++] = c;
		} else if ((c == 0xC2 || c == 0xC3) && i + 1 < s->u.s.n) {
			out[k++] = (unsigned char)((c & 0x03) << 6 | (s->u.s.p[++i] & 0x3F));
		} else {
			pk_fail(pk, err, "_codecs.encode: text is not latin-1");
			return NULL;
		}
	}
	v = new_value(pk, TB_PK_BYTES, err);
	if (v) {
		v->u.s.p = out;
		v->u.s.n = k;
		v->u.s.at = -1;
	}
	return v;
}

static tb_pk_value *builtin_reduce(tb_pk *pk, int id, tb_pk_value *args, tb_err *err)
{
	size_t n = args->u.seq.n;
	tb_pk_value *v;

	switch (id) {
	case G_ORDERED_DICT:
		if (n != 0) {
			pk_fail(pk, err, "OrderedDict with constructor arguments is not supported");
			return NULL;
		}
		return new_value(pk, TB_PK_DICT, err);
	case G_CODECS_ENCODE:
		if (n != 2 || args->u.seq.v[0]->kind != TB_PK_STR ||
		    !(tb_pk_is_str(args->u.seq.v[1], "latin1") || tb_pk_is_str(args->u.seq.v[1], "latin-1"))) {
			pk_fail(pk, err, "_codecs.encode takes (str, 'latin1') only");
			return NULL;
		}
		return latin1_bytes(pk, args->u.seq.v[0], err);
	case G_BYTEARRAY:
		if (n == 0) {
			v = new_value(pk, TB_PK_BYTES, err);
			if (v) {
				v->u.s.p = (const unsigned char *)"";
				v->u.s.at = -1;
			}
			return v;
		}
		if (n == 2 && args->u.seq.v[0]->kind == TB_PK_STR)
			return latin1_bytes(pk, args->u.seq.v[0], err);
		if (n == 1 && args->u.seq.v[0]->kind == TB_PK_BYTES)
			return args->u.seq.v[0];
		pk_fail(pk, err, "bytearray with these arguments is not supported");
		return NULL;
	default: /* set, frozenset: of an optional list */
		v = new_value(pk, TB_PK_SET, err);
		if (v && n == 1 && (args->u.seq.v[0]->kind == TB_PK_LIST || args->u.seq.v[0]->kind == TB_PK_TUPLE)) {
			for (size_t i = 0; i < args->u.seq.v[0]->u.seq.n; i++)
				if (seq_push(pk, v, args->u.seq.v[0]->u.seq.v[i], err) < 0)
					return NULL;
		} else if (v && n != 0) {
			pk_fail(pk, err, "set with these arguments is not supported");
			return NULL;
		}
		return v;
	}
}

static int op_reduce(tb_pk *pk, tb_pk_value *callable, tb_pk_value *args, tb_err *err)
{
	tb_pk_value *v;

	if (callable->kind != TB_PK_GLOBAL)
		return pk_fail(pk, err, "REDUCE on a %s, not a global", tb_pk_kind_name(callable->kind));
	if (args->kind != TB_PK_TUPLE)
		return pk_fail(pk, err, "REDUCE of %s.%s with a %s, not a tuple", callable->u.g.module, callable->u.g.name,
			       tb_pk_kind_name(args->kind));
	if (callable->u.g.id < 0)
		v = builtin_reduce(pk, callable->u.g.id, args, err);
	else if (pk->hooks->reduce)
		v = pk->hooks->reduce(pk, callable->u.g.id, args, err);
	else
		return pk_fail(pk, err, "%s.%s cannot be called", callable->u.g.module, callable->u.g.name);
	return push(pk, v, err);
}

static int op_build(tb_pk *pk, tb_err *err)
{
	tb_pk_value *state = pop(pk, err), *obj;

	if (!state || !(obj = top(pk, err)))
		return -1;
	/* state_dict()'s OrderedDict carries _metadata as instance state: drop it. */
	if (obj->kind == TB_PK_DICT)
		return 0;
	if (obj->kind == TB_PK_OBJECT && pk->hooks->build)
		return pk->hooks->build(pk, obj, state, err);
	return pk_fail(pk, err, "BUILD on a %s is not supported", tb_pk_kind_name(obj->kind));
}

static int memo_put(tb_pk *pk, uint32_t key, tb_pk_value *v, tb_err *err)
{
	size_t j;

	if ((pk->memo_n + 1) * 2 > pk->memo_cap) {
		size_t cap = pk->memo_cap ? pk->memo_cap * 2 : 64;
		memo_slot *m;
		if (pk->memo_n >= TB_PK_MAX_MEMO)
			return pk_fail(pk, err, "memo larger than %d entries", TB_PK_MAX_MEMO);
		m = calloc(cap, sizeof *m);
		if (!m)
			return tb_err_setc(err, TB_ERR_NOMEM, pk->path, "out of memory");
		for (size_t i = 0; i < pk->memo_cap; i++) {
			if (!pk->memo[i].used)
				continue;
			j = (pk->memo[i].key * 2654435761u) & (cap - 1);
			while (m[j].used)
				j = (j + 1) & (cap - 1);
			m[j] = pk->memo[i];
		}
		free(pk->memo);
		pk->memo = m;
		pk->memo_cap = cap;
	}
	j = (key * 2654435761u) & (pk->memo_cap - 1);
	while (pk->memo[j].used && pk->memo[j].key != key)
		j = (j + 1) & (pk->memo_cap - 1);
	if (!pk->memo[j].used) {
		pk->memo[j].used = true;
		pk->memo[j].key = key;
		pk->memo_n++;
	}
	pk->memo[j].v = v;
	return 0;
}

static tb_pk_value *memo_get(tb_pk *pk, uint64_t key, tb_err *err)
{
	if (pk->memo_cap && key <= UINT32_MAX) {
		for (size_t j = ((uint32_t)key * 2654435761u) & (pk->memo_cap - 1); pk->memo[j].used;
		     j = (j + 1) & (pk->memo_cap - 1))
			if (pk->memo[j].key == key)
				return pk->memo[j].v;
	}
	pk_fail(pk, err, "memo entry %llu was never stored", (unsigned long long)key);
	return NULL;
}

static int setitems(tb_pk *pk, tb_pk_value *dict, size_t start, tb_err *err)
{
	if (dict->kind != TB_PK_DICT)
		return pk_fail(pk, err, "SETITEM on a %s, not a dict", tb_pk_kind_name(dict->kind));
	if ((pk->sp - start) % 2)
		return pk_fail(pk, err, "SETITEMS with an odd number of items");
	for (size_t i = start; i < pk->sp; i++)
		if (seq_push(pk, dict, pk->stack[i], err) < 0)
			return -1;
	pk->sp = start;
	return 0;
}

static int appends(tb_pk *pk, tb_pk_value *list, size_t start, bool set, tb_err *err)
{
	if (list->kind != (set ? TB_PK_SET : TB_PK_LIST))
		return pk_fail(pk, err, "%s on a %s, not a %s", set ? "ADDITEMS" : "APPEND", tb_pk_kind_name(list->kind),
			       set ? "set" : "list");
	for (size_t i = start; i < pk->sp; i++)
		if (seq_push(pk, list, pk->stack[i], err) < 0)
			return -1;
	pk->sp = start;
	return 0;
}

/* One opcode; returns 1 at STOP, 0 to go on, -1 on error. */
static int step(tb_pk *pk, tb_pk_value **result, tb_err *err)
{
	const unsigned char *p;
	tb_pk_value *a, *b, *c;
	uint64_t u;
	size_t start = 0;
	int op;

	p = take(pk, 1, err);
	if (!p)
		return pk_fail(pk, err, "no STOP before the end of the pickle");
	op = *p;
	switch (op) {
	case 0x80: /* PROTO */
		if (take_uint(pk, 1, &u, err) < 0)
			return -1;
		if (u < 2 || u > 5)
			return pk_fail(pk, err, "unsupported pickle protocol %llu", (unsigned long long)u);
		return 0;
	case 0x95: /* FRAME: only a hint for buffering */
		if (take_uint(pk, 8, &u, err) < 0)
			return -1;
		if (u > pk->len - pk->pos)
			return pk_fail(pk, err, "FRAME runs past the end of the pickle");
		return 0;
	case '.': /* STOP */
		if (pk->n_marks)
			return pk_fail(pk, err, "STOP with a MARK still open");
		if (pk->sp != 1)
			return pk_fail(pk, err, "STOP with %zu values on the stack, expected 1", pk->sp);
		*result = pk->stack[0];
		return 1;
	case '(': /* MARK */
		if (pk->n_marks >= TB_PK_MAX_MARKS)
			return pk_fail(pk, err, "MARKs nested deeper than %d", TB_PK_MAX_MARKS);
		if (pk->n_marks == pk->marks_cap) {
			size_t cap = pk->marks_cap ? pk->marks_cap * 2 : 16;
			size_t *m = realloc(pk->marks, cap * sizeof *m);
			if (!m)
				return tb_err_setc(err, TB_ERR_NOMEM, pk->path, "out of memory");
			pk->marks = m;
			pk->marks_cap = cap;
		}
		pk->marks[pk->n_marks++] = pk->sp;
		return 0;
	case '}': return push(pk, new_value(pk, TB_PK_DICT, err), err);
	case ']': return push(pk, new_value(pk, TB_PK_LIST, err), err);
	case ')': return push(pk, new_value(pk, TB_PK_TUPLE, err), err);
	case 0x8F: return push(pk, new_value(pk, TB_PK_SET, err), err); /* EMPTY_SET */
	case 'N': return push(pk, &none_value, err);
	case 0x88: return push(pk, &true_value, err);
	case 0x89: return push(pk, &false_value, err);
	case 'K': /* BININT1 */
		return take_uint(pk, 1, &u, err) < 0 ? -1 : push(pk, make_int(pk, (int64_t)u, err), err);
	case 'M': /* BININT2 */
		return take_uint(pk, 2, &u, err) < 0 ? -1 : push(pk, make_int(pk, (int64_t)u, err), err);
	case 'J': /* BININT */
		return take_uint(pk, 4, &u, err) < 0 ? -1 : push(pk, make_int(pk, (int32_t)(uint32_t)u, err), err);
	case 0x8A: /* LONG1 */
	case 0x8B: /* LONG4 */
		if (take_uint(pk, op == 0x8A ? 1 : 4, &u, err) < 0 || !(p = take(pk, u, err)))
			return -1;
		return push(pk, make_long(pk, p, u, err), err);
	case 'G': /* BINFLOAT, big-endian */
		if (!(p = take(pk, 8, err)))
			return -1;
		u = 0;
		for (int i = 0; i < 8; i++)
			u = u << 8 | p[i];
		if (!(a = new_value(pk, TB_PK_FLOAT, err)))
			return -1;
		memcpy(&a->u.f, &u, 8);
		return push(pk, a, err);
	case 'X': /* BINUNICODE */
	case 0x8C: /* SHORT_BINUNICODE */
	case 0x8D: /* BINUNICODE8 */
		if (take_uint(pk, op == 'X' ? 4 : op == 0x8C ? 1 : 8, &u, err) < 0)
			return -1;
		return push(pk, make_str(pk, TB_PK_STR, u, true, err), err);
	case 'U': /* SHORT_BINSTRING (Python 2 str) */
	case 'T': /* BINSTRING */
		if (take_uint(pk, op == 'U' ? 1 : 4, &u, err) < 0)
			return -1;
		return push(pk, make_str(pk, TB_PK_STR, u, false, err), err);
	case 'C': /* SHORT_BINBYTES */
	case 'B': /* BINBYTES */
	case 0x8E: /* BINBYTES8 */
	case 0x96: /* BYTEARRAY8 */
		if (take_uint(pk, op == 'C' ? 1 : op == 'B' ? 4 : 8, &u, err) < 0)
			return -1;
		return push(pk, make_str(pk, TB_PK_BYTES, u, false, err), err);
	case 't': /* TUPLE */
	case 'l': /* LIST */
	case 'd': /* DICT */
	case 0x91: /* FROZENSET */
		if (pop_mark(pk, &start, err) < 0)
			return -1;
		if (op == 'd' && (pk->sp - start) % 2)
			return pk_fail(pk, err, "DICT with an odd number of items");
		return push(pk, make_seq(pk, op == 't' ? TB_PK_TUPLE : op == 'l' ? TB_PK_LIST : op == 'd' ? TB_PK_DICT : TB_PK_SET,
					 start, err), err);
	case 0x85: /* TUPLE1..3 */
	case 0x86:
	case 0x87:
		if (pk->sp - frame_base(pk) < (size_t)(op - 0x84))
			return pk_fail(pk, err, "stack underflow");
		return push(pk, make_seq(pk, TB_PK_TUPLE, pk->sp - (size_t)(op - 0x84), err), err);
	case 'c': /* GLOBAL */
		return push(pk, op_global(pk, err), err);
	case 0x93: /* STACK_GLOBAL */
		if (!(b = pop(pk, err)) || !(a = pop(pk, err)))
			return -1;
		if (a->kind != TB_PK_STR || b->kind != TB_PK_STR)
			return pk_fail(pk, err, "STACK_GLOBAL needs two strings");
		return push(pk, make_global(pk, a->u.s.p, a->u.s.n, b->u.s.p, b->u.s.n, err), err);
	case 'R': /* REDUCE */
	case 0x81: /* NEWOBJ: cls.__new__(cls, *args), allowed classes only */
		if (!(b = pop(pk, err)) || !(a = pop(pk, err)))
			return -1;
		return op_reduce(pk, a, b, err);
	case 0x92: /* NEWOBJ_EX */
		if (!(c = pop(pk, err)) || !(b = pop(pk, err)) || !(a = pop(pk, err)))
			return -1;
		if (c->kind != TB_PK_DICT || c->u.seq.n)
			return pk_fail(pk, err, "NEWOBJ_EX with keyword arguments is not supported");
		return op_reduce(pk, a, b, err);
	case 'b': /* BUILD */
		return op_build(pk, err);
	case 'Q': /* BINPERSID */
		if (!(a = pop(pk, err)))
			return -1;
		if (!pk->hooks->persistent_load)
			return pk_fail(pk, err, "persistent ids are not allowed here");
		return push(pk, pk->hooks->persistent_load(pk, a, err), err);
	case 'q': /* BINPUT */
	case 'r': /* LONG_BINPUT */
		if (take_uint(pk, op == 'q' ? 1 : 4, &u, err) < 0 || !(a = top(pk, err)))
			return -1;
		return memo_put(pk, (uint32_t)u, a, err);
	case 0x94: /* MEMOIZE */
		if (!(a = top(pk, err)))
			return -1;
		if (pk->memo_n > UINT32_MAX)
			return pk_fail(pk, err, "memo full");
		return memo_put(pk, (uint32_t)pk->memo_n, a, err);
	case 'h': /* BINGET */
	case 'j': /* LONG_BINGET */
		if (take_uint(pk, op == 'h' ? 1 : 4, &u, err) < 0)
			return -1;
		return push(pk, memo_get(pk, u, err), err);
	case 's': /* SETITEM */
		if (pk->sp - frame_base(pk) < 3)
			return pk_fail(pk, err, "stack underflow");
		return setitems(pk, pk->stack[pk->sp - 3], pk->sp - 2, err);
	case 'u': /* SETITEMS */
		if (pop_mark(pk, &start, err) < 0)
			return -1;
		if (start <= frame_base(pk))
			return pk_fail(pk, err, "SETITEMS with no dict below its MARK");
		return setitems(pk, pk->stack[start - 1], start, err);
	case 'a': /* APPEND */
		if (pk->sp - frame_base(pk) < 2)
			return pk_fail(pk, err, "stack underflow");
		return appends(pk, pk->stack[pk->sp - 2], pk->sp - 1, false, err);
	case 'e': /* APPENDS */
	case 0x90: /* ADDITEMS */
		if (pop_mark(pk, &start, err) < 0)
			return -1;
		if (start <= frame_base(pk))
			return pk_fail(pk, err, "%s with nothing below its MARK", op == 'e' ? "APPENDS" : "ADDITEMS");
		return appends(pk, pk->stack[start - 1], start, op == 0x90, err);
	case '0': /* POP */
		return pop(pk, err) ? 0 : -1;
	case '1': /* POP_MARK */
		if (pop_mark(pk, &start, err) < 0)
			return -1;
		pk->sp = start;
		return 0;
	case '2': /* DUP */
		return (a = top(pk, err)) ? push(pk, a, err) : -1;
	default:
		pk->pos--;
		if (op >= 0x20 && op < 0x7f)
			return pk_fail(pk, err, "opcode 0x%02x ('%c') is not supported", op, op);
		return pk_fail(pk, err, "opcode 0x%02x is not supported", op);
	}
}

int tb_pk_run(tb_pk *pk, const unsigned char *data, size_t n, int64_t base, tb_pk_value **result, tb_err *err)
{
	int rc;

	pk->in = data;
	pk->len = n;
	pk->pos = 0;
	pk->base = base;
	pk->sp = 0;
	pk->n_marks = 0;
	*result = NULL;
	while ((rc = step(pk, result, err)) == 0)
		;
	return rc < 0 ? -1 : 0;
}

const char *tb_pk_kind_name(tb_pk_kind k)
{
	static const char *const names[] = {
		[TB_PK_NONE] = "None",   [TB_PK_BOOL] = "bool",   [TB_PK_INT] = "int",     [TB_PK_BIGINT] = "int",
		[TB_PK_FLOAT] = "float", [TB_PK_STR] = "str",     [TB_PK_BYTES] = "bytes", [TB_PK_TUPLE] = "tuple",
		[TB_PK_LIST] = "list",   [TB_PK_DICT] = "dict",   [TB_PK_SET] = "set",     [TB_PK_GLOBAL] = "global",
		[TB_PK_OBJECT] = "object",
	};

	return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

bool tb_pk_is_str(const tb_pk_value *v, const char *s)
{
	size_t n = strlen(s);

	return v->kind == TB_PK_STR && v->u.s.n == n && !memcmp(v->u.s.p, s, n);
}

void *tb_pk_as(const tb_pk_value *v, int type)
{
	return v->kind == TB_PK_OBJECT && v->u.obj.type == type ? v->u.obj.p : NULL;
}

int tb_pk_get_int(const tb_pk *pk, const tb_pk_value *v, const char *what, int64_t *out, tb_err *err)
{
	if (v->kind == TB_PK_INT) {
		*out = v->u.i;
		return 0;
	}
	if (v->kind == TB_PK_BOOL) {
		*out = v->u.b;
		return 0;
	}
	return tb_err_setc(err, TB_ERR_FORMAT, pk->path, "pickle: %s is a %s, not an integer", what, tb_pk_kind_name(v->kind));
}

int tb_pk_get_dims(const tb_pk *pk, const tb_pk_value *v, const char *what, int64_t *out, int max, tb_err *err)
{
	if (v->kind != TB_PK_TUPLE && v->kind != TB_PK_LIST)
		return tb_err_setc(err, TB_ERR_FORMAT, pk->path, "pickle: %s is a %s, not a tuple", what, tb_pk_kind_name(v->kind));
	if (v->u.seq.n > (size_t)max)
		return tb_err_setc(err, TB_ERR_LIMIT, pk->path, "pickle: %s has more than %d entries", what, max);
	for (size_t i = 0; i < v->u.seq.n; i++) {
		if (tb_pk_get_int(pk, v->u.seq.v[i], what, &out[i], err) < 0)
			return -1;
		if (out[i] < 0)
			return tb_err_setc(err, TB_ERR_FORMAT, pk->path, "pickle: %s holds a negative value", what);
	}
	return (int)v->u.seq.n;
}
