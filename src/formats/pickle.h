/*
 * pickle: a restricted pickle machine (protocols 2-5) that builds plain
 * values (None, bool, int, float, str, bytes, tuple, list, dict) and
 * nothing else by itself.  It never imports or calls anything: a GLOBAL is
 * looked up in the caller's allowlist (plus collections.OrderedDict,
 * _codecs.encode, builtins.set/frozenset/bytearray, which it handles
 * itself) and any other global is refused by name.  REDUCE, BUILD and
 * BINPERSID on allowed globals are handed to the caller's hooks, which make
 * opaque objects (a tensor, a storage, a numpy array).  Stack, marks, memo,
 * value count and string lengths are capped.
 *
 * Ownership: a tb_pk owns every value it made; tb_pk_free releases them
 * all.  str/bytes values may point into the input, which must outlive the
 * values.  Used by the torch.save and MaxText golden readers.
 */
#ifndef TB_PICKLE_H
#define TB_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define TB_PK_MAX_STACK (1 << 20)
#define TB_PK_MAX_MARKS 10000
/* About 15 values and 10 memo entries per tensor: room for 250,000 tensors,
 * while a hostile pickle costs at most a few hundred MB. */
#define TB_PK_MAX_MEMO (1 << 21)
#define TB_PK_MAX_VALUES (1 << 22)

typedef enum tb_pk_kind {
	TB_PK_NONE,
	TB_PK_BOOL,
	TB_PK_INT,
	TB_PK_BIGINT, /* wider than 64 bits: kept, value unknown */
	TB_PK_FLOAT,
	TB_PK_STR,
	TB_PK_BYTES,
	TB_PK_TUPLE,
	TB_PK_LIST,
	TB_PK_DICT,   /* also OrderedDict: items in insertion order */
	TB_PK_SET,
	TB_PK_GLOBAL, /* an allowed global, by the caller's id */
	TB_PK_OBJECT, /* made by a hook */
} tb_pk_kind;

typedef struct tb_pk_value tb_pk_value;

struct tb_pk_value {
	tb_pk_kind kind;
	union {
		bool b;
		int64_t i;
		double f;
		struct {
			const unsigned char *p; /* not NUL-terminated */
			size_t n;
			int64_t at; /* offset in the input + base, or -1 when not a view of it */
		} s;            /* STR, BYTES */
		struct {
			tb_pk_value **v; /* DICT: key, value, key, value, ... */
			size_t n, cap;
		} seq;          /* TUPLE, LIST, DICT, SET */
		struct {
			int id;
			const char *module, *name;
		} g;
		struct {
			int type;
			void *p;
		} obj;
	} u;
};

typedef struct tb_pk tb_pk;

/* An allowed global: module and name as Python 3 spells them. */
typedef struct tb_pk_global {
	const char *module, *name;
	int id;
} tb_pk_global;

typedef struct tb_pk_hooks {
	const tb_pk_global *globals; /* terminated by a NULL module */
	/* REDUCE (or NEWOBJ) of an allowed global with an args tuple. */
	tb_pk_value *(*reduce)(tb_pk *pk, int id, tb_pk_value *args, tb_err *err);
	/* BUILD on an object a hook made; NULL refuses BUILD. */
	int (*build)(tb_pk *pk, tb_pk_value *obj, tb_pk_value *state, tb_err *err);
	/* BINPERSID; NULL refuses persistent ids. */
	tb_pk_value *(*persistent_load)(tb_pk *pk, tb_pk_value *pid, tb_err *err);
	void *ctx;
} tb_pk_hooks;

/* path: the file named in errors. */
tb_pk *tb_pk_new(const char *path, const tb_pk_hooks *hooks);
void tb_pk_free(tb_pk *pk);

/* Run the pickle at data[0..n) to its STOP; *result is the value left.
 * base: added to input offsets recorded in bytes values (where data sits
 * in its file). */
int tb_pk_run(tb_pk *pk, const unsigned char *data, size_t n, int64_t base, tb_pk_value **result, tb_err *err);

void *tb_pk_ctx(const tb_pk *pk);
const char *tb_pk_path(const tb_pk *pk);
/* A new object value with a zeroed payload of size bytes (owned by pk). */
tb_pk_value *tb_pk_object(tb_pk *pk, int type, size_t size, tb_err *err);
/* Heap memory owned by pk (freed with it). */
void *tb_pk_alloc(tb_pk *pk, size_t size, tb_err *err);

const char *tb_pk_kind_name(tb_pk_kind k);
/* Is v a str equal to s? */
bool tb_pk_is_str(const tb_pk_value *v, const char *s);
/* The object payload when v is an object of this type, else NULL. */
void *tb_pk_as(const tb_pk_value *v, int type);
/* v as int64 (ints and bools); -1 and *err set when it is not one. */
int tb_pk_get_int(const tb_pk *pk, const tb_pk_value *v, const char *what, int64_t *out, tb_err *err);
/* A tuple/list of at most max non-negative ints into out; returns count or -1. */
int tb_pk_get_dims(const tb_pk *pk, const tb_pk_value *v, const char *what, int64_t *out, int max, tb_err *err);

#endif
