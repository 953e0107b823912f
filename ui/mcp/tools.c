/*
 * tools: the tools `tbisect mcp` offers, as one table: name, description,
 * input and output JSON Schemas, annotations and handler.  tools/list is
 * written from it; tools/call reads the arguments a handler needs (a
 * wrong one is a tool error the agent can read and fix, as revision
 * 2025-11-25 asks (SEP-1303); an unknown tool is a protocol error) and
 * wraps the answer as a CallToolResult:
 * structuredContent, and the same JSON as text.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/answers.h"
#include "mcp/tools.h"

/* One argument's problem, or a failing call: the text of the tool error. */
typedef struct args {
	const cJSON *obj;
	mcp_call *call;
	tb_err *err;
	bool bad;
} args;

static void bad_arg(args *a, const char *key, const char *want)
{
	if (!a->bad)
		tb_err_setc(a->err, TB_ERR_FORMAT, NULL, "argument '%s' must be %s", key, want);
	a->bad = true;
}

static const char *arg_str(args *a, const char *key, bool required)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->obj, key);

	if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
		bad_arg(a, key, "a string");
	else if (cJSON_IsString(v) && v->valuestring[0])
		return v->valuestring;
	else if (required)
		bad_arg(a, key, "given (a non-empty string)");
	return NULL;
}

static bool arg_bool(args *a, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->obj, key);

	if (v && !cJSON_IsNull(v) && !cJSON_IsBool(v))
		bad_arg(a, key, "true or false");
	return cJSON_IsTrue(v);
}

static int arg_int(args *a, const char *key, int lo, int hi, int dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->obj, key);

	if (!v || cJSON_IsNull(v))
		return dflt;
	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
	    v->valuedouble > hi) {
		char want[64];
		snprintf(want, sizeof want, "an integer in %d..%d", lo, hi);
		bad_arg(a, key, want);
		return dflt;
	}
	return v->valueint;
}

static mcp_pair *arg_pair(args *a)
{
	const char *id = arg_str(a, "pair", true);

	return a->bad ? NULL : mcp_pair_get(id, a->call, a->err);
}

/* The cell argument of pair p, as an index; -1 (and err) when the pair
 * has no such cell, or none was given and required. */
static long arg_cell(args *a, mcp_pair *p, bool required)
{
	const char *name = arg_str(a, "cell", required);
	long i;

	if (a->bad || !name)
		return -1;
	i = mcp_pair_cell(p, name);
	if (i < 0) {
		const cJSON *rep = mcp_pair_report(p);
		tb_err_setc(a->err, TB_ERR_FORMAT, NULL, "no cell '%s' in pair %s (%s vs %s); the cells tool lists them", name,
			   mcp_pair_id(p), cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rep, "ref")),
			   cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rep, "cand")));
		a->bad = true;
	}
	return i;
}

/* --- the handlers: the answer, or NULL with a->err --- */

static cJSON *t_open_pair(args *a)
{
	mcp_pair_spec s = {.step = -1};
	const cJSON *tol = cJSON_GetObjectItemCaseSensitive(a->obj, "tol");
	mcp_pair *p;

	s.ref = arg_str(a, "ref", true);
	s.cand = arg_str(a, "cand", true);
	s.map = arg_str(a, "map", false);
	s.heads = arg_int(a, "heads", 1, 65536, 0);
	s.kv_heads = arg_int(a, "kv_heads", 1, 65536, 0);
	s.step = arg_int(a, "step", 0, 999999, -1);
	s.tol = *mcp_pairs_tolerance();
	if (cJSON_IsString(tol)) {
		s.tol_file = tol->valuestring;
	} else if (cJSON_IsObject(tol)) {
		static const char *const keys[] = {"atol", "rtol", "diverge", "max_kl"};
		double *fields[] = {&s.tol.atol, &s.tol.rtol, &s.tol.diverge, &s.tol.max_kl};
		for (size_t i = 0; i < 4; i++) {
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(tol, keys[i]);
			if (v && (!cJSON_IsNumber(v) || !(v->valuedouble >= 0)))
				bad_arg(a, "tol", "a tolerance file's path or {atol, rtol, diverge, max_kl} of numbers >= 0");
			else if (v)
				*fields[i] = v->valuedouble;
		}
	} else if (tol && !cJSON_IsNull(tol)) {
		bad_arg(a, "tol", "a tolerance file's path or {atol, rtol, diverge, max_kl}");
	}
	if (a->bad || !(p = mcp_pair_open(&s, a->call, a->err)))
		return NULL;
	return mcp_answer_pair(p);
}

static cJSON *t_first_divergence(args *a)
{
	mcp_pair *p = arg_pair(a);

	return p ? mcp_answer_first(p) : NULL;
}

static cJSON *t_explain_cell(args *a)
{
	mcp_pair *p = arg_pair(a);
	long cell = p ? arg_cell(a, p, true) : -1;
	bool detail = arg_bool(a, "detail");

	return a->bad || cell < 0 ? NULL : mcp_answer_cell(p, cell, detail, a->err);
}

static cJSON *t_causes(args *a)
{
	mcp_pair *p = arg_pair(a);
	long cell = p ? arg_cell(a, p, false) : -1;

	return !p || a->bad ? NULL : mcp_answer_causes(p, cell, a->err);
}

static cJSON *t_cells(args *a)
{
	mcp_pair *p = arg_pair(a);
	const cJSON *filter = cJSON_GetObjectItemCaseSensitive(a->obj, "filter");
	const char *status = NULL, *match = NULL, *cursor = arg_str(a, "cursor", false);
	int limit = arg_int(a, "limit", 1, 200, 0);

	if (filter && !cJSON_IsNull(filter)) {
		args f = {.obj = filter, .call = a->call, .err = a->err};
		if (!cJSON_IsObject(filter))
			bad_arg(a, "filter", "an object {status, match}");
		status = arg_str(&f, "status", false);
		match = arg_str(&f, "match", false);
		a->bad |= f.bad;
	}
	return !p || a->bad ? NULL : mcp_answer_cells(p, status, match, cursor, limit, a->err);
}

static cJSON *t_replay(args *a)
{
	mcp_pair *p = arg_pair(a);
	long cell = p ? arg_cell(a, p, true) : -1;
	const char *variant = arg_str(a, "variant", false);

	return a->bad || cell < 0 ? NULL : mcp_answer_replay(p, cell, variant, a->err);
}

static cJSON *t_suggest_map(args *a)
{
	mcp_pair *p = arg_pair(a);

	return p ? mcp_answer_suggest(p, a->err) : NULL;
}

static cJSON *t_compare_passes(args *a)
{
	mcp_pair *p = arg_pair(a);
	bool record = arg_bool(a, "record"), reset = arg_bool(a, "reset");
	int last = arg_int(a, "last", 1, 200, 0);

	return !p || a->bad ? NULL : mcp_answer_passes(p, record, reset, last, a->err);
}

/* --- the table --- */

#define PAIR_ARG "\"pair\":{\"type\":\"string\",\"description\":\"the pair id open_pair returned, e.g. p1\"}"
#define CELL_ARG(what) "\"cell\":{\"type\":\"string\",\"description\":\"" what "\"}"
#define IN(props, required) "{\"type\":\"object\",\"properties\":{" props "},\"required\":[" required "]}"
#define OUT(props, required) "{\"type\":\"object\",\"properties\":{" props "},\"required\":[" required "]}"
#define ANY_OBJ "{\"type\":[\"object\",\"null\"]}"
#define STR "{\"type\":\"string\"}"
#define STR_OR_NULL "{\"type\":[\"string\",\"null\"]}"
#define ARR "{\"type\":\"array\"}"

static const struct tool {
	const char *name, *title, *description, *input, *output;
	bool read_only, idempotent;
	cJSON *(*fn)(args *a);
} tools[] = {
	{"open_pair", "Open a pair of dump trees",
	 "Open a reference and a candidate dump tree (a directory or one file: npy, npz, safetensors, torch.save, "
	 "GGUF graph dumps ...) and compare them as `tbisect check` does. Returns the pair id the other tools take, "
	 "the verdict, coverage (how many tensors paired), layouts and warnings. The pair stays open and is compared "
	 "again when its files change. Opening the same trees again returns the same id.",
	 IN("\"ref\":{\"type\":\"string\",\"description\":\"the reference's dump tree\"},"
	    "\"cand\":{\"type\":\"string\",\"description\":\"the candidate's (the port's) dump tree\"},"
	    "\"map\":{\"type\":\"string\",\"description\":\"a naming map file (suggest_map writes one)\"},"
	    "\"tol\":{\"type\":[\"string\",\"object\"],\"description\":\"a per-tensor tolerance file (tbisect calibrate "
	    "writes one), or {atol, rtol, diverge, max_kl}\",\"properties\":{\"atol\":{\"type\":\"number\"},"
	    "\"rtol\":{\"type\":\"number\"},\"diverge\":{\"type\":\"number\"},\"max_kl\":{\"type\":\"number\"}}},"
	    "\"heads\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"attention heads\"},"
	    "\"kv_heads\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"key/value heads\"},"
	    "\"step\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"forward pass K of a multi-step dump\"}",
	    "\"ref\",\"cand\""),
	 OUT("\"pair\":" STR ",\"verdict\":" STR ",\"coverage\":" ANY_OBJ ",\"layout\":" ANY_OBJ
	     ",\"warnings\":" ARR ",\"first_divergence\":" ANY_OBJ,
	     "\"pair\",\"verdict\",\"coverage\",\"warnings\""),
	 true, true, t_open_pair},
	{"first_divergence", "Where the port first diverges",
	 "The first cell (in forward order) whose output diverges, its first bad position, where the error is born "
	 "(origin), the verdict and tolerance, the top three causes and the coverage, with the provenance (tree "
	 "stamps, the last recorded pass). Start here after open_pair.",
	 IN(PAIR_ARG, "\"pair\""),
	 OUT("\"pair\":" STR ",\"verdict\":" STR ",\"tolerance\":{\"type\":\"object\"},\"first_divergence\":" ANY_OBJ
	     ",\"origin\":" ANY_OBJ ",\"causes\":" ARR ",\"coverage\":" ANY_OBJ ",\"provenance\":{\"type\":\"object\"}",
	     "\"pair\",\"verdict\",\"first_divergence\",\"causes\",\"provenance\""),
	 true, true, t_first_divergence},
	{"explain_cell", "One cell's numbers",
	 "A cell's metrics (the keys of check --json's cells), its per-position profile summarised (runs of bad "
	 "positions, the worst ones), the worst channels of its worst position, per-head rows for attention "
	 "cells, and for an MoE layer's MLP cells the layer's routing (expert sets that agree, flips at near ties "
	 "with the reference's gap, other differences). detail: true gives longer lists and the whole per-position "
	 "profile.",
	 IN(PAIR_ARG "," CELL_ARG("the cell: L3.attn, L0.mlp.act, embed, logits")
	    ",\"detail\":{\"type\":\"boolean\",\"description\":\"longer lists and the per-position profile\"}",
	    "\"pair\",\"cell\""),
	 OUT("\"pair\":" STR ",\"cell\":" STR ",\"status\":" STR ",\"profile\":" ANY_OBJ, "\"pair\",\"cell\",\"status\""),
	 true, true, t_explain_cell},
	{"causes", "Ranked causes",
	 "The causes of the first divergence (or of cell), ranked, each with its score, why (the measured facts), "
	 "look_at (what to check in the reference) and confirmed (the replay that reproduced the candidate, or null); "
	 "dump_to_confirm lists the taps to dump so a replay can confirm the top one.",
	 IN(PAIR_ARG "," CELL_ARG("another cell than the first divergence"), "\"pair\""),
	 OUT("\"pair\":" STR ",\"cell\":" STR_OR_NULL ",\"causes\":" ARR ",\"dump_to_confirm\":" ARR,
	     "\"pair\",\"causes\""),
	 true, true, t_causes},
	{"cells", "The grid, a page at a time",
	 "The cells in forward order, a page at a time: cell, status, shape, rel_l2, cosine, max_abs, first bad "
	 "position. filter.status: match, close, diverged, missing or bad (not match); filter.match: a glob of cell "
	 "names (L1?.attn*). Pass next_cursor back as cursor for the next page.",
	 IN(PAIR_ARG ",\"filter\":{\"type\":\"object\",\"properties\":{\"status\":{\"type\":\"string\",\"enum\":"
		     "[\"match\",\"close\",\"diverged\",\"missing\",\"bad\"]},\"match\":{\"type\":\"string\"}}},"
		     "\"cursor\":{\"type\":\"string\"},\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":200}",
	    "\"pair\""),
	 OUT("\"pair\":" STR ",\"cells\":" ARR ",\"next_cursor\":" STR_OR_NULL ",\"total\":{\"type\":\"integer\"}",
	     "\"pair\",\"cells\",\"next_cursor\",\"total\""),
	 true, true, t_cells},
	{"replay", "Recompute a cell from its dumped inputs",
	 "Replay the op of a cell (MLP activation, norms, embedding scale, output multipliers, biases, residual "
	 "wiring) from the dumped inputs under each hypothesis: which variant the reference computes, which one "
	 "reproduces the candidate (confirming a cause), or why it could not run (the note names the taps to dump).",
	 IN(PAIR_ARG "," CELL_ARG("the cell to replay")
	    ",\"variant\":{\"type\":\"string\",\"description\":\"a variant or cause id to ask about\"}",
	    "\"pair\",\"cell\""),
	 OUT("\"pair\":" STR ",\"cell\":" STR ",\"replay\":{\"type\":\"object\"}", "\"pair\",\"cell\",\"replay\""),
	 true, true, t_replay},
	{"suggest_map", "Suggest a naming map",
	 "When tensors do not pair (coverage is low), the map file that would pair them, each rule with its "
	 "confidence and evidence. Save it and open_pair again with map.",
	 IN(PAIR_ARG, "\"pair\""), OUT("\"pair\":" STR ",\"map\":" ANY_OBJ, "\"pair\",\"map\""), true, true,
	 t_suggest_map},
	{"compare_passes", "How the first divergence moved",
	 "The pair's passes (one per fix tried): how the first divergence moved (later, earlier, stuck). "
	 "record: true records the current comparison as a pass first (in the user's state directory, never in a "
	 "tree); reset: true forgets the passes first.",
	 IN(PAIR_ARG ",\"record\":{\"type\":\"boolean\"},\"reset\":{\"type\":\"boolean\"},"
		     "\"last\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":200}",
	    "\"pair\""),
	 OUT("\"pair\":" STR ",\"passes\":{\"type\":\"integer\"},\"history\":" ARR ",\"moved\":" STR_OR_NULL,
	     "\"pair\",\"passes\",\"history\""),
	 false, false, t_compare_passes},
};

void mcp_tools_list(cJSON *list)
{
	for (size_t i = 0; i < sizeof tools / sizeof *tools; i++) {
		const struct tool *t = &tools[i];
		cJSON *o = cJSON_CreateObject(), *ann;
		cJSON_AddStringToObject(o, "name", t->name);
		cJSON_AddStringToObject(o, "title", t->title);
		cJSON_AddStringToObject(o, "description", t->description);
		cJSON_AddItemToObject(o, "inputSchema", cJSON_Parse(t->input));
		cJSON_AddItemToObject(o, "outputSchema", cJSON_Parse(t->output));
		ann = cJSON_AddObjectToObject(o, "annotations");
		cJSON_AddBoolToObject(ann, "readOnlyHint", t->read_only);
		cJSON_AddBoolToObject(ann, "destructiveHint", false);
		cJSON_AddBoolToObject(ann, "idempotentHint", t->idempotent);
		cJSON_AddBoolToObject(ann, "openWorldHint", false);
		cJSON_AddItemToArray(list, o);
	}
}

static cJSON *text_result(const char *text, bool is_error)
{
	cJSON *r = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(r, "content"), *c = cJSON_CreateObject();

	cJSON_AddStringToObject(c, "type", "text");
	cJSON_AddStringToObject(c, "text", text);
	cJSON_AddItemToArray(content, c);
	if (is_error)
		cJSON_AddTrueToObject(r, "isError");
	return r;
}

int mcp_tools_call(const char *name, const cJSON *obj, mcp_call *call, cJSON **result, char *msg, size_t size)
{
	const struct tool *t = NULL;
	tb_err err = {0};
	args a = {.obj = obj, .call = call, .err = &err};
	cJSON *answer;
	char *text;

	for (size_t i = 0; i < sizeof tools / sizeof *tools; i++)
		if (!strcmp(tools[i].name, name))
			t = &tools[i];
	if (!t) {
		snprintf(msg, size, "unknown tool '%.200s' (tools/list lists them)", name);
		return -1;
	}
	answer = t->fn(&a);
	if (!answer) {
		char text_err[TB_ERR_TEXT_MAX], buf[TB_ERR_TEXT_MAX + 16];
		snprintf(buf, sizeof buf, "tbisect: %s", err.msg[0] ? tb_err_text(&err, text_err, sizeof text_err) : "failed");
		*result = text_result(buf, true);
		return 0;
	}
	text = cJSON_PrintUnformatted(answer);
	*result = text_result(text ? text : "{}", false);
	free(text);
	cJSON_AddItemToObject(*result, "structuredContent", answer);
	return 0;
}
