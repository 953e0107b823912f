#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/writefile.h"

/* A name beside path no other writer uses: the process, a count of this
 * process's writes and the clock, so that the file can be created with
 * O_EXCL and its mode (mode & ~umask) given by the kernel, as any new
 * file's.  (mkstemp would make it private, and asking the umask means
 * setting it, under other threads' feet.) */
static void temp_name(char *tmp, size_t size, const char *path)
{
	static _Atomic unsigned long count;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(tmp, size, "%s.tmp.%ld.%lu.%lx", path, (long)getpid(), count++, (unsigned long)ts.tv_nsec);
}

int tb_atomic_open(tb_atomic *a, const char *path, const char *what, unsigned flags, tb_err *err)
{
	size_t size = strlen(path) + 80;
	int fd = -1, e;

	memset(a, 0, sizeof *a);
	a->what = what;
	a->flags = flags;
	a->path = strdup(path);
	a->tmp = malloc(size);
	if (!a->path || !a->tmp) {
		tb_atomic_abort(a);
		return tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory writing %s", what);
	}
	for (int tries = 0; fd < 0 && tries < 100; tries++) {
		temp_name(a->tmp, size, path);
		fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, flags & TB_WRITE_PRIVATE ? 0600 : 0666);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd >= 0 && !(a->f = fdopen(fd, "w"))) {
		e = errno;
		close(fd);
		unlink(a->tmp);
		errno = e;
	}
	if (!a->f) {
		e = errno;
		free(a->tmp);
		a->tmp = NULL;
		tb_atomic_abort(a);
		return tb_err_setc(err, TB_ERR_IO, path, "cannot write %s: %s", what, strerror(e));
	}
	return 0;
}

int tb_atomic_commit(tb_atomic *a, bool bad, tb_err *err)
{
	int e = 0;

	if (bad) {
		tb_atomic_abort(a);
		return -1;
	}
	if (fflush(a->f) != 0 || ((a->flags & TB_WRITE_SYNC) && fsync(fileno(a->f)) != 0))
		e = errno;
	if (fclose(a->f) != 0 && !e)
		e = errno;
	a->f = NULL;
	if (!e && rename(a->tmp, a->path) != 0)
		e = errno;
	if (e) {
		tb_err_setc(err, TB_ERR_IO, a->path, "cannot write %s: %s", a->what, strerror(e));
		tb_atomic_abort(a);
		return -1;
	}
	free(a->tmp);
	free(a->path);
	memset(a, 0, sizeof *a);
	return 0;
}

void tb_atomic_abort(tb_atomic *a)
{
	if (a->f)
		fclose(a->f);
	if (a->tmp)
		unlink(a->tmp);
	free(a->tmp);
	free(a->path);
	memset(a, 0, sizeof *a);
}

int tb_write_file(const char *path, const char *what, unsigned flags, int (*fill)(FILE *f, const void *ctx),
		  const void *ctx, tb_err *err)
{
	tb_atomic a;
	int bad;

	if (tb_atomic_open(&a, path, what, flags, err) < 0)
		return -1;
	bad = fill(a.f, ctx) < 0 || ferror(a.f);
	if (bad)
		tb_err_setc(err, TB_ERR_IO, path, "cannot write %s: %s", what, strerror(errno ? errno : EIO));
	return tb_atomic_commit(&a, bad, err);
}
