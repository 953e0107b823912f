#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
	char dict[1024], head[2048];
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
	memcpy(head, "\x93NUMPY", 6);
	head[6] = (char)version;
	head[7] = 0;
	if (version == 1) {
		head[8] = (char)(hlen & 0xFF);
		head[9] = (char)(hlen >> 8);
	} else {
		for (int i = 0; i < 4; i++)
			head[8 + i] = (char)((hlen >> (8 * i)) & 0xFF);
	}
	memcpy(head + pre, dict, len);
	memset(head + pre + len, ' ', hlen - len - 1);
	head[total - 1] = '\n';
	return write_all(path, head, total, data, nbytes);
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
