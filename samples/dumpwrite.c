#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#include "dumpwrite.h"

void *dw_encode(const float *x, size_t n, tb_dtype dt, size_t *nbytes)
{
	size_t es = tb_dtype_size(dt);
	unsigned char *out = malloc(n * es + 1);

	if (!out)
		return NULL;
	*nbytes = n * es;
	for (size_t i = 0; i < n; i++) {
		unsigned char *p = out + i * es;
		uint64_t u = 0;
		switch (dt) {
		case TB_DT_F32: memcpy(p, &x[i], 4); continue;
		case TB_DT_F64: { double d = x[i]; memcpy(p, &d, 8); continue; }
		case TB_DT_BF16: u = tb_f32_to_bf16(x[i]); break;
		case TB_DT_F16: u = tb_f32_to_f16(x[i]); break;
		case TB_DT_I64: case TB_DT_I32: case TB_DT_I16: case TB_DT_I8:
			u = (uint64_t)(int64_t)x[i];
			break;
		case TB_DT_U64: case TB_DT_U32: case TB_DT_U16: case TB_DT_U8:
			u = (uint64_t)x[i];
			break;
		case TB_DT_BOOL: u = x[i] != 0; break;
		default:
			/* 1-byte floats: nearest code by search (writers and tests only). */
			{
				float best = INFINITY;
				for (unsigned b = 0; b < 256; b++) {
					float v;
					unsigned char byte = (unsigned char)b;
					tb_dtype_to_f32(dt, &byte, 1, false, &v);
					if (v == v && fabsf(v - x[i]) < best) {
						best = fabsf(v - x[i]);
						u = b;
					}
				}
			}
			break;
		}
		for (size_t k = 0; k < es; k++)
			p[k] = (unsigned char)(u >> (8 * k));
	}
	return out;
}

const char *dw_npy_descr(tb_dtype dt)
{
	switch (dt) {
	case TB_DT_F64: return "<f8";
	case TB_DT_F32: return "<f4";
	case TB_DT_F16: return "<f2";
	case TB_DT_BF16: return "<V2";
	case TB_DT_F8_E5M2: return "<f1";
	case TB_DT_F8_E4M3FN: case TB_DT_F8_E4M3FNUZ: case TB_DT_F8_E5M2FNUZ: return "<V1";
	case TB_DT_I64: return "<i8";
	case TB_DT_I32: return "<i4";
	case TB_DT_I16: return "<i2";
	case TB_DT_I8: return "|i1";
	case TB_DT_U64: return "<u8";
	case TB_DT_U32: return "<u4";
	case TB_DT_U16: return "<u2";
	case TB_DT_U8: return "|u1";
	case TB_DT_BOOL: return "|b1";
	default: return "?";
	}
}

const char *dw_st_dtype(tb_dtype dt)
{
	switch (dt) {
	case TB_DT_F64: return "F64";
	case TB_DT_F32: return "F32";
	case TB_DT_F16: return "F16";
	case TB_DT_BF16: return "BF16";
	case TB_DT_F8_E4M3FN: return "F8_E4M3";
	case TB_DT_F8_E5M2: return "F8_E5M2";
	case TB_DT_F8_E4M3FNUZ: return "F8_E4M3FNUZ";
	case TB_DT_F8_E5M2FNUZ: return "F8_E5M2FNUZ";
	case TB_DT_I64: return "I64";
	case TB_DT_I32: return "I32";
	case TB_DT_I16: return "I16";
	case TB_DT_I8: return "I8";
	case TB_DT_U64: return "U64";
	case TB_DT_U32: return "U32";
	case TB_DT_U16: return "U16";
	case TB_DT_U8: return "U8";
	case TB_DT_BOOL: return "BOOL";
	default: return "?";
	}
}

int dw_mkdirs_for(const char *path)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n >= sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0777) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return 0;
}

static int write_all(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
	FILE *f;

	if (dw_mkdirs_for(path) < 0)
		return -1;
	f = fopen(path, "wb");
	if (!f)
		return -1;
	if ((na && fwrite(a, 1, na, f) != na) || (nb && fwrite(b, 1, nb, f) != nb)) {
		fclose(f);
		return -1;
	}
	return fclose(f);
}

int dw_write_npy(const char *path, int version, const char *descr, bool fortran, int ndim, const int64_t *shape,
		 const void *data, size_t nbytes)
{
	dw_buf b = {0};
	int rc = dw_npy_bytes(&b, version, descr, fortran, ndim, shape, data, nbytes);

	if (rc == 0)
		rc = write_all(path, b.p, b.n, NULL, 0);
	dw_buf_free(&b);
	return rc;
}

int dw_write_safetensors(const char *path, const dw_tensor *ts, size_t n, const char *metadata_json)
{
	size_t cap = 256 + n * 512, len = 0, off = 0, data_len = 0, pad;
	char *hdr = malloc(cap);
	unsigned char *data;
	int rc;

	if (!hdr)
		return -1;
	for (size_t i = 0; i < n; i++)
		data_len += ts[i].nbytes;
	data = malloc(data_len ? data_len : 1);
	if (!data) {
		free(hdr);
		return -1;
	}
	len += (size_t)snprintf(hdr + len, cap - len, "{");
	if (metadata_json)
		len += (size_t)snprintf(hdr + len, cap - len, "\"__metadata__\":%s%s", metadata_json, n ? "," : "");
	for (size_t i = 0; i < n; i++) {
		len += (size_t)snprintf(hdr + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "",
					ts[i].name, dw_st_dtype(ts[i].dtype));
		for (int d = 0; d < ts[i].ndim; d++)
			len += (size_t)snprintf(hdr + len, cap - len, "%s%lld", d ? "," : "", (long long)ts[i].shape[d]);
		len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%zu,%zu]}", off, off + ts[i].nbytes);
		memcpy(data + off, ts[i].data, ts[i].nbytes);
		off += ts[i].nbytes;
	}
	len += (size_t)snprintf(hdr + len, cap - len, "}");
	pad = (8 - len % 8) % 8;
	memmove(hdr + 8, hdr, len);
	memset(hdr + 8 + len, ' ', pad);
	len += pad;
	for (int i = 0; i < 8; i++)
		hdr[i] = (char)((uint64_t)len >> (8 * i));
	rc = write_all(path, hdr, len + 8, data, data_len);
	free(hdr);
	free(data);
	return rc;
}

int dw_write_safetensors_sharded(const char *dir, const char *stem, const dw_tensor *ts, size_t n, size_t n_shards)
{
	char path[4096], shard[256];
	size_t per = (n + n_shards - 1) / n_shards;
	FILE *f;

	snprintf(path, sizeof path, "%s/%s.safetensors.index.json", dir, stem);
	if (dw_mkdirs_for(path) < 0)
		return -1;
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f, "{\n  \"metadata\": {\"total_size\": 0},\n  \"weight_map\": {\n");
	for (size_t i = 0; i < n; i++) {
		snprintf(shard, sizeof shard, "%s-%05zu-of-%05zu.safetensors", stem, i / per + 1, n_shards);
		fprintf(f, "    \"%s\": \"%s\"%s\n", ts[i].name, shard, i + 1 < n ? "," : "");
	}
	fprintf(f, "  }\n}\n");
	if (fclose(f) != 0)
		return -1;
	for (size_t s = 0; s < n_shards; s++) {
		size_t lo = s * per, hi = lo + per < n ? lo + per : n;
		snprintf(path, sizeof path, "%s/%s-%05zu-of-%05zu.safetensors", dir, stem, s + 1, n_shards);
		if (dw_write_safetensors(path, ts + lo, hi > lo ? hi - lo : 0, "{\"format\":\"pt\"}") < 0)
			return -1;
	}
	return 0;
}

/* ---- byte buffers ---- */

int dw_buf_add(dw_buf *b, const void *data, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		unsigned char *p;
		while (cap < b->n + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, data, n);
	b->n += n;
	return 0;
}

void dw_buf_free(dw_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

static void put_le(dw_buf *b, uint64_t v, int width)
{
	unsigned char t[8];

	for (int i = 0; i < width; i++)
		t[i] = (unsigned char)(v >> (8 * i));
	dw_buf_add(b, t, (size_t)width);
}

/* ---- zip ---- */

typedef struct dw_member {
	char *name;
	uint32_t crc;
	uint64_t csize, usize, lho;
	int method;
	bool zip64_central;
} dw_member;

struct dw_zip {
	dw_buf local;
	dw_member *m;
	size_t n, cap;
	dw_buf out;
};

dw_zip *dw_zip_new(void)
{
	return calloc(1, sizeof(dw_zip));
}

void dw_zip_free(dw_zip *z)
{
	if (!z)
		return;
	for (size_t i = 0; i < z->n; i++)
		free(z->m[i].name);
	free(z->m);
	dw_buf_free(&z->local);
	dw_buf_free(&z->out);
	free(z);
}

static int raw_deflate(const void *data, size_t n, dw_buf *out)
{
	z_stream s;
	unsigned char chunk[65536];
	int rc;

	memset(&s, 0, sizeof s);
	if (deflateInit2(&s, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	s.next_in = (Bytef *)(uintptr_t)data;
	s.avail_in = (uInt)n;
	do {
		s.next_out = chunk;
		s.avail_out = sizeof chunk;
		rc = deflate(&s, Z_FINISH);
		dw_buf_add(out, chunk, sizeof chunk - s.avail_out);
	} while (rc == Z_OK);
	deflateEnd(&s);
	return rc == Z_STREAM_END ? 0 : -1;
}

int dw_zip_add(dw_zip *z, const char *name, const void *data, size_t n, const dw_zip_opts *o)
{
	static const dw_zip_opts plain;
	dw_buf body = {0};
	size_t nlen = strlen(name), xlen = 0, pad = 0;
	dw_member *m;

	if (!o)
		o = &plain;
	if (z->n == z->cap) {
		size_t cap = z->cap ? z->cap * 2 : 16;
		dw_member *nm = realloc(z->m, cap * sizeof *nm);
		if (!nm)
			return -1;
		z->m = nm;
		z->cap = cap;
	}
	m = &z->m[z->n];
	memset(m, 0, sizeof *m);
	m->name = strdup(name);
	m->crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), data, (uInt)n);
	m->usize = n;
	m->method = o->deflate ? 8 : 0;
	m->lho = z->local.n;
	m->zip64_central = o->zip64_central;
	if (o->deflate) {
		if (raw_deflate(data, n, &body) < 0)
			return -1;
	} else {
		dw_buf_add(&body, data, n);
	}
	m->csize = body.n;
	if (o->zip64_local)
		xlen += 20;
	if (o->align) {
		size_t at = z->local.n + 30 + nlen + xlen + 4;
		pad = (o->align - at % o->align) % o->align;
		xlen += 4 + pad;
	}
	put_le(&z->local, 0x04034b50, 4);
	put_le(&z->local, o->zip64_local ? 45 : 20, 2);
	put_le(&z->local, 0, 2);
	put_le(&z->local, (uint64_t)m->method, 2);
	put_le(&z->local, 0, 2);
	put_le(&z->local, 0x21, 2);
	put_le(&z->local, m->crc, 4);
	put_le(&z->local, o->zip64_local ? 0xFFFFFFFFu : m->csize, 4);
	put_le(&z->local, o->zip64_local ? 0xFFFFFFFFu : m->usize, 4);
	put_le(&z->local, nlen, 2);
	put_le(&z->local, xlen, 2);
	dw_buf_add(&z->local, name, nlen);
	if (o->zip64_local) {
		put_le(&z->local, 1, 2);
		put_le(&z->local, 16, 2);
		put_le(&z->local, m->usize, 8);
		put_le(&z->local, m->csize, 8);
	}
	if (o->align) {
		put_le(&z->local, 0x4246, 2); /* "FB" */
		put_le(&z->local, pad, 2);
		for (size_t i = 0; i < pad; i++)
			dw_buf_add(&z->local, "Z", 1);
	}
	dw_buf_add(&z->local, body.p, body.n);
	dw_buf_free(&body);
	z->n++;
	return 0;
}

const unsigned char *dw_zip_bytes(dw_zip *z, bool zip64_end, size_t *n)
{
	uint64_t cd_off, cd_size;

	z->out.n = 0;
	dw_buf_add(&z->out, z->local.p, z->local.n);
	cd_off = z->out.n;
	for (size_t i = 0; i < z->n; i++) {
		const dw_member *m = &z->m[i];
		size_t nlen = strlen(m->name);
		bool x = m->zip64_central;
		put_le(&z->out, 0x02014b50, 4);
		put_le(&z->out, 0x031e, 2);
		put_le(&z->out, x ? 45 : 20, 2);
		put_le(&z->out, 0, 2);
		put_le(&z->out, (uint64_t)m->method, 2);
		put_le(&z->out, 0, 2);
		put_le(&z->out, 0x21, 2);
		put_le(&z->out, m->crc, 4);
		put_le(&z->out, x ? 0xFFFFFFFFu : m->csize, 4);
		put_le(&z->out, x ? 0xFFFFFFFFu : m->usize, 4);
		put_le(&z->out, nlen, 2);
		put_le(&z->out, x ? 28 : 0, 2);
		put_le(&z->out, 0, 2);
		put_le(&z->out, 0, 2);
		put_le(&z->out, 0, 2);
		put_le(&z->out, 0, 4);
		put_le(&z->out, x ? 0xFFFFFFFFu : m->lho, 4);
		dw_buf_add(&z->out, m->name, nlen);
		if (x) {
			put_le(&z->out, 1, 2);
			put_le(&z->out, 24, 2);
			put_le(&z->out, m->usize, 8);
			put_le(&z->out, m->csize, 8);
			put_le(&z->out, m->lho, 8);
		}
	}
	cd_size = z->out.n - cd_off;
	if (zip64_end) {
		uint64_t at = z->out.n;
		put_le(&z->out, 0x06064b50, 4);
		put_le(&z->out, 44, 8);
		put_le(&z->out, 45, 2);
		put_le(&z->out, 45, 2);
		put_le(&z->out, 0, 4);
		put_le(&z->out, 0, 4);
		put_le(&z->out, z->n, 8);
		put_le(&z->out, z->n, 8);
		put_le(&z->out, cd_size, 8);
		put_le(&z->out, cd_off, 8);
		put_le(&z->out, 0x07064b50, 4);
		put_le(&z->out, 0, 4);
		put_le(&z->out, at, 8);
		put_le(&z->out, 1, 4);
	}
	put_le(&z->out, 0x06054b50, 4);
	put_le(&z->out, 0, 4);
	put_le(&z->out, zip64_end ? 0xFFFF : z->n, 2);
	put_le(&z->out, zip64_end ? 0xFFFF : z->n, 2);
	put_le(&z->out, zip64_end ? 0xFFFFFFFFu : cd_size, 4);
	put_le(&z->out, zip64_end ? 0xFFFFFFFFu : cd_off, 4);
	put_le(&z->out, 0, 2);
	*n = z->out.n;
	return z->out.p;
}

int dw_zip_write(dw_zip *z, const char *path, bool zip64_end)
{
	size_t n;
	const unsigned char *p = dw_zip_bytes(z, zip64_end, &n);

	return write_all(path, p, n, NULL, 0);
}

int dw_npy_bytes(dw_buf *out, int version, const char *descr, bool fortran, int ndim, const int64_t *shape,
		 const void *data, size_t nbytes)
{
	char dict[1024];
	size_t len = 0, pre = version == 1 ? 10 : 12, total, hlen;

	len += (size_t)snprintf(dict + len, sizeof dict - len, "{'descr': '%s', 'fortran_order': %s, 'shape': (", descr,
				fortran ? "True" : "False");
	for (int i = 0; i < ndim; i++)
		len += (size_t)snprintf(dict + len, sizeof dict - len, "%lld%s", (long long)shape[i],
					ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
	len += (size_t)snprintf(dict + len, sizeof dict - len, "), }");
	/* Pad with spaces and a newline so the data starts on a 64-byte boundary. */
	total = (pre + len + 1 + 63) / 64 * 64;
	hlen = total - pre;
	dw_buf_add(out, "\x93NUMPY", 6);
	put_le(out, (uint64_t)version, 1);
	put_le(out, 0, 1);
	put_le(out, hlen, version == 1 ? 2 : 4);
	dw_buf_add(out, dict, len);
	for (size_t i = len; i + 1 < hlen; i++)
		dw_buf_add(out, " ", 1);
	dw_buf_add(out, "\n", 1);
	return dw_buf_add(out, data, nbytes);
}

int dw_write_npz(const char *path, const dw_tensor *ts, size_t n, const dw_zip_opts *o)
{
	dw_zip *z = dw_zip_new();
	int rc = 0;

	if (!z)
		return -1;
	for (size_t i = 0; i < n && rc == 0; i++) {
		dw_buf b = {0};
		char name[4096];
		snprintf(name, sizeof name, "%s.npy", ts[i].name);
		dw_npy_bytes(&b, 1, dw_npy_descr(ts[i].dtype), false, ts[i].ndim, ts[i].shape, ts[i].data, ts[i].nbytes);
		rc = dw_zip_add(z, name, b.p, b.n, o);
		dw_buf_free(&b);
	}
	if (rc == 0)
		rc = dw_zip_write(z, path, false);
	dw_zip_free(z);
	return rc;
}

/* ---- pickles ---- */

void dw_pk_begin(dw_pk *p, int protocol)
{
	p->protocol = protocol;
	dw_pk_op(p, 0x80);
	dw_pk_op(p, protocol);
}

void dw_pk_op(dw_pk *p, int op)
{
	unsigned char c = (unsigned char)op;

	dw_buf_add(&p->b, &c, 1);
}

void dw_pk_raw(dw_pk *p, const void *data, size_t n)
{
	dw_buf_add(&p->b, data, n);
}

void dw_pk_put(dw_pk *p)
{
	if (p->protocol >= 4) {
		dw_pk_op(p, 0x94);
	} else if (p->memo < 256) {
		dw_pk_op(p, 'q');
		dw_pk_op(p, (int)p->memo);
	} else {
		dw_pk_op(p, 'r');
		put_le(&p->b, p->memo, 4);
	}
	p->memo++;
}

static void pk_get(dw_pk *p, uint32_t slot)
{
	if (slot < 256) {
		dw_pk_op(p, 'h');
		dw_pk_op(p, (int)slot);
	} else {
		dw_pk_op(p, 'j');
		put_le(&p->b, slot, 4);
	}
}

void dw_pk_str(dw_pk *p, const char *s)
{
	size_t n = strlen(s);

	if (p->protocol >= 4 && n < 256) {
		dw_pk_op(p, 0x8C);
		dw_pk_op(p, (int)n);
	} else {
		dw_pk_op(p, 'X');
		put_le(&p->b, n, 4);
	}
	dw_pk_raw(p, s, n);
	dw_pk_put(p);
}

void dw_pk_int(dw_pk *p, int64_t v)
{
	if (v >= 0 && v < 256) {
		dw_pk_op(p, 'K');
		dw_pk_op(p, (int)v);
	} else if (v >= 0 && v < 65536) {
		dw_pk_op(p, 'M');
		put_le(&p->b, (uint64_t)v, 2);
	} else if (v >= INT32_MIN && v <= INT32_MAX) {
		dw_pk_op(p, 'J');
		put_le(&p->b, (uint64_t)v, 4);
	} else {
		int n = 8;
		while (n > 1 && ((v >> (8 * (n - 1) - 1)) == 0 || (v >> (8 * (n - 1) - 1)) == -1))
			n--;
		dw_pk_op(p, 0x8A);
		dw_pk_op(p, n);
		put_le(&p->b, (uint64_t)v, n);
	}
}

/* Memo slot of a cached key, or -1. */
static int pk_cached(dw_pk *p, const char *key)
{
	for (int i = 0; i < p->n_cache; i++)
		if (!strcmp(p->cache[i], key))
			return (int)p->slot[i];
	return -1;
}

static void pk_cache(dw_pk *p, const char *key)
{
	if (p->n_cache < 64) {
		p->cache[p->n_cache] = strdup(key);
		p->slot[p->n_cache++] = p->memo - 1;
	}
}

void dw_pk_global(dw_pk *p, const char *module, const char *name)
{
	char key[512];
	int slot;

	snprintf(key, sizeof key, "\x01%s\n%s", module, name);
	slot = pk_cached(p, key);
	if (slot >= 0) {
		pk_get(p, (uint32_t)slot);
		return;
	}
	if (p->protocol >= 4) {
		dw_pk_str(p, module);
		dw_pk_str(p, name);
		dw_pk_op(p, 0x93);
	} else {
		dw_pk_op(p, 'c');
		dw_pk_raw(p, module, strlen(module));
		dw_pk_raw(p, "\n", 1);
		dw_pk_raw(p, name, strlen(name));
		dw_pk_raw(p, "\n", 1);
	}
	dw_pk_put(p);
	pk_cache(p, key);
}

void dw_pk_shared_str(dw_pk *p, const char *s)
{
	int slot = pk_cached(p, s);

	if (slot >= 0) {
		pk_get(p, (uint32_t)slot);
		return;
	}
	dw_pk_str(p, s);
	pk_cache(p, s);
}

void dw_pk_free(dw_pk *p)
{
	for (int i = 0; i < p->n_cache; i++)
		free(p->cache[i]);
	dw_buf_free(&p->b);
	memset(p, 0, sizeof *p);
}

/* A tuple of ints as CPython protocol 2 writes it, then memoized. */
static void pk_int_tuple(dw_pk *p, const int64_t *v, int n)
{
	if (n == 0) {
		dw_pk_op(p, ')');
		return;
	}
	if (n > 3)
		dw_pk_op(p, '(');
	for (int i = 0; i < n; i++)
		dw_pk_int(p, v[i]);
	dw_pk_op(p, n > 3 ? 't' : 0x84 + n);
	dw_pk_put(p);
}

static const char *storage_class(tb_dtype dt)
{
	switch (dt) {
	case TB_DT_F32: return "FloatStorage";
	case TB_DT_F64: return "DoubleStorage";
	case TB_DT_F16: return "HalfStorage";
	case TB_DT_BF16: return "BFloat16Storage";
	case TB_DT_I64: return "LongStorage";
	case TB_DT_I32: return "IntStorage";
	case TB_DT_I16: return "ShortStorage";
	case TB_DT_I8: return "CharStorage";
	case TB_DT_U8: return "ByteStorage";
	case TB_DT_BOOL: return "BoolStorage";
	default: return NULL;
	}
}

static const char *torch_dtype_name(tb_dtype dt)
{
	switch (dt) {
	case TB_DT_F8_E4M3FN: return "float8_e4m3fn";
	case TB_DT_F8_E5M2: return "float8_e5m2";
	case TB_DT_U16: return "uint16";
	case TB_DT_U32: return "uint32";
	case TB_DT_U64: return "uint64";
	case TB_DT_F32: return "float32";
	case TB_DT_BF16: return "bfloat16";
	default: return "float16";
	}
}

void dw_pk_tensor(dw_pk *p, const dw_pt_tensor *t, const char *key, bool v3)
{
	size_t es = tb_dtype_size(t->dtype);
	int64_t stride[8], s = 1;

	for (int i = t->ndim - 1; i >= 0; i--) {
		stride[i] = t->strided ? t->stride[i] : s;
		s *= t->shape[i];
	}
	dw_pk_global(p, "torch._utils", v3 ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
	dw_pk_op(p, '(');
	dw_pk_op(p, '(');
	dw_pk_shared_str(p, "storage");
	if (v3)
		dw_pk_global(p, "torch.storage", "UntypedStorage");
	else
		dw_pk_global(p, "torch", storage_class(t->dtype));
	dw_pk_shared_str(p, key);
	dw_pk_shared_str(p, t->location ? t->location : "cpu");
	dw_pk_int(p, (int64_t)(v3 ? t->storage_bytes : t->storage_bytes / es));
	dw_pk_op(p, 't');
	dw_pk_put(p);
	dw_pk_op(p, 'Q');
	dw_pk_int(p, t->offset);
	pk_int_tuple(p, t->shape, t->ndim);
	pk_int_tuple(p, stride, t->ndim);
	dw_pk_op(p, 0x89);
	dw_pk_global(p, "collections", "OrderedDict");
	dw_pk_op(p, ')');
	dw_pk_op(p, 'R');
	dw_pk_put(p);
	if (v3)
		dw_pk_global(p, "torch", torch_dtype_name(t->dtype));
	dw_pk_op(p, 't');
	dw_pk_put(p);
	dw_pk_op(p, 'R');
	dw_pk_put(p);
}

/* The storage key of tensor i: its own, or a generated "0", "1", ... */
static const char *pt_key(const dw_pt_tensor *ts, size_t i, char *buf, size_t size)
{
	if (ts[i].key)
		return ts[i].key;
	snprintf(buf, size, "%zu", i);
	return buf;
}

int dw_write_pt_pickle(const char *path, const void *pkl, size_t n, const dw_pt_tensor *ts, size_t nt,
		       const dw_pt_opts *o)
{
	static const dw_pt_opts plain;
	const char *prefix;
	dw_zip_opts zo = {0};
	dw_zip *z = dw_zip_new();
	char name[4096], key[32];
	int rc;

	if (!o)
		o = &plain;
	prefix = o->prefix ? o->prefix : "archive";
	zo.deflate = o->deflate;
	zo.align = o->deflate ? 0 : 64;
	if (!z)
		return -1;
	snprintf(name, sizeof name, "%s/data.pkl", prefix);
	rc = dw_zip_add(z, name, pkl, n, &zo);
	snprintf(name, sizeof name, "%s/.format_version", prefix);
	rc |= dw_zip_add(z, name, "1", 1, &zo);
	snprintf(name, sizeof name, "%s/.storage_alignment", prefix);
	rc |= dw_zip_add(z, name, "64", 2, &zo);
	if (!o->no_byteorder) {
		snprintf(name, sizeof name, "%s/byteorder", prefix);
		rc |= dw_zip_add(z, name, o->big_endian ? "big" : "little", o->big_endian ? 3 : 6, &zo);
	}
	for (size_t i = 0; i < nt; i++) {
		bool seen = false;
		const char *k = pt_key(ts, i, key, sizeof key);
		for (size_t j = 0; j < i && !seen; j++) {
			char kj[32];
			seen = !strcmp(pt_key(ts, j, kj, sizeof kj), k);
		}
		if (seen)
			continue;
		snprintf(name, sizeof name, "%s/data/%s", prefix, k);
		rc |= dw_zip_add(z, name, ts[i].storage, ts[i].storage_bytes, &zo);
	}
	snprintf(name, sizeof name, "%s/version", prefix);
	rc |= dw_zip_add(z, name, "3\n", 2, &zo);
	if (rc == 0)
		rc = dw_zip_write(z, path, false);
	dw_zip_free(z);
	return rc;
}

int dw_write_pt(const char *path, const dw_pt_tensor *ts, size_t n, const dw_pt_opts *o)
{
	static const dw_pt_opts plain;
	dw_pk p = {0};
	char key[32];
	int rc;

	if (!o)
		o = &plain;
	dw_pk_begin(&p, 2);
	if (o->lone) {
		dw_pk_tensor(&p, &ts[0], pt_key(ts, 0, key, sizeof key), o->v3);
	} else {
		if (o->ordered) {
			dw_pk_global(&p, "collections", "OrderedDict");
			dw_pk_op(&p, ')');
			dw_pk_op(&p, 'R');
		} else {
			dw_pk_op(&p, '}');
		}
		dw_pk_put(&p);
		if (n > 1)
			dw_pk_op(&p, '(');
		for (size_t i = 0; i < n; i++) {
			dw_pk_str(&p, ts[i].name);
			dw_pk_tensor(&p, &ts[i], pt_key(ts, i, key, sizeof key), o->v3);
		}
		if (n)
			dw_pk_op(&p, n > 1 ? 'u' : 's');
		if (o->ordered) {
			/* state_dict()'s _metadata: BUILD with {'_metadata': OrderedDict({'': {'version': 1}})} */
			dw_pk_op(&p, '}');
			dw_pk_put(&p);
			dw_pk_str(&p, "_metadata");
			dw_pk_global(&p, "collections", "OrderedDict");
			dw_pk_op(&p, ')');
			dw_pk_op(&p, 'R');
			dw_pk_put(&p);
			dw_pk_str(&p, "");
			dw_pk_op(&p, '}');
			dw_pk_put(&p);
			dw_pk_str(&p, "version");
			dw_pk_int(&p, 1);
			dw_pk_op(&p, 's');
			dw_pk_op(&p, 's');
			dw_pk_op(&p, 's');
			dw_pk_op(&p, 'b');
		}
	}
	dw_pk_op(&p, '.');
	rc = dw_write_pt_pickle(path, p.b.p, p.b.n, ts, n, o);
	dw_pk_free(&p);
	return rc;
}

/* ---- MaxText golden files ---- */

/* A float as Python's repr would spell it (close enough: %.9g round-trips
 * float32; integral values get ".0"). */
static void py_float(FILE *f, float x)
{
	char buf[64];

	if (isnan(x)) {
		fputs("NaN", f);
		return;
	}
	if (isinf(x)) {
		fputs(x < 0 ? "-Infinity" : "Infinity", f);
		return;
	}
	snprintf(buf, sizeof buf, "%.9g", (double)x);
	fputs(buf, f);
	if (!strpbrk(buf, ".en"))
		fputs(".0", f);
}

static void json_matrix(FILE *f, const float *x, int64_t rows, int64_t cols)
{
	fputc('[', f);
	for (int64_t r = 0; r < rows; r++) {
		fputs(r ? ", [" : "[", f);
		for (int64_t c = 0; c < cols; c++) {
			if (c)
				fputs(", ", f);
			py_float(f, x[r * cols + c]);
		}
		fputc(']', f);
	}
	fputc(']', f);
}

int dw_write_golden_jsonl(const char *path, const dw_golden_rec *recs, size_t n)
{
	FILE *f;

	if (dw_mkdirs_for(path) < 0 || !(f = fopen(path, "w")))
		return -1;
	for (size_t i = 0; i < n; i++) {
		const dw_golden_rec *r = &recs[i];
		fprintf(f, "{\"prompt\": \"%s\", \"tokens\": [", r->prompt ? r->prompt : "");
		for (size_t k = 0; k < r->n_tokens; k++)
			fprintf(f, "%s%lld", k ? ", " : "", (long long)r->tokens[k]);
		fputs("], \"logits\": ", f);
		json_matrix(f, r->logits, r->seq, r->vocab);
		if (r->hidden) {
			fputs(", \"layer_hidden_states\": [", f);
			for (int l = 0; l < r->n_layers; l++) {
				if (l)
					fputs(", ", f);
				json_matrix(f, r->hidden[l], r->seq, r->hid);
			}
			fputc(']', f);
		}
		fputs("}\n", f);
	}
	return fclose(f);
}

static void pk_bytes(dw_pk *p, const void *data, size_t n, bool bytearray)
{
	if (p->protocol < 3) {
		/* bytes as _codecs.encode(latin-1 text, 'latin1') */
		const unsigned char *s = data;
		dw_buf t = {0};
		dw_pk_global(p, "_codecs", "encode");
		for (size_t i = 0; i < n; i++) {
			unsigned char u[2] = {(unsigned char)(0xC0 | s[i] >> 6), (unsigned char)(0x80 | (s[i] & 0x3F))};
			dw_buf_add(&t, s[i] < 0x80 ? s + i : u, s[i] < 0x80 ? 1 : 2);
		}
		dw_pk_op(p, 'X');
		put_le(&p->b, t.n, 4);
		dw_pk_raw(p, t.p, t.n);
		dw_pk_put(p);
		dw_buf_free(&t);
		dw_pk_shared_str(p, "latin1");
		dw_pk_op(p, 0x86);
		dw_pk_put(p);
		dw_pk_op(p, 'R');
	} else if (bytearray) {
		dw_pk_op(p, 0x96);
		put_le(&p->b, n, 8);
		dw_pk_raw(p, data, n);
	} else {
		dw_pk_op(p, n < 256 ? 'C' : 'B');
		put_le(&p->b, n, n < 256 ? 1 : 4);
		dw_pk_raw(p, data, n);
	}
	dw_pk_put(p);
}

static void pk_np_dtype(dw_pk *p, const char *code)
{
	dw_pk_global(p, "numpy", "dtype");
	dw_pk_str(p, code);
	dw_pk_op(p, 0x89);
	dw_pk_op(p, 0x88);
	dw_pk_op(p, 0x87);
	dw_pk_put(p);
	dw_pk_op(p, 'R');
	dw_pk_put(p);
	dw_pk_op(p, '(');
	dw_pk_int(p, 3);
	dw_pk_shared_str(p, "<");
	dw_pk_op(p, 'N');
	dw_pk_op(p, 'N');
	dw_pk_op(p, 'N');
	dw_pk_int(p, -1);
	dw_pk_int(p, -1);
	dw_pk_int(p, 0);
	dw_pk_op(p, 't');
	dw_pk_put(p);
	dw_pk_op(p, 'b');
}

/* A C-order numpy array as pickle.dump writes it at this protocol. */
static void pk_ndarray(dw_pk *p, const char *code, const void *data, size_t nbytes, int ndim, const int64_t *shape)
{
	int64_t zero = 0;

	if (p->protocol >= 5) {
		dw_pk_global(p, "numpy.core.numeric", "_frombuffer");
		dw_pk_op(p, '(');
		pk_bytes(p, data, nbytes, true);
		pk_np_dtype(p, code);
		pk_int_tuple(p, shape, ndim);
		dw_pk_shared_str(p, "C");
		dw_pk_op(p, 't');
		dw_pk_put(p);
		dw_pk_op(p, 'R');
		dw_pk_put(p);
		return;
	}
	dw_pk_global(p, "numpy.core.multiarray", "_reconstruct");
	dw_pk_global(p, "numpy", "ndarray");
	pk_int_tuple(p, &zero, 1);
	pk_bytes(p, "b", 1, false);
	dw_pk_op(p, 0x87);
	dw_pk_put(p);
	dw_pk_op(p, 'R');
	dw_pk_put(p);
	dw_pk_op(p, '(');
	dw_pk_int(p, 1);
	pk_int_tuple(p, shape, ndim);
	pk_np_dtype(p, code);
	dw_pk_op(p, 0x89);
	pk_bytes(p, data, nbytes, false);
	dw_pk_op(p, 't');
	dw_pk_put(p);
	dw_pk_op(p, 'b');
}

int dw_write_golden_pickle(const char *path, const dw_golden_rec *recs, size_t n, int protocol)
{
	dw_pk p = {0};
	int rc;

	dw_pk_begin(&p, protocol);
	dw_pk_op(&p, ']');
	dw_pk_put(&p);
	dw_pk_op(&p, '(');
	for (size_t i = 0; i < n; i++) {
		const dw_golden_rec *r = &recs[i];
		int64_t sv[2] = {r->seq, r->vocab}, sh[2] = {r->seq, r->hid}, st[1] = {(int64_t)r->n_tokens};
		dw_pk_op(&p, '}');
		dw_pk_put(&p);
		dw_pk_op(&p, '(');
		dw_pk_shared_str(&p, "prompt");
		dw_pk_str(&p, r->prompt ? r->prompt : "");
		dw_pk_shared_str(&p, "tokens");
		pk_ndarray(&p, "i8", r->tokens, r->n_tokens * 8, 1, st);
		dw_pk_shared_str(&p, "logits");
		pk_ndarray(&p, "f4", r->logits, (size_t)(r->seq * r->vocab) * 4, 2, sv);
		if (r->hidden) {
			dw_pk_shared_str(&p, "layer_hidden_states");
			dw_pk_op(&p, ']');
			dw_pk_put(&p);
			dw_pk_op(&p, '(');
			for (int l = 0; l < r->n_layers; l++)
				pk_ndarray(&p, "f4", r->hidden[l], (size_t)(r->seq * r->hid) * 4, 2, sh);
			dw_pk_op(&p, 'e');
		}
		dw_pk_op(&p, 'u');
	}
	dw_pk_op(&p, 'e');
	dw_pk_op(&p, '.');
	rc = write_all(path, p.b.p, p.b.n, NULL, 0);
	dw_pk_free(&p);
	return rc;
}
