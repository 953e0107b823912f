/*
 * fmtgen: writes the container fixtures the shell tests need (no python):
 *
 *   fmtgen convert FORMAT SRC OUT    re-write the tree SRC (read with tbisect's
 *                                    own reader) as one file OUT; FORMAT is npz,
 *                                    npz-deflate, npz-zip64, pt, pt-ordered,
 *                                    pt-v3, golden, golden-pkl2, golden-pkl4,
 *                                    golden-pkl5 (golden: logits and
 *                                    layer_hidden_states[i] from the cells;
 *                                    SRC may join trees with ',', one
 *                                    record, i.e. prompt, each)
 *   fmtgen zip [--deflate] [--zip64] [--zip64-central] [--zip64-end] OUT NAME=FILE...
 *   fmtgen many DIR N                N one-element .npy files, layers.I.block
 *   fmtgen pt-case KIND OUT.pt       a torch.save file with one flaw: size,
 *                                    missing, past, negstride, key, args, pid,
 *                                    complex, v3dtype, byteorder, shared,
 *                                    overflow, rank, expand, deflate (valid)
 *   fmtgen bomb OUT.npz BYTES [DECLARED]
 *                                    one deflated member of BYTES zero bytes
 *                                    (npy header included) whose sizes are
 *                                    declared as DECLARED (default BYTES)
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dumpwrite.h"
#include "model/naming.h"
#include "formats/tree.h"

static int die(const char *msg)
{
	fprintf(stderr, "fmtgen: %s\n", msg);
	return 2;
}

/* Every tensor of the tree as f32, C order. */
static float *read_all(tb_tensor *t)
{
	float *x = malloc(t->numel ? t->numel * sizeof *x : 1);
	tb_err err;

	if (!x || tb_tensor_acquire(t, &err) < 0)
		return NULL;
	tb_tensor_read_f32(t, 0, t->numel, x);
	tb_tensor_release(t);
	return x;
}

/* One golden record: a tree's logits and block outputs, read into bufs. */
typedef struct golden_src {
	dw_golden_rec rec;
	const float *hidden[256];
	int64_t tokens[4096];
	float *bufs[260];
	int nb;
} golden_src;

static int golden_record(const char *src, golden_src *g)
{
	dw_golden_rec *rec = &g->rec;
	tb_namer *namer;
	tb_tree *tree;
	tb_err err;

	rec->prompt = "fmtgen";
	if (tb_tree_open(src, NULL, &tree, &err) < 0)
		return die(err.msg);
	if (tb_namer_new(NULL, &namer, &err) < 0)
		return die("namer");
	for (size_t i = 0; i < tree->n_tensors; i++) {
		tb_tensor *t = tree->tensors[i];
		tb_cell c;
		if (!tb_namer_map(namer, t->name, "", &c, NULL, 0) || t->ndim < 2 || g->nb >= 258)
			continue;
		int64_t s = t->shape[t->ndim - 2], h = t->shape[t->ndim - 1];
		float *x = read_all(t);
		g->bufs[g->nb++] = x;
		if (!strcmp(c.tap, "logits")) {
			rec->logits = x;
			rec->seq = s;
			rec->vocab = h;
		} else if (!strcmp(c.tap, "block") && c.layer >= 0 && c.layer < 256) {
			g->hidden[c.layer] = x;
			rec->hid = h;
			if (c.layer + 1 > rec->n_layers)
				rec->n_layers = c.layer + 1;
		}
	}
	tb_namer_free(namer);
	tb_tree_free(tree);
	if (!rec->logits)
		return die("no logits in the source tree");
	for (int l = 0; l < rec->n_layers; l++)
		if (!g->hidden[l])
			return die("a layer's block output is missing");
	for (int64_t i = 0; i < rec->seq && i < 4096; i++)
		g->tokens[i] = 100 + i;
	rec->tokens = g->tokens;
	rec->n_tokens = (size_t)rec->seq;
	rec->hidden = rec->n_layers ? g->hidden : NULL;
	return 0;
}

/* srcs: trees joined by ',', one record (prompt) each. */
static int convert_golden(const char *format, const char *srcs, const char *out)
{
	char list[4096], *save = NULL;
	golden_src *g = calloc(16, sizeof *g);
	dw_golden_rec recs[16];
	size_t n = 0;
	int rc = 0;

	snprintf(list, sizeof list, "%s", srcs);
	for (char *src = strtok_r(list, ",", &save); g && src && rc == 0; src = strtok_r(NULL, ",", &save)) {
		if (n == 16)
			return die("at most 16 records");
		rc = golden_record(src, &g[n]);
		recs[n] = g[n].rec;
		n++;
	}
	if (!g || rc < 0)
		return -1;
	if (!strcmp(format, "golden"))
		rc = dw_write_golden_jsonl(out, recs, n);
	else
		rc = dw_write_golden_pickle(out, recs, n, format[10] - '0');
	for (size_t k = 0; k < n; k++)
		for (int i = 0; i < g[k].nb; i++)
			free(g[k].bufs[i]);
	free(g);
	return rc < 0 ? die("write failed") : 0;
}

static int convert(const char *format, const char *src, const char *out)
{
	tb_tree *tree;
	tb_err err;
	int rc = 0;

	if (!strncmp(format, "golden", 6))
		return convert_golden(format, src, out);
	if (tb_tree_open(src, NULL, &tree, &err) < 0)
		return die(err.msg);
	dw_tensor *ts = calloc(tree->n_tensors, sizeof *ts);
	dw_pt_tensor *pts = calloc(tree->n_tensors, sizeof *pts);
	for (size_t i = 0; i < tree->n_tensors; i++) {
		tb_tensor *t = tree->tensors[i];
		float *x = read_all(t);
		ts[i].name = t->name;
		ts[i].dtype = TB_DT_F32;
		ts[i].ndim = t->ndim;
		memcpy(ts[i].shape, t->shape, sizeof ts[i].shape);
		ts[i].data = x;
		ts[i].nbytes = t->numel * 4;
		pts[i].name = t->name;
		pts[i].dtype = TB_DT_F32;
		pts[i].ndim = t->ndim;
		memcpy(pts[i].shape, t->shape, sizeof pts[i].shape);
		pts[i].storage = x;
		pts[i].storage_bytes = t->numel * 4;
	}
	if (!strncmp(format, "npz", 3)) {
		dw_zip_opts o = {.deflate = !strcmp(format, "npz-deflate"), .zip64_local = !strcmp(format, "npz-zip64")};
		rc = dw_write_npz(out, ts, tree->n_tensors, &o);
	} else if (!strncmp(format, "pt", 2)) {
		dw_pt_opts o = {.ordered = !strcmp(format, "pt-ordered"), .v3 = !strcmp(format, "pt-v3")};
		rc = dw_write_pt(out, pts, tree->n_tensors, &o);
	} else {
		rc = -1;
	}
	for (size_t i = 0; i < tree->n_tensors; i++)
		free((void *)ts[i].data);
	free(ts);
	free(pts);
	tb_tree_free(tree);
	return rc < 0 ? die("unknown format or write failed") : 0;
}

static int slurp(const char *path, dw_buf *b)
{
	FILE *f = fopen(path, "rb");
	char chunk[65536];
	size_t n;

	if (!f)
		return -1;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		dw_buf_add(b, chunk, n);
	fclose(f);
	return 0;
}

static int zip_cmd(int argc, char **argv)
{
	dw_zip_opts o = {0};
	bool z64end = false;
	int i = 2;
	dw_zip *z = dw_zip_new();

	for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
		if (!strcmp(argv[i], "--deflate"))
			o.deflate = true;
		else if (!strcmp(argv[i], "--zip64"))
			o.zip64_local = true;
		else if (!strcmp(argv[i], "--zip64-central"))
			o.zip64_central = true;
		else if (!strcmp(argv[i], "--zip64-end"))
			z64end = true;
		else
			return die("unknown zip option");
	}
	if (i >= argc)
		return die("zip needs OUT");
	const char *out = argv[i++];
	for (; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		dw_buf b = {0};
		if (!eq)
			return die("zip members are NAME=FILE");
		*eq = '\0';
		if (slurp(eq + 1, &b) < 0)
			return die("cannot read a member file");
		dw_zip_add(z, argv[i], b.p, b.n, &o);
		dw_buf_free(&b);
	}
	if (dw_zip_write(z, out, z64end) < 0)
		return die("write failed");
	dw_zip_free(z);
	return 0;
}

static int many(const char *dir, long n)
{
	char path[4096];
	const int64_t shape[1] = {1};

	for (long i = 0; i < n; i++) {
		float x = (float)i;
		snprintf(path, sizeof path, "%s/layers.%ld.block.npy", dir, i);
		if (dw_write_npy(path, 1, "<f4", false, 1, shape, &x, 4) < 0)
			return die("write failed");
	}
	return 0;
}

/* One _rebuild_tensor_v2 call with every part chosen by the caller. */
typedef struct pt_spec {
	const char *cls, *key, *fn;
	int64_t numel, offset;
	int ndim;
	int64_t shape[20], stride[20];
	int nargs;     /* 6 normally */
	bool bad_pid;  /* a string where the pid tuple goes */
} pt_spec;

static void emit_tensor(dw_pk *p, const pt_spec *t)
{
	dw_pk_global(p, "torch._utils", t->fn ? t->fn : "_rebuild_tensor_v2");
	dw_pk_op(p, '(');
	if (t->bad_pid) {
		dw_pk_str(p, "storage");
	} else {
		dw_pk_op(p, '(');
		dw_pk_shared_str(p, "storage");
		dw_pk_global(p, "torch", t->cls);
		dw_pk_shared_str(p, t->key);
		dw_pk_shared_str(p, "cpu");
		dw_pk_int(p, t->numel);
		dw_pk_op(p, 't');
		dw_pk_put(p);
	}
	dw_pk_op(p, 'Q');
	dw_pk_int(p, t->offset);
	dw_pk_op(p, '(');
	for (int i = 0; i < t->ndim; i++)
		dw_pk_int(p, t->shape[i]);
	dw_pk_op(p, 't');
	dw_pk_op(p, '(');
	for (int i = 0; i < t->ndim; i++)
		dw_pk_int(p, t->stride[i]);
	dw_pk_op(p, 't');
	if (t->nargs > 4)
		dw_pk_op(p, 0x89);
	if (t->nargs > 5) {
		dw_pk_global(p, "collections", "OrderedDict");
		dw_pk_op(p, ')');
		dw_pk_op(p, 'R');
	}
	if (t->nargs > 6)
		dw_pk_global(p, "torch", "complex64");
	dw_pk_op(p, 't');
	dw_pk_op(p, 'R');
}

static int pt_case(const char *kind, const char *out)
{
	static const float x[6] = {0, 1, 2, 3, 4, 5};
	pt_spec t = {.cls = "FloatStorage", .key = "0", .numel = 6, .ndim = 1, .shape = {6}, .stride = {1}, .nargs = 6};
	dw_pt_tensor st = {.storage = x, .storage_bytes = sizeof x};
	dw_pt_opts o = {0};
	bool two = false;
	dw_pk p = {0};
	int rc;

	if (!strcmp(kind, "size"))
		t.numel = 5;
	else if (!strcmp(kind, "missing"))
		t.key = "7";
	else if (!strcmp(kind, "past"))
		t.offset = 4, t.shape[0] = 3;
	else if (!strcmp(kind, "negstride"))
		t.stride[0] = -1;
	else if (!strcmp(kind, "key"))
		t.key = "../data.pkl";
	else if (!strcmp(kind, "args"))
		t.nargs = 4, t.fn = "_rebuild_tensor_v2";
	else if (!strcmp(kind, "pid"))
		t.bad_pid = true;
	else if (!strcmp(kind, "complex"))
		t.cls = "ComplexFloatStorage", t.numel = 3;
	else if (!strcmp(kind, "v3dtype"))
		t.fn = "_rebuild_tensor_v3", t.nargs = 7;
	else if (!strcmp(kind, "byteorder"))
		o.big_endian = true;
	else if (!strcmp(kind, "shared"))
		two = true;
	else if (!strcmp(kind, "overflow"))
		t.ndim = 2, t.shape[0] = t.shape[1] = 1ll << 40, t.stride[1] = 1;
	else if (!strcmp(kind, "rank"))
		t.ndim = 17;
	else if (!strcmp(kind, "expand"))
		t.ndim = 2, t.shape[0] = t.shape[1] = 1ll << 20, t.stride[0] = t.stride[1] = 0;
	else if (!strcmp(kind, "deflate"))
		o.deflate = true;
	else
		return die("unknown pt-case");
	for (int i = 1; i < t.ndim && !strcmp(kind, "rank"); i++)
		t.shape[i] = 1, t.stride[i] = 1;
	dw_pk_begin(&p, 2);
	dw_pk_op(&p, '}');
	dw_pk_put(&p);
	if (two)
		dw_pk_op(&p, '(');
	dw_pk_str(&p, "w");
	emit_tensor(&p, &t);
	if (two) {
		dw_pk_str(&p, "v");
		t.cls = "IntStorage";
		emit_tensor(&p, &t);
	}
	dw_pk_op(&p, two ? 'u' : 's');
	dw_pk_op(&p, '.');
	rc = dw_write_pt_pickle(out, p.b.p, p.b.n, &st, 1, &o);
	dw_pk_free(&p);
	if (rc == 0 && !strcmp(kind, "byteorder")) {
		/* Same archive with a byteorder record that says neither. */
		dw_zip *z = dw_zip_new();
		dw_buf pk = {0};
		dw_pk q = {0};
		dw_pk_begin(&q, 2);
		dw_pk_op(&q, '}');
		dw_pk_op(&q, '.');
		dw_zip_add(z, "archive/data.pkl", q.b.p, q.b.n, NULL);
		dw_zip_add(z, "archive/byteorder", "middle", 6, NULL);
		rc = dw_zip_write(z, out, false);
		dw_zip_free(z);
		dw_pk_free(&q);
		dw_buf_free(&pk);
	}
	return rc < 0 ? die("write failed") : 0;
}

/* A member of `bytes` zeros, deflated in a stream (never held whole). */
static int bomb(const char *out, unsigned long long bytes, unsigned long long declared)
{
	static unsigned char zeros[1 << 16], chunk[1 << 16];
	dw_buf npy = {0}, body = {0};
	int64_t shape[1];
	z_stream s;
	unsigned long long left;
	uLong crc;
	int rc;

	shape[0] = (int64_t)((bytes - 128) / 4);
	dw_npy_bytes(&npy, 1, "<f4", false, 1, shape, NULL, 0);
	memset(&s, 0, sizeof s);
	deflateInit2(&s, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY);
	s.next_in = npy.p;
	s.avail_in = (uInt)npy.n;
	left = bytes - npy.n;
	crc = crc32(crc32(0L, Z_NULL, 0), npy.p, (uInt)npy.n);
	do {
		if (s.avail_in == 0 && left) {
			s.next_in = zeros;
			s.avail_in = left < sizeof zeros ? (uInt)left : sizeof zeros;
			crc = crc32(crc, zeros, s.avail_in);
			left -= s.avail_in;
		}
		s.next_out = chunk;
		s.avail_out = sizeof chunk;
		rc = deflate(&s, left || s.avail_in ? Z_NO_FLUSH : Z_FINISH);
		dw_buf_add(&body, chunk, sizeof chunk - s.avail_out);
	} while (rc != Z_STREAM_END);
	deflateEnd(&s);
	/* Local header, member, central entry, end record; zip64 sizes. */
	dw_buf z = {0};
	unsigned char h[64];
	const char *name = "weights.npy";
	size_t nl = strlen(name);
#define LE(p, v, w) for (int k_ = 0; k_ < (w); k_++) (p)[k_] = (unsigned char)((unsigned long long)(v) >> (8 * k_))
	memset(h, 0, sizeof h);
	LE(h, 0x04034b50, 4); LE(h + 4, 45, 2); LE(h + 8, 8, 2); LE(h + 12, 0x21, 2); LE(h + 14, crc, 4);
	LE(h + 18, 0xFFFFFFFFu, 4); LE(h + 22, 0xFFFFFFFFu, 4); LE(h + 26, nl, 2); LE(h + 28, 20, 2);
	dw_buf_add(&z, h, 30);
	dw_buf_add(&z, name, nl);
	LE(h, 1, 2); LE(h + 2, 16, 2); LE(h + 4, declared, 8); LE(h + 12, body.n, 8);
	dw_buf_add(&z, h, 20);
	dw_buf_add(&z, body.p, body.n);
	size_t cd = z.n;
	memset(h, 0, sizeof h);
	LE(h, 0x02014b50, 4); LE(h + 4, 0x031e, 2); LE(h + 6, 45, 2); LE(h + 10, 8, 2); LE(h + 14, 0x21, 2);
	LE(h + 16, crc, 4);
	LE(h + 20, 0xFFFFFFFFu, 4); LE(h + 24, 0xFFFFFFFFu, 4); LE(h + 28, nl, 2); LE(h + 30, 20, 2);
	dw_buf_add(&z, h, 46);
	dw_buf_add(&z, name, nl);
	LE(h, 1, 2); LE(h + 2, 16, 2); LE(h + 4, declared, 8); LE(h + 12, body.n, 8);
	dw_buf_add(&z, h, 20);
	size_t cds = z.n - cd;
	memset(h, 0, sizeof h);
	LE(h, 0x06054b50, 4); LE(h + 8, 1, 2); LE(h + 10, 1, 2); LE(h + 12, cds, 4); LE(h + 16, cd, 4);
	dw_buf_add(&z, h, 22);
	FILE *f = fopen(out, "wb");
	if (!f || fwrite(z.p, 1, z.n, f) != z.n || fclose(f))
		return die("write failed");
	dw_buf_free(&z);
	dw_buf_free(&body);
	dw_buf_free(&npy);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "convert"))
		return convert(argv[2], argv[3], argv[4]);
	if (argc >= 3 && !strcmp(argv[1], "zip"))
		return zip_cmd(argc, argv);
	if (argc == 4 && !strcmp(argv[1], "many"))
		return many(argv[2], strtol(argv[3], NULL, 10));
	if (argc == 4 && !strcmp(argv[1], "pt-case"))
		return pt_case(argv[2], argv[3]);
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "bomb"))
		return bomb(argv[2], strtoull(argv[3], NULL, 10), strtoull(argv[argc == 5 ? 4 : 3], NULL, 10));
	return die("usage: fmtgen convert|zip|many|bomb ... (see the source header)");
}
