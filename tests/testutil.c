#include "config.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dumpwrite.h"
#include "testutil.h"

static char *dirs[64];
static int n_dirs;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void cleanup(void)
{
	for (int i = 0; i < n_dirs; i++) {
		nftw(dirs[i], rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		free(dirs[i]);
	}
}

const char *tu_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char tmpl[4096];

	snprintf(tmpl, sizeof tmpl, "%s/tbtest.XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpl) || n_dirs == 64) {
		perror("mkdtemp");
		abort();
	}
	if (n_dirs == 0)
		atexit(cleanup);
	dirs[n_dirs] = strdup(tmpl);
	return dirs[n_dirs++];
}

const char *tu_path(const char *dir, const char *rel)
{
	static char bufs[8][4096];
	static int k;
	char *b = bufs[k++ % 8];

	snprintf(b, 4096, "%s/%s", dir, rel);
	return b;
}

void tu_write(const char *path, const void *data, size_t n)
{
	FILE *f;

	if (dw_mkdirs_for(path) < 0 || !(f = fopen(path, "wb")) || (n && fwrite(data, 1, n, f) != n) || fclose(f)) {
		perror(path);
		abort();
	}
}

void tu_write_str(const char *path, const char *text)
{
	tu_write(path, text, strlen(text));
}
