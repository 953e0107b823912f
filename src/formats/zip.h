/*
 * zip: a read-only reader of zip containers (npz, torch.save) over a mapped
 * file.  tb_zip_open reads and checks the whole central directory (zip64
 * too) and every local header up front; members come back by name or in
 * directory order.  A stored member is a zero-copy view of the mapping; a
 * deflated one is inflated on demand, never past its declared size: by a
 * streamed blob through a bounded window as it is read (whole only for a
 * strided view), or a prefix of it into a caller's buffer.
 *
 * Refused: encryption, methods other than stored/deflate, multi-disk
 * archives, data before the archive or after its end record, duplicate
 * names, names that could escape a directory, local headers that disagree
 * with the central directory, overlapping members, CRC mismatches, and
 * deflated totals over TB_ZIP_MAX_INFLATE.  The tb_zip owns its entry
 * list; the file stays the caller's and must outlive it.  Used by the npz
 * and torch.save readers.
 */
#ifndef TB_ZIP_H
#define TB_ZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/mapfile.h"
#include "tensor/tensor.h"

/* Cap on the declared uncompressed size of all deflated members of one
 * archive together: each is inflated once when the archive opens, to
 * check it, and again on every pass that reads it (and held whole by a
 * strided view). */
#define TB_ZIP_MAX_INFLATE (4ull << 30)
/* A deflated member larger than this inflating more than TB_ZIP_MAX_RATIO
 * fold is a bomb, not a tensor: deflate tops out near 1032:1, which only a
 * run of one repeated byte reaches, and a tensor that size is no dump. */
#define TB_ZIP_RATIO_FLOOR (256ull << 20)
#define TB_ZIP_MAX_RATIO 1000
/* Cap on the number of members of one archive. */
#define TB_ZIP_MAX_ENTRIES 1000000

enum { TB_ZIP_STORED = 0, TB_ZIP_DEFLATE = 8 };

typedef struct tb_zip_entry {
	char *name;        /* as stored, checked: UTF-8, no "..", no leading '/' */
	int method;        /* TB_ZIP_STORED or TB_ZIP_DEFLATE */
	uint64_t csize;    /* bytes in the file */
	uint64_t usize;    /* bytes once inflated */
	uint64_t data_off; /* start of the member's data in the file */
	uint32_t crc;
	bool is_dir;       /* name ends in '/' */
} tb_zip_entry;

typedef struct tb_zip tb_zip;

/* The first member's name from the first local header at head, when all
 * of it lies within the n bytes (for sniffing); else NULL. */
const unsigned char *tb_zip_head_name(const unsigned char *head, size_t n, size_t *len);

int tb_zip_open(const tb_file *f, tb_zip **out, tb_err *err);
void tb_zip_free(tb_zip *z);

/* The archive's file path, for messages. */
const char *tb_zip_file_path(const tb_zip *z);
size_t tb_zip_count(const tb_zip *z);
/* Entries in central-directory order. */
const tb_zip_entry *tb_zip_entry_at(const tb_zip *z, size_t i);
const tb_zip_entry *tb_zip_find(const tb_zip *z, const char *name);

/* Give blob the member's bytes: a view of the mapping (stored; its CRC is
 * checked) or a streamed inflate (deflated; the member is inflated once
 * first, into nothing, to check its size and CRC, so reading it later
 * cannot fail). */
int tb_zip_blob(const tb_zip *z, const tb_zip_entry *e, tb_blob *blob, tb_err *err);
/* Copy up to max leading bytes of the member into buf (inflating only what
 * is needed); *got receives the count. */
int tb_zip_read_head(const tb_zip *z, const tb_zip_entry *e, unsigned char *buf, size_t max, size_t *got,
		     tb_err *err);
/* The whole member, at most max bytes (larger members are refused), its
 * CRC checked: a view of the mapping (*owned NULL) or an inflated heap copy
 * (*owned set; the caller frees it). */
int tb_zip_read(const tb_zip *z, const tb_zip_entry *e, uint64_t max, const unsigned char **data,
		unsigned char **owned, tb_err *err);

#endif
