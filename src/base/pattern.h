/*
 * pattern: the regular expressions users write (--map and --tol files, the
 * view's / search and :filter), POSIX extended, compiled with the two
 * refusals all of them share: back-references, which glibc can take
 * exponential time on, and Perl classes (\d \w \s and their capitals),
 * which POSIX lacks and glibc reads as plain letters, so that a pattern
 * written for Python would silently match nothing.
 */
#ifndef TB_PATTERN_H
#define TB_PATTERN_H

#include <regex.h>
#include <stddef.h>

enum { TB_PATTERN_REFUSED = -1, TB_PATTERN_INVALID = -2 };

/* regcomp with REG_EXTENDED | cflags.  On failure nothing is left to free
 * and why says it: TB_PATTERN_REFUSED, "uses ..." (a back-reference, a Perl
 * class and what to write instead); TB_PATTERN_INVALID, regerror's text. */
int tb_pattern_compile(regex_t *re, const char *pattern, int cflags, char *why, size_t size);

#endif
