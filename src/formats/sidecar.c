#include "config.h"

/*
 * sidecar: the JSON files dumpers write beside their tensors, read only to
 * check that the tensors they describe are there (they hold no tensors):
 *   - vLLM's intermediate logging: inputs.json / outputs.json in each
 *     step_N/<module>/ folder, {"type": "tuple", "items": [...]} or one
 *     {"type": "tensor", ...}; item i of a tuple is <kind>_<i>_<device>.pt,
 *     a lone tensor <kind>_<device>.pt, the device as torch names it with
 *     ':' as '_' (cuda_0, cpu: save_tensors in vLLM's
 *     vllm/v1/intermediates/intermediates_logging.py); null items and
 *     tensors over max_tensor_size, logged as <kind>_<i>.json, have no file.  The
 *     records' own check (tb_sidecar_check_vllm_record) asks the other
 *     way: a record without its sidecar is a partial copy.
 *   - transformers' model debugger: <Class>_debug_tree_FULL_TENSORS.json,
 *     whose "value" strings name each tensor's ./<file>.safetensors.
 */

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "base/jsonutil.h"
#include "formats/reader.h"
#include "formats/sidecar.h"

#define SIDECAR_MAX_BYTES (64u << 20)
#define MAX_PATH_LEN 4096

static const char *const no_suffixes[] = {NULL};

/* The first non-blank bytes of head, after '{', start with key. */
static bool first_key(const unsigned char *head, size_t n, const char *key)
{
	size_t i = 0, k = strlen(key);

	while (i < n && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t'))
		i++;
	if (i >= n || head[i++] != '{')
		return false;
	while (i < n && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t'))
		i++;
	return i + k + 2 <= n && head[i] == '"' && !memcmp(head + i + 1, key, k) && head[i + 1 + k] == '"';
}

static bool exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The folder part of path ("." when none), into dir. */
static void dir_of(const char *path, char *dir, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (slash)
		snprintf(dir, size, "%.*s", (int)(slash - path), path);
	else
		snprintf(dir, size, ".");
}

size_t tb_vllm_record_stem(const char *c, size_t n, int *index)
{
	static const char *const kinds[] = {"post_fwd_inputs", "inputs", "outputs"};
	/* torch's device types a model runs on (c10/core/DeviceType.h) */
	static const char *const devices[] = {"cpu", "cuda", "xpu", "hpu", "npu", "mps", "xla", "mtia"};
	size_t i = 0, d, j;
	bool device = false;
	long v = 0;

	for (size_t k = 0; k < sizeof kinds / sizeof *kinds && !i; k++)
		if (n > strlen(kinds[k]) && !strncmp(c, kinds[k], strlen(kinds[k])))
			i = strlen(kinds[k]);
	if (!i)
		return 0;
	/* the item indices of nested tuples: "_0", "_0_1" */
	while (i + 1 < n && c[i] == '_' && c[i + 1] >= '0' && c[i + 1] <= '9') {
		for (j = i + 1; j < n && c[j] >= '0' && c[j] <= '9'; j++)
			;
		i = j;
	}
	if (i >= n || c[i] != '_')
		return 0;
	for (d = j = i + 1; j < n && c[j] >= 'a' && c[j] <= 'z'; j++)
		;
	for (size_t k = 0; k < sizeof devices / sizeof *devices; k++)
		device = device || (j - d == strlen(devices[k]) && !strncmp(c + d, devices[k], j - d));
	if (!device)
		return 0;
	*index = -1;
	if (j == n)
		return i;
	if (c[j] != '_' || ++j == n || n - j > 6)
		return 0;
	for (; j < n; j++) {
		if (c[j] < '0' || c[j] > '9')
			return 0;
		v = v * 10 + (c[j] - '0');
	}
	*index = (int)v;
	return i;
}

/* Is there a file in dir named prefix + "_" + a device + ".pt" (or
 * prefix + ".json", what vLLM writes for a tensor over its size cap)? */
static bool record_present(const char *dir, const char *prefix)
{
	char path[MAX_PATH_LEN];
	size_t n = strlen(prefix);
	struct dirent *de;
	DIR *d;
	bool found = false;

	snprintf(path, sizeof path, "%s/%s.json", dir, prefix);
	if (exists(path))
		return true;
	d = opendir(dir);
	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		int index;
		found = len > 3 && !strcmp(de->d_name + len - 3, ".pt") &&
			tb_vllm_record_stem(de->d_name, len - 3, &index) == n && !strncmp(de->d_name, prefix, n);
	}
	closedir(d);
	return found;
}

static bool vllm_sniff(const unsigned char *head, size_t n)
{
	return first_key(head, n, "type");
}

static int vllm_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	const char *base = strrchr(f->path, '/');
	char dir[MAX_PATH_LEN], rec[64];
	const cJSON *type, *items, *it;
	cJSON *root;
	int i = 0, rc = 0;

	(void)b;
	(void)stem;
	(void)prefix;
	base = base ? base + 1 : f->path;
	if (strcmp(base, "inputs.json") && strcmp(base, "outputs.json") && strcmp(base, "post_fwd_inputs.json"))
		return 0; /* a JSON that only looks like a sidecar */
	if (f->size > SIDECAR_MAX_BYTES)
		return tb_err_setc(err, TB_ERR_LIMIT, f->path, "a vLLM sidecar over %u MB", SIDECAR_MAX_BYTES >> 20);
	root = tb_json_parse((const char *)f->data, (size_t)f->size, f->path, "vLLM sidecar", err);
	if (!root)
		return -1;
	dir_of(f->path, dir, sizeof dir);
	snprintf(rec, sizeof rec, "%.*s", (int)(strlen(base) - 5), base);
	type = cJSON_GetObjectItemCaseSensitive(root, "type");
	if (cJSON_IsString(type) && !strcmp(type->valuestring, "tensor")) {
		if (!record_present(dir, rec))
			rc = tb_err_setc(err, TB_ERR_FORMAT, f->path, "names a tensor, but no %s_DEVICE.pt is beside it", rec);
	} else if (cJSON_IsString(type) && (!strcmp(type->valuestring, "tuple") || !strcmp(type->valuestring, "list"))) {
		items = cJSON_GetObjectItemCaseSensitive(root, "items");
		if (!cJSON_IsArray(items))
			items = NULL;
		cJSON_ArrayForEach(it, items) {
			const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "type");
			char item[96];
			snprintf(item, sizeof item, "%s_%d", rec, i++);
			if (cJSON_IsString(t) && !strcmp(t->valuestring, "tensor") && !record_present(dir, item)) {
				rc = tb_err_setc(err, TB_ERR_FORMAT, f->path, "names item %d, a tensor, but no %s_DEVICE.pt is beside it",
						i - 1, item);
				break;
			}
		}
	} else {
		rc = tb_err_setc(err, TB_ERR_FORMAT, f->path, "a vLLM sidecar whose \"type\" is neither tensor nor tuple");
	}
	cJSON_Delete(root);
	return rc;
}

int tb_sidecar_check_vllm_record(const char *path, tb_err *err)
{
	const char *base = strrchr(path, '/');
	char dir[MAX_PATH_LEN], side[MAX_PATH_LEN + 32];
	bool inputs;
	size_t len;
	int index;

	base = base ? base + 1 : path;
	len = strlen(base);
	if (len <= 3 || strcmp(base + len - 3, ".pt") || !tb_vllm_record_stem(base, len - 3, &index))
		return 0;
	inputs = !strncmp(base, "inputs", 6) || !strncmp(base, "post_fwd_inputs", 15);
	dir_of(path, dir, sizeof dir);
	snprintf(side, sizeof side, "%s/%s.json", dir,
		 !strncmp(base, "post_fwd_inputs", 15) ? "post_fwd_inputs" : inputs ? "inputs" : "outputs");
	if (exists(side))
		return 0;
	/* vLLM versions whose save_tensors writes only the .pt files leave a
	 * module folder with no sidecar at all: only one of them gone is a
	 * partial copy. */
	snprintf(side, sizeof side, "%s/%s.json", dir, inputs ? "outputs" : "inputs");
	if (!exists(side))
		return 0;
	snprintf(side, sizeof side, "%s/%s.json", dir,
		 !strncmp(base, "post_fwd_inputs", 15) ? "post_fwd_inputs" : inputs ? "inputs" : "outputs");
	return tb_err_setc(err, TB_ERR_FORMAT, path, "a vLLM record without its sidecar %s (a partial copy of the dump?)", side);
}

/* Every "value" string of the model debugger's tree that names a file. */
static int check_values(const cJSON *node, const char *dir, const char *path, int depth, tb_err *err)
{
	const cJSON *it;

	if (depth > 256)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "the debug tree nests deeper than 256");
	cJSON_ArrayForEach(it, node) {
		if (it->string && !strcmp(it->string, "value") && cJSON_IsString(it) && !strncmp(it->valuestring, "./", 2) &&
		    strstr(it->valuestring, ".safetensors")) {
			char file[MAX_PATH_LEN];
			const char *name = it->valuestring + 2;
			size_t nd = strlen(dir), nn = strlen(name);
			if (strchr(name, '/') || nd + nn + 2 > sizeof file)
				return tb_err_setc(err, TB_ERR_FORMAT, path, "names '%s', not a file beside it", it->valuestring);
			memcpy(file, dir, nd);
			file[nd] = '/';
			memcpy(file + nd + 1, name, nn + 1);
			if (!exists(file))
				return tb_err_setc(err, TB_ERR_FORMAT, path, "names %s, which is missing", it->valuestring);
		} else if ((cJSON_IsObject(it) || cJSON_IsArray(it)) && check_values(it, dir, path, depth + 1, err) < 0) {
			return -1;
		}
	}
	return 0;
}

static bool hfdebug_sniff(const unsigned char *head, size_t n)
{
	return first_key(head, n, "module_path");
}

static int hfdebug_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	char dir[MAX_PATH_LEN];
	cJSON *root;
	int rc;

	(void)b;
	(void)stem;
	(void)prefix;
	if (f->size > SIDECAR_MAX_BYTES)
		return tb_err_setc(err, TB_ERR_LIMIT, f->path, "a model-debugger tree over %u MB", SIDECAR_MAX_BYTES >> 20);
	root = tb_json_parse((const char *)f->data, (size_t)f->size, f->path, "model debugger tree", err);
	if (!root)
		return -1;
	dir_of(f->path, dir, sizeof dir);
	rc = check_values(root, dir, f->path, 0, err);
	cJSON_Delete(root);
	return rc;
}

const tb_format tb_fmt_vllm_sidecar = {
	.name = "vllm-sidecar",
	.label = "vLLM's intermediate logging",
	.suffixes = no_suffixes,
	.sniff = vllm_sniff,
	.index = vllm_index,
};

const tb_format tb_fmt_hfdebug_tree = {
	.name = "hf-debug-tree",
	.label = "transformers' model debugger",
	.suffixes = no_suffixes,
	.sniff = hfdebug_sniff,
	.index = hfdebug_index,
};
