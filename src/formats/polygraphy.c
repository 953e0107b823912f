#include "config.h"

/*
 * Polygraphy's RunResults JSON (`polygraphy run model.onnx --onnxrt --trt
 * --save-outputs out.json`, polygraphy/comparator/struct.py and
 * polygraphy/json/serde.py):
 *     {"lst": [[runner_name, [IterationResult, ...]], ...], "polygraphy_class": "RunResults"}
 *     IterationResult: {"outputs": {name: LazyArray, ...}, "runtime": s, "runner_name": ..}
 *     LazyArray: {"values": {"array": base64 of a whole .npy file, "polygraphy_class": "ndarray"}}
 * Every encoded object carries its type as "polygraphy_class" (older
 * files: a key "__polygraphy_encoded_<Type>"); LazyArray was once called
 * LazyNumpyArray.  The file holds every runner; a reference reads the
 * first, a candidate the second (a file of one runner gives it to both),
 * so `tbisect check out.json out.json` compares the two backends.  Output
 * names are ONNX tensor names; a "mark all" run names every op output
 * after its module path, and the last one inside a module is taken as the
 * module's output (module_names below).
 */

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/onnxname.h"
#include "formats/npy.h"
#include "formats/reader.h"

/* The whole file is parsed in memory (about twice its size at the peak). */
#define PG_MAX_BYTES (4ull << 30)
/* Module paths deeper than this are not tracked (bounds the work on
 * hostile names; real graphs nest a handful of modules). */
#define PG_MAX_DEPTH 32

#define TYPE_MARKER "polygraphy_class"
#define LEGACY_MARKER "__polygraphy_encoded_"
#define LEGACY_VALUE "polygraphy_serialized_json_type"

static const char *const pg_suffixes[] = {NULL};

static const unsigned char *skip_ws(const unsigned char *p, const unsigned char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* An object whose first key is "lst": other JSON files stay unclaimed. */
static bool pg_sniff(const unsigned char *head, size_t n)
{
	const unsigned char *p = skip_ws(head, head + n), *end = head + n;

	if (p == end || *p++ != '{')
		return false;
	p = skip_ws(p, end);
	if ((size_t)(end - p) < 5 || memcmp(p, "\"lst\"", 5))
		return false;
	p = skip_ws(p + 5, end);
	return p < end && *p == ':';
}

/* The type an encoded object says it is, or NULL. */
static const char *pg_class(const cJSON *obj)
{
	const cJSON *tag = cJSON_GetObjectItemCaseSensitive(obj, TYPE_MARKER);
	const size_t n = sizeof LEGACY_MARKER - 1;

	if (cJSON_IsString(tag))
		return tag->valuestring;
	for (const cJSON *it = obj->child; it; it = it->next)
		if (it->string && !strncmp(it->string, LEGACY_MARKER, n) && cJSON_IsString(it) &&
		    !strcmp(it->valuestring, LEGACY_VALUE))
			return it->string + n;
	return NULL;
}

static bool is_class(const cJSON *obj, const char *name)
{
	const char *c = pg_class(obj);

	return c && !strcmp(c, name);
}

/* ---- base64, as Python's base64.b64encode writes it ---------------------- */

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* Decode s[0..n) (standard alphabet, '=' padding, no line breaks: what
 * Polygraphy's base64.b64decode(validate=True) takes) into a malloc'd
 * buffer.  Returns -1 with what is wrong in why, or -2 when out of memory. */
static int b64_decode(const char *s, size_t n, unsigned char **out, size_t *len, char *why, size_t size)
{
	size_t pad = 0, k = 0;
	unsigned char *buf;

	if (n % 4) {
		snprintf(why, size, "its length %zu is not a multiple of 4", n);
		return -1;
	}
	while (pad < 2 && pad < n && s[n - 1 - pad] == '=')
		pad++;
	buf = malloc(n / 4 * 3 + 1);
	if (!buf)
		return -2;
	for (size_t i = 0; i < n - pad; i += 4) {
		uint32_t v = 0;
		size_t m = n - pad - i < 4 ? n - pad - i : 4;
		for (size_t j = 0; j < 4; j++) {
			int d = j < m ? b64_value((unsigned char)s[i + j]) : 0;
			if (d < 0) {
				free(buf);
				snprintf(why, size, "byte %zu is not a base64 digit", i + j);
				return -1;
			}
			v = v << 6 | (uint32_t)d;
		}
		buf[k++] = (unsigned char)(v >> 16);
		if (m > 2)
			buf[k++] = (unsigned char)(v >> 8);
		if (m > 3)
			buf[k++] = (unsigned char)v;
	}
	*out = buf;
	*len = k;
	return 0;
}

/* ---- names: the last op output of a module stands for the module -------- */

/* A module path seen in the outputs' names: a prefix of one name. */
typedef struct modpath {
	const char *s; /* NULL: free slot */
	size_t len;
	uint64_t hash;
	size_t last; /* the last output (file order) under s + "/" */
	bool taken;  /* some output's own name: a module may not take it */
} modpath;

typedef struct modset {
	modpath *slot;
	size_t cap;
} modset;

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

/* The slot of s[0..n), added if absent (the set never fills: sized first). */
static modpath *modset_get(modset *set, const char *s, size_t n)
{
	uint64_t h = hash_bytes(s, n);
	size_t j = (size_t)h & (set->cap - 1);

	for (; set->slot[j].s; j = (j + 1) & (set->cap - 1))
		if (set->slot[j].hash == h && set->slot[j].len == n && !memcmp(set->slot[j].s, s, n))
			return &set->slot[j];
	set->slot[j] = (modpath){.s = s, .len = n, .hash = h, .last = SIZE_MAX};
	return &set->slot[j];
}

/* Ends of the module paths of a name: each '/' past the start, at most PG_MAX_DEPTH. */
static size_t module_ends(const char *s, size_t n, size_t *ends)
{
	size_t k = 0;

	for (size_t i = 1; i < n && k < PG_MAX_DEPTH; i++)
		if (s[i] == '/')
			ends[k++] = i;
	return k;
}

/* The name without its leading '/' (naming reads '/' as '.'). */
static const char *strip(const char *name)
{
	return name + (name[0] == '/');
}

/* keep[i]: how much of strip(names[i]) output i is named by.  An output
 * named <path>/<Op>[_K]_output_<N> (torch.onnx's node outputs) that is the
 * last output under some module path P/ (P a prefix of <path>, or <path>)
 * takes the innermost such P: ".../o_proj/MatMul_output_0" gives
 * ".../o_proj", a layer's last Add gives the layer.  The JSON object keeps
 * the runner's output order, which is the graph's.  Others keep their
 * whole name, and so does an output whose module name is some output's
 * own name. */
static int module_names(const char *const *names, size_t n, size_t *keep)
{
	size_t total = 0, ends[PG_MAX_DEPTH];
	modset set = {0};

	for (size_t i = 0; i < n; i++) {
		const char *s = strip(names[i]);
		keep[i] = strlen(s);
		/* Over-long names are refused when added; leave them out. */
		if (keep[i] <= TB_MAX_NAME)
			total += module_ends(s, keep[i], ends) + 1;
	}
	for (set.cap = 16; set.cap < 2 * total; set.cap *= 2)
		;
	set.slot = calloc(set.cap, sizeof *set.slot);
	if (!set.slot)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const char *s = strip(names[i]);
		if (keep[i] > TB_MAX_NAME)
			continue;
		modset_get(&set, s, keep[i])->taken = true;
		for (size_t k = module_ends(s, keep[i], ends); k-- > 0;)
			modset_get(&set, s, ends[k])->last = i;
	}
	for (size_t i = 0; i < n; i++) {
		const char *s = strip(names[i]), *op = strrchr(s, '/');
		size_t k;
		if (keep[i] > TB_MAX_NAME || !op || !tb_onnx_output_name(op + 1, strlen(op + 1)))
			continue;
		/* The innermost module this output ends, among its path's prefixes. */
		for (k = module_ends(s, keep[i], ends); k-- > 0;) {
			const modpath *m = modset_get(&set, s, ends[k]);
			if (m->last == i) {
				if (!m->taken)
					keep[i] = ends[k];
				break;
			}
		}
	}
	free(set.slot);
	return 0;
}

/* ---- the file ------------------------------------------------------------ */

typedef struct pg_ctx {
	tb_builder *b;
	const tb_file *f;
	const char *prefix;
} pg_ctx;

/* Find the ndarray holding an output's array: *nd, or NULL to skip the
 * output (noted). */
static int output_array(pg_ctx *c, const cJSON *out, const cJSON **nd, tb_err *err)
{
	const cJSON *v = out;
	const char *cls;

	*nd = NULL;
	if (!cJSON_IsObject(out))
		return tb_err_setc(err, TB_ERR_FORMAT, c->f->path, "output '%s' is not an object", out->string);
	if (is_class(out, "LazyArray") || is_class(out, "LazyNumpyArray")) {
		v = cJSON_GetObjectItemCaseSensitive(out, "values");
		if (!cJSON_IsObject(v))
			return tb_err_setc(err, TB_ERR_FORMAT, c->f->path, "output '%s': its LazyArray has no \"values\" object", out->string);
	}
	if (is_class(v, "Tensor")) {
		tb_builder_note(c->b, "%s: skipped output '%s': a torch tensor (torch.save inside the JSON), which tbisect does not read",
				c->f->path, out->string);
		return 0;
	}
	cls = pg_class(v);
	if (!cls || strcmp(cls, "ndarray"))
		return tb_err_setc(err, TB_ERR_FORMAT, c->f->path, "output '%s' is %s%s%s, not an encoded array", out->string,
				  cls ? "a '" : "an untagged object", cls ? cls : "", cls ? "'" : "");
	if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(v, "array")))
		return tb_err_setc(err, TB_ERR_FORMAT, c->f->path, "output '%s': its ndarray has no \"array\" string", out->string);
	*nd = v;
	return 0;
}

/* Decode one output's npy file into an owned blob and add it as name. */
static int add_output(pg_ctx *c, const cJSON *out, const char *name, tb_err *err)
{
	const char *path = c->f->path, *b64;
	const cJSON *nd;
	unsigned char *npy = NULL;
	size_t len = 0;
	uint64_t data_bytes;
	char why[128];
	tb_npy_info info;
	tb_tensor *t;
	tb_blob *blob = NULL;
	int rc;

	if (output_array(c, out, &nd, err) < 0)
		return -1;
	if (!nd)
		return 0;
	b64 = cJSON_GetObjectItemCaseSensitive(nd, "array")->valuestring;
	rc = b64_decode(b64, strlen(b64), &npy, &len, why, sizeof why);
	if (rc == -2)
		return tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory decoding output '%s'", out->string);
	if (rc < 0)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "output '%s': its array is not valid base64 (%s)", out->string, why);
	if (tb_npy_parse(npy, len, path, tb_builder_opts(c->b), &info, err) < 0) {
		free(npy);
		/* Valid arrays of no tensor type (strings) are not fatal. */
		if (err->code == TB_ERR_UNSUPPORTED || err->code == TB_ERR_NO_TENSOR) {
			tb_builder_note(c->b, "%s: skipped output '%s': %s", path, out->string, err->msg);
			tb_err_clear(err);
			return 0;
		}
		tb_err_prefix(err, "output '%s'", out->string);
		return -1;
	}
	t = tb_builder_add(c->b, path, c->prefix, name, err);
	if (t && tb_npy_apply_sized(t, &info, len, path, &data_bytes, err) == 0)
		blob = tb_builder_blob(c->b, err);
	if (!blob) {
		free(npy);
		tb_err_prefix(err, "output '%s'", out->string);
		return -1;
	}
	tb_blob_set_owned(blob, npy, len);
	t->blob = blob;
	t->offset = info.data_off;
	return tb_tensor_check_bounds(t, path, err);
}

/* The outputs of one iteration, named (module_names) and added in order. */
static int add_outputs(pg_ctx *c, const cJSON *outputs, tb_err *err)
{
	size_t n = (size_t)cJSON_GetArraySize(outputs), i = 0;
	const char **names;
	size_t *keep;
	const cJSON *it;
	char name[TB_MAX_NAME + 1];
	int rc = 0;

	if (n > TB_MAX_TENSORS)
		return tb_err_setc(err, TB_ERR_LIMIT, c->f->path, "more than %d tensors", TB_MAX_TENSORS);
	names = malloc((n ? n : 1) * sizeof *names);
	keep = malloc((n ? n : 1) * sizeof *keep);
	if (!names || !keep) {
		free(names);
		free(keep);
		return tb_err_setc(err, TB_ERR_NOMEM, c->f->path, "out of memory");
	}
	for (it = outputs->child; it; it = it->next)
		names[i++] = it->string;
	if (module_names(names, n, keep) < 0)
		rc = tb_err_setc(err, TB_ERR_NOMEM, c->f->path, "out of memory");
	for (i = 0, it = outputs->child; it && rc == 0; it = it->next, i++) {
		const char *s = strip(it->string);
		if (!*s) {
			rc = tb_err_setc(err, TB_ERR_FORMAT, c->f->path, "an output with an empty name");
			break;
		}
		/* A module name is a prefix of the output's own (which fits: over-long names keep theirs). */
		if (s[keep[i]]) {
			memcpy(name, s, keep[i]);
			name[keep[i]] = '\0';
			s = name;
		}
		rc = add_output(c, it, s, err);
	}
	free(names);
	free(keep);
	return rc;
}

/* The runner this side reads: the only one, or the side's (0: first, 1: second). */
static int pick_runner(pg_ctx *c, const cJSON *lst, const char **name, const cJSON **iters, tb_err *err)
{
	int n = cJSON_GetArraySize(lst), k, side = tb_builder_opts(c->b)->side;
	const cJSON *r, *rn;

	*name = NULL;
	*iters = NULL;
	if (n == 0)
		return tb_err_setc(err, TB_ERR_FORMAT, c->f->path, "Polygraphy results hold no runners (\"lst\" is empty)");
	k = n == 1 ? 0 : side;
	r = cJSON_GetArrayItem(lst, k);
	rn = cJSON_GetArrayItem(r, 0);
	*iters = cJSON_GetArrayItem(r, 1);
	if (!cJSON_IsArray(r) || cJSON_GetArraySize(r) != 2 || !cJSON_IsString(rn) || !cJSON_IsArray(*iters))
		return tb_err_setc(err, TB_ERR_FORMAT, c->f->path, "runner %d of \"lst\" is not a [name, iterations] pair", k);
	*name = rn->valuestring;
	return 0;
}

static int pg_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	pg_ctx c = {b, f, prefix};
	int want = tb_builder_opts(b)->record, n_iters, rc = -1;
	const cJSON *lst, *iters, *iter, *outputs;
	const char *runner, *dup;
	cJSON *root;

	(void)stem;
	if (f->size > PG_MAX_BYTES)
		return tb_err_setc(err, TB_ERR_LIMIT, f->path,
				   "Polygraphy results of %llu bytes exceed the 4 GiB this reader parses (save fewer outputs)",
				   (unsigned long long)f->size);
	root = tb_json_parse(f->data ? (const char *)f->data : "", (size_t)f->size, f->path, "Polygraphy results", err);
	if (!root)
		return -1;
	lst = cJSON_GetObjectItemCaseSensitive(root, "lst");
	/* Python's json keeps a repeated key's last value, cJSON its first. */
	if (cJSON_IsObject(root) && (dup = tb_json_duplicate_key(root))) {
		tb_err_setc(err, TB_ERR_FORMAT, f->path, "Polygraphy results repeat the key \"%s\"", dup);
		goto out;
	}
	if (!cJSON_IsArray(lst)) {
		tb_err_setc(err, TB_ERR_FORMAT, f->path, "Polygraphy results without a \"lst\" array of runners");
		goto out;
	}
	if (pick_runner(&c, lst, &runner, &iters, err) < 0)
		goto out;
	n_iters = cJSON_GetArraySize(iters);
	if (n_iters == 0) {
		tb_err_setc(err, TB_ERR_FORMAT, f->path, "runner %s holds no iterations", runner);
		goto out;
	}
	if (want >= n_iters) {
		tb_err_setc(err, TB_ERR_USAGE, f->path, "runner %s holds %d iteration%s; --record %d is out of range", runner, n_iters,
			   n_iters == 1 ? "" : "s", want);
		goto out;
	}
	iter = cJSON_GetArrayItem(iters, want);
	outputs = cJSON_GetObjectItemCaseSensitive(iter, "outputs");
	if (!cJSON_IsObject(iter) || !cJSON_IsObject(outputs)) {
		tb_err_setc(err, TB_ERR_FORMAT, f->path, "runner %s, iteration %d: no \"outputs\" object", runner, want);
		goto out;
	}
	tb_builder_note(b, "%s: runner %s, iteration %d of %d", f->path, runner, want, n_iters);
	rc = add_outputs(&c, outputs, err);
out:
	cJSON_Delete(root);
	return rc;
}

const tb_format tb_fmt_polygraphy = {
	.name = "polygraphy",
	.label = "out.json (Polygraphy RunResults)",
	.suffixes = pg_suffixes,
	.sniff = pg_sniff,
	.index = pg_index,
};
