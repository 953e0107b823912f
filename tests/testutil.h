/*
 * testutil: helpers shared by the unit tests: scratch directories that are
 * removed at exit, writing raw bytes, building paths.
 */
#ifndef TB_TESTUTIL_H
#define TB_TESTUTIL_H

#include <math.h>
#include <stddef.h>

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

#endif

#include "formats/tree.h"

/* Open a tree that must open (fails the test with the error otherwise). */
tb_tree *tu_open(const char *path, const tb_open_opts *opts);
/* A tensor of the tree by raw name (fails the test when absent). */
tb_tensor *tu_tensor(const tb_tree *tree, const char *name);
/* Opening path must fail, naming file (NULL: path) and saying want. */
void tu_expect_refused(const char *path, const tb_open_opts *opts, const char *file, const char *want);
/* The tensor decodes to exactly want (bitwise, NaN as NaN). */
void tu_expect_values(tb_tensor *t, const float *want, size_t n);
