/*
 * mapfile: one input file, opened read-only and memory-mapped whole.
 *
 * Readers take bounds-checked views of it; the compare step reads tensor
 * bytes straight from the mapping (zero copy) and drops the pages it no
 * longer needs so resident memory stays bounded.  The file is never written:
 * PROT_READ, MAP_PRIVATE.  A tb_file is owned by whoever opened it (the tree).
 */
#ifndef TB_MAPFILE_H
#define TB_MAPFILE_H

#include <stdint.h>
#include <stdio.h>

#include "base/error.h"

typedef struct tb_file {
	char *path;                /* as opened, for messages */
	const unsigned char *data; /* the mapping; NULL when size is 0 */
	uint64_t size;
} tb_file;

/* Open and map a regular file.  Refuses anything else (FIFO, device, ...)
 * without blocking.  The mapping starts in random-access mode, so reading a
 * header pulls in that page only, not a read-ahead window of tensor data. */
int tb_file_open(const char *path, tb_file **out, tb_err *err);
void tb_file_free(tb_file *f);

/* Pointer to bytes [off, off+len) or NULL when the range leaves the file.
 * Overflow-safe. */
const unsigned char *tb_file_view(const tb_file *f, uint64_t off, uint64_t len);

/* Hint sequential reading of a range / give its pages back to the kernel. */
void tb_file_will_read(const tb_file *f, uint64_t off, uint64_t len);
void tb_file_drop(const tb_file *f, uint64_t off, uint64_t len);

/* All of a stream (standard input) up to max bytes, NUL-terminated in a
 * malloc'd buffer the caller frees; errors call the stream name. */
int tb_read_stream(FILE *f, size_t max, const char *name, char **out, size_t *len, tb_err *err);

#endif
