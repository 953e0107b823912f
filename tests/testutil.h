/*
 * testutil: helpers shared by the unit tests: scratch directories that are
 * removed at exit, writing raw bytes and npy files, building paths, opening
 * trees, and two trees compared as a session.
 */
#ifndef TB_TESTUTIL_H
#define TB_TESTUTIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "compare/compare.h"
#include "formats/tree.h"
#include "model/session.h"

/* cmocka 1.1 has no floating-point assertion; include after cmocka.h. */
#define assert_near(a, b, eps)                                                                  \
	do {                                                                                    \
		double a_ = (a), b_ = (b);                                                      \
		if (!(fabs(a_ - b_) <= (eps)) && !(a_ == b_))                                   \
			fail_msg("%s = %.17g, expected %.17g (+- %g)", #a, a_, b_, (double)(eps)); \
	} while (0)

/* A fresh directory under $TMPDIR (or /tmp), removed at exit. */
const char *tu_tmpdir(void);
/* dir + "/" + rel in a rotating static buffer (valid for 8 calls). */
const char *tu_path(const char *dir, const char *rel);
/* Write bytes to a file (creating parent directories); aborts on failure. */
void tu_write(const char *path, const void *data, size_t n);
/* Write a NUL-terminated string to a file. */
void tu_write_str(const char *path, const char *text);

/* Open a tree that must open (fails the test with the error otherwise). */
tb_tree *tu_open(const char *path, const tb_open_opts *opts);
/* A tensor of the tree by raw name (fails the test when absent). */
tb_tensor *tu_tensor(const tb_tree *tree, const char *name);
/* Opening path must fail, naming file (NULL: path) and saying want. */
void tu_expect_refused(const char *path, const tb_open_opts *opts, const char *file, const char *want);
/* The tensor decodes to exactly want (bitwise, NaN as NaN). */
void tu_expect_values(tb_tensor *t, const float *want, size_t n);

/* n values of a smooth signal of amplitude about scale (malloc'd). */
float *tu_ramp(size_t n, float scale);
/* Write x (as many values as the shape holds) as dir/name.npy in dtype dt. */
void tu_put(const char *dir, const char *name, tb_dtype dt, int ndim, const int64_t *shape, const float *x);

/* Two trees opened as a session (bf16 npy read as --npy-void2 bf16) and compared. */
typedef struct tu_compared {
	tb_session s;
	tb_result *res;
} tu_compared;

/* Open ref and cand and compare them with o (NULL: the defaults); fails the test on an error. */
void tu_compare(tu_compared *c, const char *ref, const char *cand, const tb_compare_opts *o);
void tu_compared_done(tu_compared *c);
/* The result of the cell named "L0.attn", "embed", ... (fails the test when absent). */
const tb_cell_result *tu_cell(const tb_result *r, const char *name);

#endif
