#include "config.h"

/*
 * SGLang's tensor dumper (python/sglang/srt/debug_utils/dumper.py): one
 * torch.save file per dump, in one flat folder for every rank, its
 * metadata in the file name as key=value pairs joined by "___":
 *     step=0___rank=1___dump_index=6___name=layer_input___recompute_status=disabled___layer_id=0.pt
 * (older versions: forward_pass_id=N in place of step=N).  The payload is
 * {"value": tensor, "meta": {..., "dims": "t h[tp]"}}, or a bare tensor.
 * A record is named step_S.rank_R[.layers.L].NAME, so that the layout step
 * (model/layout.h) joins its ranks and picks its step; the "non_intrusive__"
 * prefix of module-hook records is dropped, leaving the module path.
 *
 * Frames the dumper collects from CUDA graphs (sgl-project/sglang PR
 * #38439) add tap=, occurrence=, graph_runner=, forward_mode=, pd_role=,
 * graph_backend= and graph_size= after the name.  A module's second call
 * in one pass (occurrence=K, K >= 1) is a tensor of its own, NAME.call_K,
 * never the module's cell; a disaggregated server's prefill and decode
 * processes both count steps from 0, so pd_role names the process
 * (pd_prefill / pd_decode, whose steps follow the prefill's: layout.h); the
 * dumper trims the padded rows of a frame whose first axis is the padded
 * size, so one whose first axis is a larger multiple of graph_size kept
 * them, and says so.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/pt.h"
#include "formats/reader.h"
#include "formats/zip.h"

static const char *const sglang_suffixes[] = {NULL};

#define KEY_SEP "___"

/* The value of key in a "k=v___k=v" stem, into out; false when absent. */
static bool field(const char *stem, size_t len, const char *key, char *out, size_t size)
{
	size_t k = strlen(key);

	for (size_t at = 0; at < len;) {
		const char *rec = stem + at, *end = strstr(rec, KEY_SEP);
		size_t n = end && (size_t)(end - stem) < len ? (size_t)(end - rec) : len - at;
		if (n > k && !strncmp(rec, key, k) && rec[k] == '=') {
			if (n - k - 1 >= size)
				return false;
			memcpy(out, rec + k + 1, n - k - 1);
			out[n - k - 1] = '\0';
			return true;
		}
		at += n + strlen(KEY_SEP);
	}
	return false;
}

static bool digits(const char *s)
{
	if (!*s || strlen(s) > 9)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* Does a file stem (or archive folder) read as a dumper record name? */
static bool record_stem(const char *stem, size_t len)
{
	char v[32];

	return (field(stem, len, "step", v, sizeof v) || field(stem, len, "forward_pass_id", v, sizeof v)) &&
	       field(stem, len, "rank", v, sizeof v) && digits(v) && memmem(stem, len, "___name=", 8) != NULL;
}

/* A torch.save zip whose archive folder is such a record name: torch names
 * the folder after the file (its stem), so the content says it. */
static bool sglang_sniff(const unsigned char *head, size_t n)
{
	const unsigned char *name, *slash;
	size_t len;

	name = tb_zip_head_name(head, n, &len);
	if (!name || !(slash = memchr(name, '/', len)))
		return false;
	return record_stem((const char *)name, (size_t)(slash - name));
}

static int sglang_index(tb_builder *b, const tb_file *f, const char *stem, const char *prefix, tb_err *err)
{
	const char *base = strrchr(f->path, '/'), *dot;
	char step[32], rank[32], layer[32], rec[TB_MAX_NAME + 1], name[TB_MAX_NAME + 128], occ[32], role[32],
		size[32], call[48] = "", proc[48] = "";
	size_t len;
	const char *nm;
	tb_tensor *before = tb_builder_last(b), *t;
	long graph = 0;

	(void)stem;
	(void)prefix;
	base = base ? base + 1 : f->path;
	dot = strrchr(base, '.');
	len = dot ? (size_t)(dot - base) : strlen(base);
	if (!field(base, len, "step", step, sizeof step) && !field(base, len, "forward_pass_id", step, sizeof step))
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "an SGLang dump record whose file name has no step= (renamed?)");
	if (!field(base, len, "rank", rank, sizeof rank) || !field(base, len, "name", rec, sizeof rec))
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "an SGLang dump record whose file name has no rank= or name=");
	if (!digits(step) || !digits(rank))
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "an SGLang dump record whose step or rank is not a number");
	nm = strncmp(rec, "non_intrusive__", 15) ? rec : rec + 15;
	if (!*nm)
		return tb_err_setc(err, TB_ERR_FORMAT, f->path, "an SGLang dump record with an empty name");
	if (field(base, len, "occurrence", occ, sizeof occ)) {
		if (!digits(occ))
			return tb_err_setc(err, TB_ERR_FORMAT, f->path, "an SGLang dump record whose occurrence '%s' is not a number", occ);
		if (strcmp(occ, "0"))
			snprintf(call, sizeof call, ".call_%s", occ);
	}
	if (field(base, len, "pd_role", role, sizeof role) && strcmp(role, "null") && strcmp(role, "none")) {
		if (strcmp(role, "prefill") && strcmp(role, "decode"))
			return tb_err_setc(err, TB_ERR_FORMAT, f->path, "an SGLang dump record whose pd_role '%s' is neither prefill nor decode",
					  role);
		snprintf(proc, sizeof proc, "pd_%s.", role);
	}
	if (field(base, len, "graph_size", size, sizeof size)) {
		if (!digits(size) || !(graph = atol(size)))
			return tb_err_setc(err, TB_ERR_FORMAT, f->path, "an SGLang dump record whose graph_size '%s' is not a positive number",
					  size);
	}
	if (field(base, len, "layer_id", layer, sizeof layer) && digits(layer) && strncmp(nm, "model.", 6))
		snprintf(name, sizeof name, "step_%s.%srank_%s.layers.%s.%s%s", step, proc, rank, layer, nm, call);
	else
		snprintf(name, sizeof name, "step_%s.%srank_%s.%s%s", step, proc, rank, nm, call);
	if (tb_pt_index_named(b, f, name, err) < 0)
		return -1;
	t = tb_builder_last(b);
	if (graph && t && t != before && t->ndim >= 1 && t->shape[0] > graph && t->shape[0] % graph == 0)
		t->note = "a CUDA-graph frame at its padded width (graph_size rows per token slot): rows past the "
			  "batch's real count may be stale";
	return 0;
}

const tb_format tb_fmt_sglang = {
	.name = "sglang",
	.label = "SGLang's dumper",
	.suffixes = sglang_suffixes,
	.sniff = sglang_sniff,
	.index = sglang_index,
};
