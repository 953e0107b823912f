#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mapfile.h"

/* Files of this size and more are mapped at a colour of their own: an
 * address whose bits 21-26 (2 MB blocks) differ from the last file's.
 * The kernel places big mappings side by side, so two trees' files of one
 * size (a safetensors file per side) landed exactly 1 GB apart: a tensor's
 * reference and candidate values then shared the low 30 bits of their
 * addresses, which the first-level cache's way predictor hashes, and the
 * compare's two streams of loads got in each other's way (a bfloat16
 * safetensors check took a quarter more user time).  The mapping stays
 * aligned to 2 MB, so the page cache's large folios are mapped a 2 MB block
 * at a fault: colouring by pages (4 kB) instead made every fault map page
 * by page, and cost a check of two 4.3 GB trees in the page cache a quarter
 * more time, in the kernel. */
#define COLOUR_MIN (1u << 20)
#define COLOUR_BLOCK ((size_t)2 << 20)
#define COLOURS 61 /* in bits 21-26: distinct for 61 files in a row */

static void *map_coloured(int fd, size_t size)
{
	static atomic_uint next;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), span = size + 65 * COLOUR_BLOCK, head;
	uintptr_t at;
	unsigned char *area, *map;
	unsigned colour;

	if (size < COLOUR_MIN)
		return mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	/* the span reserved, the file mapped into it at the first 2 MB
	 * boundary of its colour, and what it does not use given back */
	area = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (area == MAP_FAILED)
		return mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	colour = atomic_fetch_add(&next, 1) * 7 % COLOURS;
	at = ((uintptr_t)area + COLOUR_BLOCK - 1) & ~(uintptr_t)(COLOUR_BLOCK - 1);
	at += ((colour - (at / COLOUR_BLOCK)) & 63) * COLOUR_BLOCK;
	head = at - (uintptr_t)area;
	map = mmap(area + head, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
	if (map == MAP_FAILED) {
		munmap(area, span);
		return MAP_FAILED;
	}
	if (head)
		munmap(area, head);
	head += (size + page - 1) / page * page;
	if (head < span)
		munmap(area + head, span - head);
	return map;
}

int tb_file_open(const char *path, tb_file **out, tb_err *err)
{
	struct stat st;
	tb_file *f;
	void *map = NULL;
	int fd;

	*out = NULL;
	/* O_NONBLOCK: opening a FIFO that slipped past the tree walk must not hang. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return tb_err_setc(err, TB_ERR_IO, path, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return tb_err_setc(err, TB_ERR_IO, path, "cannot stat: %s", strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return tb_err_setc(err, TB_ERR_FORMAT, path, "not a regular file");
	}
	if (st.st_size > 0) {
		map = map_coloured(fd, (size_t)st.st_size);
		if (map == MAP_FAILED) {
			int e = errno;
			close(fd);
			return tb_err_setc(err, TB_ERR_IO, path, "cannot map: %s", strerror(e));
		}
		/* Indexing touches only headers: without this, each header fault
		 * reads around it (read_ahead_kb, often megabytes) and maps a
		 * cluster of pages, so opening a cold tree would read gigabytes.
		 * tb_file_will_read turns a tensor's range sequential when the
		 * compare step gets to it. */
		madvise(map, (size_t)st.st_size, MADV_RANDOM);
	}
	close(fd);
	f = calloc(1, sizeof *f);
	if (f)
		f->path = strdup(path);
	if (!f || !f->path) {
		if (map)
			munmap(map, (size_t)st.st_size);
		free(f);
		return tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
	}
	f->data = map;
	f->size = (uint64_t)st.st_size;
	*out = f;
	return 0;
}

void tb_file_free(tb_file *f)
{
	if (!f)
		return;
	if (f->data)
		munmap((void *)f->data, (size_t)f->size);
	free(f->path);
	free(f);
}

const unsigned char *tb_file_view(const tb_file *f, uint64_t off, uint64_t len)
{
	if (off > f->size || len > f->size - off)
		return NULL;
	if (!f->data)
		return len == 0 ? (const unsigned char *)"" : NULL;
	return f->data + off;
}

/* Widen [off, off+len) to whole pages inside the mapping. */
static int page_range(const tb_file *f, uint64_t off, uint64_t len, void **start, size_t *size)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), lo, hi;

	if (!f->data || off >= f->size || len == 0)
		return -1;
	if (len > f->size - off)
		len = f->size - off;
	lo = off / page * page;
	hi = off + len;
	*start = (void *)(f->data + lo);
	*size = (size_t)(hi - lo);
	return 0;
}

/* Does the range look to be in the page cache: its first, middle and last
 * pages are?  Read-ahead asked of a range in the cache only walks the
 * cache, page by page (on a tree in the page cache, a tenth of the
 * compare's time in the kernel). */
static bool looks_cached(unsigned char *start, size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), last = (size - 1) / page;
	size_t at[3] = {0, last / 2, last};

	for (int i = 0; i < 3; i++) {
		unsigned char in;
		if (mincore(start + at[i] * page, 1, &in) != 0 || !(in & 1))
			return false;
	}
	return true;
}

void tb_file_will_read(const tb_file *f, uint64_t off, uint64_t len)
{
	void *start;
	size_t size;

	if (page_range(f, off, len, &start, &size) == 0) {
		madvise(start, size, MADV_SEQUENTIAL);
		if (!looks_cached(start, size))
			madvise(start, size, MADV_WILLNEED);
	}
}

void tb_file_drop(const tb_file *f, uint64_t off, uint64_t len)
{
	void *start;
	size_t size;

	/* Dropping a private read-only file mapping only unmaps pages from this
	 * process; the page cache keeps them, so a re-read is cheap. */
	if (page_range(f, off, len, &start, &size) == 0)
		madvise(start, size, MADV_DONTNEED);
}

int tb_read_stream(FILE *f, size_t max, const char *name, char **out, size_t *len, tb_err *err)
{
	size_t cap = 4096, n = 0, k;
	char *buf = malloc(cap), *grown;

	*out = NULL;
	*len = 0;
	while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (n > max) {
			free(buf);
			return tb_err_setc(err, TB_ERR_FORMAT, name, "larger than %zu bytes", max);
		}
		if (n + 1 == cap) {
			grown = realloc(buf, cap * 2);
			if (!grown)
				free(buf);
			buf = grown;
			cap *= 2;
		}
	}
	if (!buf)
		return tb_err_setc(err, TB_ERR_NOMEM, name, "out of memory");
	if (ferror(f)) {
		free(buf);
		return tb_err_setc(err, TB_ERR_IO, name, "cannot read: %s", strerror(errno));
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}
