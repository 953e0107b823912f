/*
 * test_pickle: the restricted pickle machine on hand-assembled pickles:
 * the values it builds (protocols 2 and 4, memo, marks), the globals it
 * refuses by name, and the caps and checks that keep a hostile pickle from
 * costing more than its size.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dumpwrite.h"
#include "formats/pickle.h"
#include "testutil.h"

enum { ID_THING = 7 };

static const tb_pk_global test_globals[] = {
	{"mymod", "Thing", ID_THING},
	{NULL, NULL, 0},
};

/* Thing(x) makes an object holding x. */
static tb_pk_value *thing_reduce(tb_pk *pk, int id, tb_pk_value *args, tb_err *err)
{
	tb_pk_value *v;

	assert_int_equal(id, ID_THING);
	v = tb_pk_object(pk, 1, sizeof(int64_t), err);
	if (v && args->u.seq.n == 1 && args->u.seq.v[0]->kind == TB_PK_INT)
		*(int64_t *)v->u.obj.p = args->u.seq.v[0]->u.i;
	return v;
}

static const tb_pk_hooks hooks = {.globals = test_globals, .reduce = thing_reduce};

/* Run a pickle; returns the result or NULL with *err set. */
static tb_pk_value *run(tb_pk **pk, const void *data, size_t n, tb_err *err)
{
	tb_pk_value *v;

	*pk = tb_pk_new("test.pkl", &hooks);
	assert_non_null(*pk);
	return tb_pk_run(*pk, data, n, 100, &v, err) == 0 ? v : NULL;
}

static void expect_error(const void *data, size_t n, const char *want)
{
	tb_pk *pk;
	tb_err err;

	if (run(&pk, data, n, &err))
		fail_msg("accepted, expected \"%s\"", want);
	assert_string_equal(err.file, "test.pkl");
	if (!strstr(err.msg, want))
		fail_msg("\"%s\" does not say \"%s\"", err.msg, want);
	tb_pk_free(pk);
}

#define EXPECT_ERROR(lit, want) expect_error(lit, sizeof lit - 1, want)

static void test_values_protocol2(void **state)
{
	dw_pk p = {0};
	tb_pk *pk;
	tb_pk_value *v, **it;
	tb_err err;
	(void)state;

	dw_pk_begin(&p, 2);
	dw_pk_op(&p, '}');
	dw_pk_put(&p);
	dw_pk_op(&p, '(');
	dw_pk_str(&p, "ints");
	dw_pk_op(&p, '(');
	dw_pk_int(&p, 7);
	dw_pk_int(&p, 300);
	dw_pk_int(&p, -5);
	dw_pk_int(&p, 1ll << 40);
	dw_pk_int(&p, -(1ll << 62));
	dw_pk_op(&p, 't');
	dw_pk_put(&p);
	dw_pk_str(&p, "again");
	dw_pk_raw(&p, "h\x01", 2); /* BINGET 1: the "ints" string */
	dw_pk_str(&p, "list");
	dw_pk_op(&p, ']');
	dw_pk_put(&p);
	dw_pk_op(&p, 'N');
	dw_pk_op(&p, 'a');
	dw_pk_raw(&p, "G\x3f\xf8\x00\x00\x00\x00\x00\x00", 9); /* 1.5 */
	dw_pk_op(&p, 'a');
	dw_pk_str(&p, "thing");
	dw_pk_global(&p, "mymod", "Thing");
	dw_pk_int(&p, 42);
	dw_pk_op(&p, 0x85);
	dw_pk_op(&p, 'R');
	dw_pk_op(&p, 'u');
	dw_pk_op(&p, '.');
	v = run(&pk, p.b.p, p.b.n, &err);
	if (!v)
		fail_msg("%s", err.msg);
	assert_int_equal(v->kind, TB_PK_DICT);
	assert_int_equal(v->u.seq.n, 8);
	it = v->u.seq.v;
	assert_true(tb_pk_is_str(it[0], "ints"));
	assert_int_equal(it[1]->kind, TB_PK_TUPLE);
	assert_int_equal(it[1]->u.seq.n, 5);
	assert_int_equal(it[1]->u.seq.v[0]->u.i, 7);
	assert_int_equal(it[1]->u.seq.v[1]->u.i, 300);
	assert_int_equal(it[1]->u.seq.v[2]->u.i, -5);
	assert_int_equal(it[1]->u.seq.v[3]->u.i, 1ll << 40);
	assert_int_equal(it[1]->u.seq.v[4]->u.i, -(1ll << 62));
	assert_true(tb_pk_is_str(it[3], "ints"));
	assert_int_equal(it[5]->kind, TB_PK_LIST);
	assert_int_equal(it[5]->u.seq.n, 2);
	assert_int_equal(it[5]->u.seq.v[0]->kind, TB_PK_NONE);
	assert_near(it[5]->u.seq.v[1]->u.f, 1.5, 0);
	assert_int_equal(*(int64_t *)tb_pk_as(it[7], 1), 42);
	/* The string points into the input, offset by the base. */
	assert_int_equal(it[0]->u.s.at, 100 + 11);
	tb_pk_free(pk);
	dw_pk_free(&p);
}

static void test_values_protocol4(void **state)
{
	/* FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL, SHORT_BINBYTES,
	 * BYTEARRAY8, EMPTY_SET + ADDITEMS, LONG1 wider than 64 bits. */
	static const unsigned char pkl[] = "\x80\x04\x95\x30\x00\x00\x00\x00\x00\x00\x00"
					   "]\x94(\x8c\x05mymod\x94\x8c\x05Thing\x94\x93\x94K\x09\x85R"
					   "C\x03" "abc" "\x96\x02\x00\x00\x00\x00\x00\x00\x00" "xy"
					   "\x8f\x94(K\x01K\x02\x90" "\x8a\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"
					   "h\x02" "e.";
	tb_pk *pk;
	tb_pk_value *v, **it;
	tb_err err;
	(void)state;

	v = run(&pk, pkl, sizeof pkl - 1, &err);
	if (!v)
		fail_msg("%s", err.msg);
	assert_int_equal(v->kind, TB_PK_LIST);
	assert_int_equal(v->u.seq.n, 6);
	it = v->u.seq.v;
	assert_int_equal(*(int64_t *)tb_pk_as(it[0], 1), 9);
	assert_int_equal(it[1]->kind, TB_PK_BYTES);
	assert_memory_equal(it[1]->u.s.p, "abc", 3);
	assert_int_equal(it[2]->u.s.n, 2);
	assert_int_equal(it[3]->kind, TB_PK_SET);
	assert_int_equal(it[3]->u.seq.n, 2);
	assert_int_equal(it[4]->kind, TB_PK_BIGINT);
	assert_true(tb_pk_is_str(it[5], "Thing"));
	tb_pk_free(pk);
}

static void test_builtins(void **state)
{
	/* _codecs.encode(u'\xe9a', 'latin1'), an OrderedDict with BUILD state
	 * dropped, and __builtin__.set([1]) under its Python 2 name. */
	static const unsigned char pkl[] = "\x80\x02(c_codecs\nencode\nX\x03\x00\x00\x00\xc3\xa9" "aX\x06\x00\x00\x00latin1\x86R"
					   "ccollections\nOrderedDict\n)R}X\x01\x00\x00\x00kK\x01sb"
					   "c__builtin__\nset\n]K\x01" "a\x85Rt.";
	tb_pk *pk;
	tb_pk_value *v;
	tb_err err;
	(void)state;

	v = run(&pk, pkl, sizeof pkl - 1, &err);
	if (!v)
		fail_msg("%s", err.msg);
	assert_int_equal(v->u.seq.n, 3);
	assert_int_equal(v->u.seq.v[0]->kind, TB_PK_BYTES);
	assert_int_equal(v->u.seq.v[0]->u.s.n, 2);
	assert_memory_equal(v->u.seq.v[0]->u.s.p, "\xe9" "a", 2);
	assert_int_equal(v->u.seq.v[1]->kind, TB_PK_DICT);
	assert_int_equal(v->u.seq.v[1]->u.seq.n, 0);
	assert_int_equal(v->u.seq.v[2]->kind, TB_PK_SET);
	tb_pk_free(pk);
}

static void test_globals_refused(void **state)
{
	(void)state;
	EXPECT_ERROR("\x80\x02" "cos\nsystem\nX\x05\x00\x00\x00touch\x85R.", "pickle global os.system is not allowed");
	EXPECT_ERROR("\x80\x02" "cposix\nsystem\n.", "pickle global posix.system is not allowed");
	EXPECT_ERROR("\x80\x02" "c__builtin__\neval\n.", "pickle global builtins.eval is not allowed");
	EXPECT_ERROR("\x80\x04\x8c\x08" "builtins\x8c\x04" "exec\x93.", "pickle global builtins.exec is not allowed");
	EXPECT_ERROR("\x80\x02" "csubprocess\nPopen\n.", "pickle global subprocess.Popen is not allowed");
	EXPECT_ERROR("\x80\x02" "ccopy_reg\n_reconstructor\n.", "pickle global copyreg._reconstructor is not allowed");
	EXPECT_ERROR("\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\n.", "pickle global torch._utils._rebuild_tensor_v2 is not allowed");
	EXPECT_ERROR("\x80\x02" "cos\x01\nsystem\n.", "is not allowed");
	EXPECT_ERROR("\x80\x02" "cos", "GLOBAL module name is unterminated");
}

static void test_structure_refused(void **state)
{
	(void)state;
	EXPECT_ERROR("\x80\x02}", "no STOP before the end of the pickle");
	EXPECT_ERROR("\x80\x06}.", "unsupported pickle protocol 6");
	EXPECT_ERROR("\x80\x02.", "STOP with 0 values on the stack");
	EXPECT_ERROR("\x80\x02(}.", "STOP with a MARK still open");
	EXPECT_ERROR("\x80\x02]K\x01K\x02s.", "SETITEM on a list, not a dict");
	EXPECT_ERROR("\x80\x02}K\x01" "a.", "APPEND on a dict, not a list");
	EXPECT_ERROR("\x80\x02)K\x01" "a.", "APPEND on a tuple, not a list");
	EXPECT_ERROR("\x80\x02}(K\x01u.", "SETITEMS with an odd number of items");
	EXPECT_ERROR("\x80\x02(u.", "SETITEMS with no dict below its MARK");
	EXPECT_ERROR("\x80\x02K\x01" "0" "0.", "stack underflow");
	EXPECT_ERROR("\x80\x02}(0.", "stack underflow");
	EXPECT_ERROR("\x80\x02t.", "no MARK on the stack");
	EXPECT_ERROR("\x80\x02h\x05.", "memo entry 5 was never stored");
	EXPECT_ERROR("\x80\x02K\x01r\xff\xff\xff\xff" "j\xfe\xff\xff\xff.", "memo entry 4294967294 was never stored");
	EXPECT_ERROR("\x80\x02X\xff\xff\xff\x7f" "abc.", "2147483647 bytes asked for, 4 left");
	EXPECT_ERROR("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff.", "bytes asked for");
	EXPECT_ERROR("\x80\x04\x95\xff\xff\xff\x00\x00\x00\x00\x00}.", "FRAME runs past the end");
	EXPECT_ERROR("\x80\x02X\x02\x00\x00\x00\xc3(.", "string is not valid UTF-8");
	EXPECT_ERROR("\x80\x02K\x01R.", "stack underflow");
	EXPECT_ERROR("\x80\x02X\x01\x00\x00\x00x)R.", "REDUCE on a str, not a global");
	EXPECT_ERROR("\x80\x02" "cmymod\nThing\nK\x01R.", "REDUCE of mymod.Thing with a int, not a tuple");
	EXPECT_ERROR("\x80\x02]]b.", "BUILD on a list is not supported");
	EXPECT_ERROR("\x80\x02X\x01\x00\x00\x00xQ.", "persistent ids are not allowed here");
	EXPECT_ERROR("\x80\x02I1\n.", "opcode 0x49 ('I') is not supported");
	EXPECT_ERROR("\x80\x02\x82\x01.", "opcode 0x82 is not supported");
	EXPECT_ERROR("\x80\x02" "ccollections\nOrderedDict\nK\x01\x85R.", "OrderedDict with constructor arguments");
	EXPECT_ERROR("\x80\x02" "c_codecs\nencode\nX\x01\x00\x00\x00xX\x05\x00\x00\x00utf-8\x86R.", "_codecs.encode takes");
}

/* Hostile sizes fail fast at their cap, without allocating to their
 * declared size. */
static void test_caps(void **state)
{
	size_t n = TB_PK_MAX_MARKS + 10;
	unsigned char *buf = malloc(n + 8);
	(void)state;

	memcpy(buf, "\x80\x02", 2);
	memset(buf + 2, '(', n);
	buf[n + 2] = '.';
	expect_error(buf, n + 3, "MARKs nested deeper than 10000");
	free(buf);
	/* A memo slot far out: the hash map stores one entry, not 2^32. */
	EXPECT_ERROR("\x80\x02K\x07r\xfe\xff\xff\xff" "0" "j\xfe\xff\xff\xff" "j\xfd\xff\xff\xff.",
		     "memo entry 4294967293 was never stored");
	/* More stack entries than allowed. */
	n = TB_PK_MAX_STACK + 10;
	buf = malloc(n + 8);
	memcpy(buf, "\x80\x02K\x01", 4);
	memset(buf + 4, '2', n); /* DUP */
	buf[n + 4] = '.';
	expect_error(buf, n + 5, "stack deeper than 1048576");
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values_protocol2),
		cmocka_unit_test(test_values_protocol4),
		cmocka_unit_test(test_builtins),
		cmocka_unit_test(test_globals_refused),
		cmocka_unit_test(test_structure_refused),
		cmocka_unit_test(test_caps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
