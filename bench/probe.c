/*
 * tbbench-probe: the memory-bandwidth yardstick of `make bench`.  Reads
 * every byte of the given files or directory trees exactly once, from the
 * page cache, on all cores, summing 64-bit words, and prints the checksum.
 * Nothing else is computed, so its time is a floor for any single-pass
 * comparison of the same trees.
 *
 *   tbbench-probe [--threads N] [--read] PATH...
 *
 * By default files are memory-mapped (as tbisect reads them); --read uses
 * pread into a per-thread buffer instead.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (8u << 20)
#define MAX_THREADS 64

typedef struct file {
	char *path;
	int fd;
	uint64_t size;
	const unsigned char *map;
} file;

/* The files found, and the chunks the threads take in turn. */
static file *files;
static size_t n_files, cap_files;
static atomic_size_t next_chunk;
static size_t n_chunks;
static size_t *chunk_file;
static uint64_t *chunk_off;
static bool use_read;

static int add(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	if (type != FTW_F || !S_ISREG(st->st_mode) || st->st_size == 0)
		return 0;
	if (n_files == cap_files) {
		cap_files = cap_files ? cap_files * 2 : 64;
		files = realloc(files, cap_files * sizeof *files);
		if (!files)
			return -1;
	}
	files[n_files].path = strdup(path);
	files[n_files].size = (uint64_t)st->st_size;
	n_files++;
	return 0;
}

static uint64_t sum_words(const unsigned char *p, uint64_t n)
{
	const uint64_t *w = (const uint64_t *)(const void *)p;
	uint64_t s = 0, k = n / 8;

#pragma omp simd reduction(+ : s)
	for (uint64_t i = 0; i < k; i++)
		s += w[i];
	for (uint64_t i = k * 8; i < n; i++)
		s += p[i];
	return s;
}

static void *worker(void *arg)
{
	uint64_t *out = arg, s = 0;
	unsigned char *buf = use_read ? malloc(CHUNK) : NULL;
	size_t c;

	while ((c = atomic_fetch_add(&next_chunk, 1)) < n_chunks) {
		const file *f = &files[chunk_file[c]];
		uint64_t off = chunk_off[c], len = f->size - off < CHUNK ? f->size - off : CHUNK;
		if (use_read) {
			ssize_t got = pread(f->fd, buf, (size_t)len, (off_t)off);
			if (got > 0)
				s += sum_words(buf, (uint64_t)got);
		} else {
			s += sum_words(f->map + off, len);
		}
	}
	free(buf);
	*out = s;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_THREADS];
	uint64_t sums[MAX_THREADS] = {0}, total = 0, sum = 0;
	long threads = sysconf(_SC_NPROCESSORS_ONLN);
	struct timespec t0, t1;
	int argi = 1;

	for (; argi < argc && argv[argi][0] == '-'; argi++) {
		if (!strcmp(argv[argi], "--read")) {
			use_read = true;
		} else if (!strcmp(argv[argi], "--threads") && argi + 1 < argc) {
			threads = atol(argv[++argi]);
		} else {
			fprintf(stderr, "usage: tbbench-probe [--threads N] [--read] PATH...\n");
			return 2;
		}
	}
	if (threads < 1)
		threads = 1;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	if (argi == argc) {
		fprintf(stderr, "usage: tbbench-probe [--threads N] [--read] PATH...\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (; argi < argc; argi++) {
		if (nftw(argv[argi], add, 16, FTW_PHYS) != 0) {
			fprintf(stderr, "tbbench-probe: %s: %s\n", argv[argi], strerror(errno));
			return 2;
		}
	}
	for (size_t i = 0; i < n_files; i++) {
		file *f = &files[i];
		f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
		if (f->fd < 0) {
			fprintf(stderr, "tbbench-probe: %s: %s\n", f->path, strerror(errno));
			return 2;
		}
		if (!use_read) {
			void *m = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
			if (m == MAP_FAILED) {
				fprintf(stderr, "tbbench-probe: %s: %s\n", f->path, strerror(errno));
				return 2;
			}
			madvise(m, (size_t)f->size, MADV_SEQUENTIAL);
			f->map = m;
		}
		n_chunks += (size_t)((f->size + CHUNK - 1) / CHUNK);
		total += f->size;
	}
	chunk_file = malloc((n_chunks ? n_chunks : 1) * sizeof *chunk_file);
	chunk_off = malloc((n_chunks ? n_chunks : 1) * sizeof *chunk_off);
	if (!chunk_file || !chunk_off)
		return 2;
	for (size_t i = 0, c = 0; i < n_files; i++)
		for (uint64_t off = 0; off < files[i].size; off += CHUNK, c++) {
			chunk_file[c] = i;
			chunk_off[c] = off;
		}
	for (long i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, worker, &sums[i]);
	for (long i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		sum += sums[i];
	}
	for (size_t i = 0; i < n_files; i++) {
		if (files[i].map)
			munmap((void *)files[i].map, (size_t)files[i].size);
		close(files[i].fd);
		free(files[i].path);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
	printf("probe: %zu files, %.3f GB in %.3f s = %.2f GB/s, %ld threads, checksum %016llx\n", n_files,
	       (double)total / 1e9, s, (double)total / 1e9 / s, threads, (unsigned long long)sum);
	free(files);
	free(chunk_file);
	free(chunk_off);
	return 0;
}
