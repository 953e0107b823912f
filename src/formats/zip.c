#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/jsonutil.h"
#include "formats/zip.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define EOCD_LEN 22
#define LOC64_LEN 20
#define EOCD64_LEN 56
#define CENTRAL_LEN 46
#define LOCAL_LEN 30
#define MAX_COMMENT 65535
/* Longest member name accepted (tensor names are capped at 4096 too). */
#define MAX_ZIP_NAME 4096
/* Deflate cannot expand one input byte into more than 1032 output bytes;
 * a larger declared size is a lie (or a zip bomb). */
#define DEFLATE_MAX_RATIO 1032
#define FLAG_ENCRYPTED 0x0001
#define FLAG_DESCRIPTOR 0x0008
#define FLAG_STRONG_ENC 0x0040
#define ZIP64_EXTRA 0x0001
/* zlib counts in uInt: feed it at most this much at a time. */
#define ZCHUNK (1u << 30)

struct tb_zip {
	const tb_file *file;
	tb_zip_entry *entries; /* central-directory order */
	size_t n;
	const tb_zip_entry **by_name; /* sorted by name */
};

static uint16_t rd16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

const unsigned char *tb_zip_head_name(const unsigned char *head, size_t n, size_t *len)
{
	if (n < LOCAL_LEN || rd32(head) != SIG_LOCAL)
		return NULL;
	*len = rd16(head + 26);
	return *len <= n - LOCAL_LEN ? head + LOCAL_LEN : NULL;
}

/* Where the archive's directory is, from the (zip64) end records. */
typedef struct zip_end {
	uint64_t n_entries, cd_off, cd_size;
	uint64_t limit; /* the directory must end at or before this offset */
} zip_end;

static int find_end(const tb_file *f, zip_end *end, tb_err *err)
{
	const unsigned char *d = f->data;
	uint64_t pos, lowest, eocd = UINT64_MAX;

	if (f->size < EOCD_LEN)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: file too short for an end-of-central-directory record");
	/* The record sits at the very end, followed only by its comment.  Take
	 * the last signature, as other readers do, and insist that its comment
	 * ends the file: no second reading of the archive is possible. */
	lowest = f->size - EOCD_LEN > MAX_COMMENT ? f->size - EOCD_LEN - MAX_COMMENT : 0;
	for (pos = f->size - EOCD_LEN + 1; pos-- > lowest;) {
		if (rd32(d + pos) == SIG_EOCD) {
			eocd = pos;
			break;
		}
	}
	if (eocd == UINT64_MAX)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: no end-of-central-directory record");
	if (eocd + EOCD_LEN + rd16(d + eocd + 20) != f->size)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: the end-of-central-directory comment does not end the file");
	/* 0xFFFF: the value is in the zip64 record. */
	if ((rd16(d + eocd + 4) != 0 && rd16(d + eocd + 4) != 0xFFFF) ||
	    (rd16(d + eocd + 6) != 0 && rd16(d + eocd + 6) != 0xFFFF) || rd16(d + eocd + 8) != rd16(d + eocd + 10))
		return tb_err_setc(err, TB_ERR_UNSUPPORTED, f->path, "zip: multi-disk archives are not supported");
	end->n_entries = rd16(d + eocd + 10);
	end->cd_size = rd32(d + eocd + 12);
	end->cd_off = rd32(d + eocd + 16);
	end->limit = eocd;
	if (eocd >= LOC64_LEN && rd32(d + eocd - LOC64_LEN) == SIG_LOC64) {
		const unsigned char *loc = d + eocd - LOC64_LEN;
		uint64_t off = rd64(loc + 8);
		if (rd32(loc + 4) != 0 || rd32(loc + 16) > 1)
			return tb_err_setc(err, TB_ERR_UNSUPPORTED, f->path, "zip: multi-disk archives are not supported");
		if (off > eocd - LOC64_LEN || eocd - LOC64_LEN - off < EOCD64_LEN || rd32(d + off) != SIG_EOCD64)
			return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: zip64 end-of-central-directory locator points to no record");
		if (rd32(d + off + 16) != 0 || rd32(d + off + 20) != 0 || rd64(d + off + 24) != rd64(d + off + 32))
			return tb_err_setc(err, TB_ERR_UNSUPPORTED, f->path, "zip: multi-disk archives are not supported");
		end->n_entries = rd64(d + off + 32);
		end->cd_size = rd64(d + off + 40);
		end->cd_off = rd64(d + off + 48);
		end->limit = off;
	}
	if (end->cd_off > end->limit || end->cd_size > end->limit - end->cd_off)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: central directory (%llu bytes at %llu) runs past its end record",
				  (unsigned long long)end->cd_size, (unsigned long long)end->cd_off);
	/* Readers that allow prepended data locate the directory from the end
	 * record instead; both must agree. */
	if (end->cd_off + end->cd_size != end->limit)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: central directory does not end where its end record starts");
	if (end->n_entries > TB_ZIP_MAX_ENTRIES)
		return tb_err_setc(err, TB_ERR_LIMIT, f->path, "zip: more than %d members", TB_ZIP_MAX_ENTRIES);
	if (end->n_entries > end->cd_size / CENTRAL_LEN)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: %llu members cannot fit a %llu-byte central directory",
				  (unsigned long long)end->n_entries, (unsigned long long)end->cd_size);
	return 0;
}

/* A member name we can turn into a tensor name: never a path that could
 * leave a directory if someone extracted it. */
static const char *bad_name(const unsigned char *s, size_t n)
{
	size_t start = 0;

	if (n == 0)
		return "is empty";
	if (n > MAX_ZIP_NAME)
		return "is too long";
	if (!tb_utf8_valid(s, n))
		return "is not valid UTF-8";
	if (s[0] == '/')
		return "is an absolute path";
	if (n >= 3 && s[1] == ':' && s[2] == '/')
		return "starts with a drive letter";
	for (size_t i = 0; i <= n; i++) {
		if (i < n && (s[i] < 0x20 || s[i] == 0x7f))
			return "contains a control character";
		if (i < n && s[i] == '\\')
			return "contains a backslash";
		if (i == n || s[i] == '/') {
			size_t len = i - start;
			if (len == 0 && i != n)
				return "has an empty path component";
			if ((len == 1 && s[start] == '.') || (len == 2 && s[start] == '.' && s[start + 1] == '.'))
				return "has a '.' or '..' path component";
			start = i + 1;
		}
	}
	return NULL;
}

/* Fill 64-bit values from a zip64 extra field: each of the fields whose
 * 32-bit value was 0xFFFFFFFF comes, in this order, from the extra. */
static int zip64_fields(const unsigned char *x, size_t xlen, uint64_t **want, int n_want, bool *found)
{
	size_t p = 0;

	*found = false;
	while (xlen - p >= 4) {
		uint16_t id = rd16(x + p), len = rd16(x + p + 2);
		if (len > xlen - p - 4)
			return -1;
		if (id == ZIP64_EXTRA) {
			if ((size_t)n_want * 8 > len)
				return -1;
			for (int i = 0; i < n_want; i++)
				*want[i] = rd64(x + p + 4 + 8 * (size_t)i);
			*found = true;
			return 0;
		}
		p += 4 + (size_t)len;
	}
	return 0;
}

static int parse_central(const tb_file *f, const unsigned char *c, uint64_t avail, tb_zip_entry *e, uint64_t *lho,
			 uint64_t *taken, tb_err *err)
{
	uint16_t flags, method, nlen, xlen, clen;
	uint64_t *want[3];
	int n_want = 0;
	const char *why;
	bool found;

	if (avail < CENTRAL_LEN || rd32(c) != SIG_CENTRAL)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: central directory entry is damaged");
	flags = rd16(c + 8);
	method = rd16(c + 10);
	e->crc = rd32(c + 16);
	e->csize = rd32(c + 20);
	e->usize = rd32(c + 24);
	nlen = rd16(c + 28);
	xlen = rd16(c + 30);
	clen = rd16(c + 32);
	*lho = rd32(c + 42);
	if ((uint64_t)nlen + xlen + clen > avail - CENTRAL_LEN)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: central directory entry runs past the directory");
	*taken = CENTRAL_LEN + (uint64_t)nlen + xlen + clen;
	why = bad_name(c + CENTRAL_LEN, nlen);
	if (why)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member name '%.*s' %s", nlen > 200 ? 200 : (int)nlen,
				  (const char *)c + CENTRAL_LEN, why);
	e->name = malloc((size_t)nlen + 1);
	if (!e->name)
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	memcpy(e->name, c + CENTRAL_LEN, nlen);
	e->name[nlen] = '\0';
	e->is_dir = e->name[nlen - 1] == '/';
	if (flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENC))
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s' is encrypted", e->name);
	if (method != TB_ZIP_STORED && method != TB_ZIP_DEFLATE)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s' uses compression method %u (only stored and deflate are supported)",
				  e->name, method);
	e->method = method;
	if (rd16(c + 34) != 0 && rd16(c + 34) != 0xFFFF)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s' is on another disk", e->name);
	if (e->usize == 0xFFFFFFFFu)
		want[n_want++] = &e->usize;
	if (e->csize == 0xFFFFFFFFu)
		want[n_want++] = &e->csize;
	if (*lho == 0xFFFFFFFFu)
		want[n_want++] = lho;
	if (n_want) {
		if (zip64_fields(c + CENTRAL_LEN + nlen, xlen, want, n_want, &found) < 0 || !found)
			return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s' has a missing or short zip64 extra field", e->name);
	}
	return 0;
}

/* Check the local header against the central entry; set the data offset. */
static int check_local(const tb_file *f, tb_zip_entry *e, uint64_t lho, uint64_t cd_off, tb_err *err)
{
	const unsigned char *l;
	uint16_t flags, nlen, xlen;
	uint64_t lc, lu;
	size_t n = strlen(e->name);

	if (lho > cd_off || cd_off - lho < LOCAL_LEN)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s': local header offset %llu is outside the archive",
				  e->name, (unsigned long long)lho);
	l = f->data + lho;
	if (rd32(l) != SIG_LOCAL)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s': no local header at offset %llu", e->name,
				  (unsigned long long)lho);
	flags = rd16(l + 6);
	nlen = rd16(l + 26);
	xlen = rd16(l + 28);
	if ((uint64_t)nlen + xlen > cd_off - lho - LOCAL_LEN)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s': local header runs into the central directory", e->name);
	if (nlen != n || memcmp(l + LOCAL_LEN, e->name, n) != 0)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s': local header names '%.*s'", e->name,
				  nlen > 200 ? 200 : (int)nlen, (const char *)l + LOCAL_LEN);
	if (rd16(l + 8) != e->method)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s': local header and central directory disagree on the method",
				  e->name);
	if (flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENC))
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s' is encrypted", e->name);
	e->data_off = lho + LOCAL_LEN + nlen + xlen;
	if (e->csize > cd_off - e->data_off)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s': %llu bytes of data run past the archive", e->name,
				  (unsigned long long)e->csize);
	/* Sizes in the local header (when present) must agree: two readers of
	 * one archive must never see two different members. */
	lc = rd32(l + 18);
	lu = rd32(l + 22);
	if (!(flags & FLAG_DESCRIPTOR) && (lc || lu)) {
		if (lc == 0xFFFFFFFFu || lu == 0xFFFFFFFFu) {
			uint64_t *want[2] = {&lu, &lc};
			bool found;
			if (zip64_fields(l + LOCAL_LEN + nlen, xlen, want, 2, &found) < 0 || !found)
				return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s': local header has a missing or short zip64 extra field",
						  e->name);
		}
		if (lc != e->csize || lu != e->usize)
			return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s': local header and central directory disagree on its size",
					  e->name);
	}
	if (e->method == TB_ZIP_STORED && e->csize != e->usize)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: stored member '%s' has different compressed and uncompressed sizes",
				  e->name);
	if (e->method == TB_ZIP_DEFLATE && e->usize / DEFLATE_MAX_RATIO > e->csize)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: member '%s' declares %llu bytes, more than deflate can make of %llu",
				  e->name, (unsigned long long)e->usize, (unsigned long long)e->csize);
	return 0;
}

static int cmp_by_name(const void *a, const void *b)
{
	return strcmp((*(const tb_zip_entry *const *)a)->name, (*(const tb_zip_entry *const *)b)->name);
}

/* Local header offsets, kept beside the entries while checking overlap. */
typedef struct span {
	uint64_t start, end;
	size_t idx;
} span;

static int cmp_span(const void *a, const void *b)
{
	const span *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int check_names_and_spans(tb_zip *z, span *spans, tb_err *err)
{
	const tb_file *f = z->file;
	uint64_t inflate_total = 0;

	for (size_t i = 0; i < z->n; i++)
		z->by_name[i] = &z->entries[i];
	qsort(z->by_name, z->n, sizeof *z->by_name, cmp_by_name);
	for (size_t i = 1; i < z->n; i++)
		if (!strcmp(z->by_name[i - 1]->name, z->by_name[i]->name))
			return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: duplicate member '%s'", z->by_name[i]->name);
	qsort(spans, z->n, sizeof *spans, cmp_span);
	for (size_t i = 1; i < z->n; i++)
		if (spans[i].start < spans[i - 1].end)
			return tb_err_setc(err, TB_ERR_FORMAT, f->path, "zip: members '%s' and '%s' overlap",
					  z->entries[spans[i - 1].idx].name, z->entries[spans[i].idx].name);
	for (size_t i = 0; i < z->n; i++) {
		const tb_zip_entry *e = &z->entries[i];
		if (e->method != TB_ZIP_DEFLATE)
			continue;
		if (e->usize > TB_ZIP_MAX_INFLATE - inflate_total)
			return tb_err_setc(err, TB_ERR_LIMIT, f->path, "zip: deflated members would inflate to more than the %llu-byte cap (member '%s')",
					   (unsigned long long)TB_ZIP_MAX_INFLATE, e->name);
		if (e->usize > TB_ZIP_RATIO_FLOOR && e->usize / TB_ZIP_MAX_RATIO > e->csize)
			return tb_err_setc(err, TB_ERR_LIMIT, f->path, "zip: member '%s' would inflate %llu-fold (%llu bytes from %llu): a zip bomb?",
					   e->name, (unsigned long long)(e->usize / (e->csize ? e->csize : 1)),
					   (unsigned long long)e->usize, (unsigned long long)e->csize);
		inflate_total += e->usize;
	}
	return 0;
}

int tb_zip_open(const tb_file *f, tb_zip **out, tb_err *err)
{
	zip_end end = {0};
	tb_zip *z;
	span *spans = NULL;
	uint64_t pos;
	int rc = -1;

	*out = NULL;
	if (find_end(f, &end, err) < 0)
		return -1;
	z = calloc(1, sizeof *z);
	if (!z)
		return tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
	z->file = f;
	z->entries = calloc(end.n_entries ? end.n_entries : 1, sizeof *z->entries);
	z->by_name = calloc(end.n_entries ? end.n_entries : 1, sizeof *z->by_name);
	spans = calloc(end.n_entries ? end.n_entries : 1, sizeof *spans);
	if (!z->entries || !z->by_name || !spans) {
		tb_err_setc(err, TB_ERR_NOMEM, f->path, "out of memory");
		goto out;
	}
	pos = end.cd_off;
	for (uint64_t i = 0; i < end.n_entries; i++) {
		tb_zip_entry *e = &z->entries[i];
		uint64_t lho = 0, taken = 0;

		z->n++;
		if (parse_central(f, f->data + pos, end.cd_off + end.cd_size - pos, e, &lho, &taken, err) < 0 ||
		    check_local(f, e, lho, end.cd_off, err) < 0)
			goto out;
		pos += taken;
		spans[i].start = lho;
		spans[i].end = e->data_off + e->csize;
		spans[i].idx = (size_t)i;
	}
	if (check_names_and_spans(z, spans, err) < 0)
		goto out;
	*out = z;
	rc = 0;
out:
	free(spans);
	if (rc < 0)
		tb_zip_free(z);
	return rc;
}

void tb_zip_free(tb_zip *z)
{
	if (!z)
		return;
	for (size_t i = 0; i < z->n; i++)
		free(z->entries[i].name);
	free(z->entries);
	free(z->by_name);
	free(z);
}

const char *tb_zip_file_path(const tb_zip *z)
{
	return z->file->path;
}

size_t tb_zip_count(const tb_zip *z)
{
	return z->n;
}

const tb_zip_entry *tb_zip_entry_at(const tb_zip *z, size_t i)
{
	return i < z->n ? &z->entries[i] : NULL;
}

const tb_zip_entry *tb_zip_find(const tb_zip *z, const char *name)
{
	size_t lo = 0, hi = z->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const tb_zip_entry *e = z->by_name[mid];
		int c = strcmp(e->name, name);
		if (c == 0)
			return e;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* A raw-deflate stream over a member's bytes in the mapping, fed to zlib
 * in pieces it can count. */
typedef struct zstream {
	z_stream s;
	const unsigned char *in;
	uint64_t csize, in_left; /* the member's deflated bytes; those not yet fed */
} zstream;

static int zs_init(zstream *z, const unsigned char *in, uint64_t csize)
{
	memset(z, 0, sizeof *z);
	z->in = in;
	z->csize = z->in_left = csize;
	z->s.next_in = (Bytef *)(uintptr_t)in;
	return inflateInit2(&z->s, -MAX_WBITS);
}

/* Back to the member's first byte, keeping zlib's allocations. */
static void zs_rewind(zstream *z)
{
	inflateReset(&z->s);
	z->in_left = z->csize;
	z->s.next_in = (Bytef *)(uintptr_t)z->in;
	z->s.avail_in = 0;
}

/* One inflate call into dst[0..room): zlib's status, *made the bytes made. */
static int zs_step(zstream *z, unsigned char *dst, uInt room, uInt *made)
{
	int zrc;

	if (z->s.avail_in == 0 && z->in_left > 0) {
		z->s.avail_in = z->in_left > ZCHUNK ? ZCHUNK : (uInt)z->in_left;
		z->in_left -= z->s.avail_in;
	}
	z->s.next_out = dst;
	z->s.avail_out = room;
	zrc = inflate(&z->s, Z_NO_FLUSH);
	*made = room - z->s.avail_out;
	return zrc;
}

/* Has all the input gone in? */
static bool zs_dry(const zstream *z)
{
	return z->s.avail_in == 0 && z->in_left == 0;
}

/* Inflate the member into out[0..want), or through a small scratch
 * buffer when out is NULL (a check that keeps nothing).  whole: want is
 * the declared size, so the stream must end exactly there (and its CRC
 * must match). */
static int inflate_member(const char *path, const char *name, const unsigned char *in, uint64_t csize,
			  uint32_t crc, unsigned char *out, uint64_t want, bool whole, tb_err *err)
{
	static const char *const ends_early = "zip: member '%s': deflate data ends early";
	static const char *const corrupt = "zip: member '%s': corrupt deflate data";
	unsigned char scratch[65536], spare;
	uint64_t out_done = 0;
	uLong c = crc32(0L, Z_NULL, 0);
	zstream z;
	uInt made;
	int zrc = Z_OK;

	if (zs_init(&z, in, csize) != Z_OK)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "zip: member '%s': cannot start inflating", name);
	while (out_done < want) {
		uint64_t room = want - out_done, cap = out ? ZCHUNK : sizeof scratch;
		unsigned char *dst = out ? out + out_done : scratch;
		zrc = zs_step(&z, dst, (uInt)(room < cap ? room : cap), &made);
		c = crc32(c, dst, made);
		out_done += made;
		if (zrc == Z_STREAM_END)
			break;
		if (zrc == Z_BUF_ERROR && zs_dry(&z)) {
			inflateEnd(&z.s);
			return tb_err_setc(err, TB_ERR_FORMAT, path, ends_early, name);
		}
		if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
			inflateEnd(&z.s);
			return tb_err_setc(err, TB_ERR_FORMAT, path, corrupt, name);
		}
	}
	if (out_done < want) {
		inflateEnd(&z.s);
		return tb_err_setc(err, TB_ERR_FORMAT, path, "zip: member '%s' inflates to %llu bytes, fewer than the %llu declared", name,
				  (unsigned long long)out_done, (unsigned long long)want);
	}
	/* Full: in a whole read the stream must end here, not produce more. */
	while (whole && zrc != Z_STREAM_END) {
		zrc = zs_step(&z, &spare, 1, &made);
		if (made) {
			inflateEnd(&z.s);
			return tb_err_setc(err, TB_ERR_FORMAT, path, "zip: member '%s' inflates to more than its declared %llu bytes", name,
					  (unsigned long long)want);
		}
		if (zrc != Z_OK && zrc != Z_STREAM_END) {
			inflateEnd(&z.s);
			return tb_err_setc(err, TB_ERR_FORMAT, path, zrc == Z_BUF_ERROR ? ends_early : corrupt, name);
		}
	}
	inflateEnd(&z.s);
	if (whole && (uint32_t)c != crc)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "zip: member '%s' fails its CRC check", name);
	return 0;
}

/* A deflated member's blob never holds it whole: readers see a window of
 * this many bytes that inflates forward as they read, so memory stays
 * bounded whatever the member inflates to.  When it slides, WINDOW_KEEP
 * bytes before the offset asked for stay, for readers that step back a
 * little (a row again, a token's logit in a row already passed). */
#define WINDOW_BYTES (16u << 20)
#define WINDOW_KEEP (4u << 20)

/* What a deflated member's blob needs to inflate it again: whole (for a
 * strided view, or tb_zip_read) or a window at a time. */
typedef struct inflate_ctx {
	const tb_file *file;
	char *name;
	uint64_t data_off, csize, usize;
	uint32_t crc;
	/* The window, while the blob is acquired: */
	zstream zs;
	unsigned char *buf;  /* cap bytes, or NULL when closed */
	size_t cap;
	uint64_t base, len;  /* buf holds the member's bytes [base, base + len), all the stream made so far */
} inflate_ctx;

static int lazy_load(void *ctx, uint64_t size, unsigned char **data, tb_err *err)
{
	inflate_ctx *c = ctx;
	unsigned char *buf;

	if (size > SIZE_MAX - 1 || !(buf = malloc((size_t)size + 1)))
		return tb_err_setc(err, TB_ERR_NOMEM, c->file->path,
				   "zip: out of memory inflating member '%s' (%llu bytes)", c->name,
				   (unsigned long long)size);
	if (inflate_member(c->file->path, c->name, c->file->data + c->data_off, c->csize, c->crc, buf, size,
				   true, err) < 0) {
		free(buf);
		return -1;
	}
	*data = buf;
	return 0;
}

/* Inflate exactly n more bytes of the member into dst.  The member passed
 * every check when its archive was opened, so only a file changed since
 * then fails here. */
static int window_inflate(inflate_ctx *c, unsigned char *dst, size_t n)
{
	uInt made;

	while (n > 0) {
		int zrc = zs_step(&c->zs, dst, (uInt)n, &made);
		dst += made;
		n -= made;
		if (zrc == Z_STREAM_END ? n > 0 : zrc != Z_OK)
			return -1;
	}
	return 0;
}

/* Fill the window to its size, or to the member's end. */
static int window_fill(inflate_ctx *c)
{
	uint64_t end = c->base + c->len, n = c->cap - c->len;

	if (n > c->usize - end)
		n = c->usize - end;
	if (window_inflate(c, c->buf + c->len, (size_t)n) < 0)
		return -1;
	c->len += n;
	return 0;
}

static void window_close(void *ctx)
{
	inflate_ctx *c = ctx;

	if (!c->buf)
		return;
	inflateEnd(&c->zs.s);
	free(c->buf);
	c->buf = NULL;
}

static int window_open(void *ctx, tb_err *err)
{
	inflate_ctx *c = ctx;

	c->cap = c->usize < WINDOW_BYTES ? (size_t)c->usize : WINDOW_BYTES;
	c->base = c->len = 0;
	c->buf = malloc(c->cap ? c->cap : 1);
	if (!c->buf)
		return tb_err_setc(err, TB_ERR_NOMEM, c->file->path, "zip: out of memory inflating member '%s'", c->name);
	if (zs_init(&c->zs, c->file->data + c->data_off, c->csize) != Z_OK) {
		free(c->buf);
		c->buf = NULL;
		return tb_err_setc(err, TB_ERR_NOMEM, c->file->path, "zip: member '%s': cannot start inflating", c->name);
	}
	/* Filling now makes zlib take its own memory here, where running out
	 * can still be reported, and not in a read, which cannot report it. */
	if (window_fill(c) < 0) {
		window_close(c);
		return tb_err_setc(err, TB_ERR_IO, c->file->path,
				   "zip: member '%s' no longer inflates (out of memory, or the file changed since it was opened)",
				   c->name);
	}
	return 0;
}

/* Slide the window to start WINDOW_KEEP before off (never before where it
 * starts now), keeping what it holds from there on, and fill it. */
static int window_slide(inflate_ctx *c, uint64_t off)
{
	uint64_t end = c->base + c->len, from = off > WINDOW_KEEP ? off - WINDOW_KEEP : 0;

	if (from < c->base)
		from = c->base;
	if (from < end) {
		memmove(c->buf, c->buf + (from - c->base), (size_t)(end - from));
	} else {
		/* Inflate through to from, keeping nothing. */
		while (end < from) {
			size_t n = from - end < c->cap ? (size_t)(from - end) : c->cap;
			if (window_inflate(c, c->buf, n) < 0)
				return -1;
			end += n;
		}
	}
	c->base = from;
	c->len = end - from;
	return window_fill(c);
}

static const unsigned char *window_at(void *ctx, uint64_t off, uint64_t n, uint64_t *got)
{
	inflate_ctx *c = ctx;
	uint64_t end = c->base + c->len;

	if (off < c->base) {
		/* Deflate reads only forward, so a read behind the window starts
		 * the member over.  Rare: the compare walks a streamed pair
		 * front to back in one thread, and other readers step back by
		 * less than WINDOW_KEEP. */
		zs_rewind(&c->zs);
		c->base = c->len = 0;
		end = 0;
	}
	if (off >= end || (end - off < n && end - off < TB_BLOB_MIN_RUN && end < c->usize)) {
		if (window_slide(c, off) < 0)
			return NULL;
		end = c->base + c->len;
		if (off >= end)
			return NULL;
	}
	*got = end - off < n ? end - off : n;
	return c->buf + (off - c->base);
}

static void lazy_free(void *ctx)
{
	inflate_ctx *c = ctx;

	if (c) {
		window_close(c);
		free(c->name);
	}
	free(c);
}

static const tb_blob_ops inflate_ops = {
	.load = lazy_load,
	.open = window_open,
	.window = window_at,
	.close = window_close,
	.free_ctx = lazy_free,
};

/* A stored member's CRC, checked once (torch can be told to write none:
 * a zero CRC is not checked). */
static int check_stored(const tb_zip *z, const tb_zip_entry *e, tb_err *err)
{
	const unsigned char *p = z->file->data + e->data_off;
	uLong c = crc32(0L, Z_NULL, 0);

	if (e->crc == 0)
		return 0;
	for (uint64_t off = 0; off < e->usize; off += ZCHUNK)
		c = crc32(c, p + off, e->usize - off > ZCHUNK ? ZCHUNK : (uInt)(e->usize - off));
	if ((uint32_t)c != e->crc)
		return tb_err_setc(err, TB_ERR_FORMAT, z->file->path, "zip: member '%s' fails its CRC check", e->name);
	return 0;
}

int tb_zip_blob(const tb_zip *z, const tb_zip_entry *e, tb_blob *blob, tb_err *err)
{
	inflate_ctx *c;

	if (e->method == TB_ZIP_STORED) {
		if (check_stored(z, e, err) < 0)
			return -1;
		tb_blob_set_mapped(blob, z->file, e->data_off, e->usize);
		return 0;
	}
	/* Inflate once now, keeping nothing, so a member that lies about its
	 * size or fails its CRC is refused when the tree opens. */
	if (inflate_member(z->file->path, e->name, z->file->data + e->data_off, e->csize, e->crc, NULL,
				       e->usize, true, err) < 0)
		return -1;
	c = calloc(1, sizeof *c);
	if (c)
		c->name = strdup(e->name);
	if (!c || !c->name) {
		lazy_free(c);
		return tb_err_setc(err, TB_ERR_NOMEM, z->file->path, "out of memory");
	}
	c->file = z->file;
	c->data_off = e->data_off;
	c->csize = e->csize;
	c->usize = e->usize;
	c->crc = e->crc;
	tb_blob_set_lazy(blob, &inflate_ops, c, e->usize);
	return 0;
}

int tb_zip_read_head(const tb_zip *z, const tb_zip_entry *e, unsigned char *buf, size_t max, size_t *got,
		     tb_err *err)
{
	size_t n = e->usize < max ? (size_t)e->usize : max;

	*got = n;
	if (n == 0)
		return 0;
	if (e->method == TB_ZIP_STORED) {
		memcpy(buf, z->file->data + e->data_off, n);
		return 0;
	}
	return inflate_member(z->file->path, e->name, z->file->data + e->data_off, e->csize, e->crc, buf, n,
			      n == e->usize, err);
}

int tb_zip_read(const tb_zip *z, const tb_zip_entry *e, uint64_t max, const unsigned char **data,
		unsigned char **owned, tb_err *err)
{
	*owned = NULL;
	if (e->usize > max)
		return tb_err_setc(err, TB_ERR_LIMIT, z->file->path,
				   "zip: member '%s' is %llu bytes, more than the %llu allowed", e->name,
				   (unsigned long long)e->usize, (unsigned long long)max);
	if (e->method == TB_ZIP_STORED) {
		*data = z->file->data + e->data_off;
		return check_stored(z, e, err);
	}
	if (lazy_load(&(inflate_ctx){.file = z->file, .name = e->name, .data_off = e->data_off, .csize = e->csize,
				     .crc = e->crc},
		      e->usize, owned, err) < 0)
		return -1;
	*data = *owned;
	return 0;
}
