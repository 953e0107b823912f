#include "config.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "model/naming.h"

#define MAP_MAX_BYTES (1024 * 1024)
#define MAP_MAX_RULES 10000
#define MAX_LAYER 1000000

/* Tried in order; the first full match wins. */
const tb_convention tb_conventions[] = {
	/* Hugging Face Llama / Mistral / Qwen / Gemma module paths */
	{"model.embed_tokens", "embed"},
	{"model.layers.{N}.input_layernorm", "attn_norm"},
	{"model.layers.{N}.self_attn.q_proj", "attn.q"},
	{"model.layers.{N}.self_attn.k_proj", "attn.k"},
	{"model.layers.{N}.self_attn.v_proj", "attn.v"},
	{"model.layers.{N}.self_attn.o_proj", "attn.o"},
	{"model.layers.{N}.self_attn.q_norm", "attn.q_norm"},
	{"model.layers.{N}.self_attn.k_norm", "attn.k_norm"},
	{"model.layers.{N}.self_attn", "attn"},
	{"model.layers.{N}.post_attention_layernorm", "mlp_norm"},
	{"model.layers.{N}.mlp.gate_proj", "mlp.gate"},
	{"model.layers.{N}.mlp.up_proj", "mlp.up"},
	{"model.layers.{N}.mlp.down_proj", "mlp.down"},
	{"model.layers.{N}.mlp.act_fn", "mlp.act"},
	{"model.layers.{N}.mlp", "mlp"},
	{"model.layers.{N}", "block"},
	{"model.norm", "final_norm"},
	/* GPT-2 */
	{"transformer.wte", "embed"},
	{"transformer.h.{N}.ln_1", "attn_norm"},
	{"transformer.h.{N}.attn.c_proj", "attn.o"},
	{"transformer.h.{N}.attn", "attn"},
	{"transformer.h.{N}.ln_2", "mlp_norm"},
	{"transformer.h.{N}.mlp.c_fc", "mlp.up"},
	{"transformer.h.{N}.mlp.c_proj", "mlp.down"},
	{"transformer.h.{N}.mlp", "mlp"},
	{"transformer.h.{N}", "block"},
	{"transformer.ln_f", "final_norm"},
	/* GPT-NeoX / Pythia */
	{"gpt_neox.embed_in", "embed"},
	{"gpt_neox.layers.{N}.input_layernorm", "attn_norm"},
	{"gpt_neox.layers.{N}.attention", "attn"},
	{"gpt_neox.layers.{N}.post_attention_layernorm", "mlp_norm"},
	{"gpt_neox.layers.{N}.mlp", "mlp"},
	{"gpt_neox.layers.{N}", "block"},
	{"gpt_neox.final_layer_norm", "final_norm"},
	{"embed_out", "logits"},
	/* Meta Llama reference code */
	{"tok_embeddings", "embed"},
	{"layers.{N}.attention_norm", "attn_norm"},
	{"layers.{N}.attention.wq", "attn.q"},
	{"layers.{N}.attention.wk", "attn.k"},
	{"layers.{N}.attention.wv", "attn.v"},
	{"layers.{N}.attention.wo", "attn.o"},
	{"layers.{N}.attention", "attn"},
	{"layers.{N}.ffn_norm", "mlp_norm"},
	{"layers.{N}.feed_forward.w1", "mlp.gate"},
	{"layers.{N}.feed_forward.w3", "mlp.up"},
	{"layers.{N}.feed_forward.w2", "mlp.down"},
	{"layers.{N}.feed_forward", "mlp"},
	/* post_* aliases under a layer */
	{"layers.{N}.post_attn", "attn"},
	{"layers.{N}.post_mlp", "mlp"},
	{"layers.{N}.post_block", "block"},
	{"L{N}.post_attn", "attn"},
	{"L{N}.post_mlp", "mlp"},
	{"L{N}.post_block", "block"},
	{"layer_{N}.post_attn", "attn"},
	{"layer_{N}.post_mlp", "mlp"},
	{"layer_{N}.post_block", "block"},
	{"blocks.{N}.post_attn", "attn"},
	{"blocks.{N}.post_mlp", "mlp"},
	{"blocks.{N}.post_block", "block"},
	/* canonical names */
	{"layers.{N}.{T}", NULL},
	{"L{N}.{T}", NULL},
	{"layer_{N}.{T}", NULL},
	{"blocks.{N}.{T}", NULL},
	{"layers.{N}", "block"},
	/* MaxText golden records */
	{"layer_hidden_states[{N}]", "block"},
	{"layer_hidden_states.{N}", "block"},
	/* model-level */
	{"embed", "embed"},
	{"post_embed", "embed"},
	{"norm", "final_norm"},
	{"final_norm", "final_norm"},
	{"lm_head", "logits"},
	{"logits", "logits"},
	{"output", "logits"},
};
const size_t tb_n_conventions = sizeof tb_conventions / sizeof tb_conventions[0];

/* One rule of a --map file. */
typedef struct map_rule {
	regex_t re;
	char *layer; /* template ("\\1", "3") or NULL: model-level */
	char *tap;   /* template */
	int ngroups;
} map_rule;

struct tb_namer {
	map_rule *rules;
	size_t n_rules;
};

/* Match name against a convention pattern; fills layer and tap. */
static bool match_pattern(const char *pat, const char *fixed_tap, const char *name, tb_cell *cell)
{
	const char *p = pat, *s = name;
	int layer = -1;

	while (*p) {
		if (!strncmp(p, "{N}", 3)) {
			long v = 0;
			int digits = 0;
			while (*s >= '0' && *s <= '9' && digits < 8) {
				v = v * 10 + (*s++ - '0');
				digits++;
			}
			if (!digits || (*s >= '0' && *s <= '9') || v > MAX_LAYER)
				return false;
			layer = (int)v;
			p += 3;
		} else if (!strncmp(p, "{T}", 3)) {
			/* {T} is always last: the rest of the name is the tap. */
			if (!tb_tap_valid(s) || tb_tap_is_model_level(s))
				return false;
			tb_cell_make(cell, layer, s);
			return layer >= 0;
		} else if (*p++ != *s++) {
			return false;
		}
	}
	if (*s)
		return false;
	if (tb_tap_is_model_level(fixed_tap) != (layer < 0))
		return false;
	tb_cell_make(cell, layer, fixed_tap);
	return true;
}

/* Expand "\\1" style references from the regex match into buf. */
static bool expand(const char *tmpl, const char *name, const regmatch_t *m, int ngroups, char *buf, size_t size)
{
	size_t n = 0;

	for (const char *t = tmpl; *t; t++) {
		if (*t == '\\' && t[1] >= '0' && t[1] <= '9') {
			int g = t[1] - '0';
			size_t len;
			t++;
			if (g > ngroups || m[g].rm_so < 0)
				return false;
			len = (size_t)(m[g].rm_eo - m[g].rm_so);
			if (n + len >= size)
				return false;
			memcpy(buf + n, name + m[g].rm_so, len);
			n += len;
		} else {
			if (n + 1 >= size)
				return false;
			buf[n++] = *t;
		}
	}
	buf[n] = '\0';
	return true;
}

static bool apply_rule(const map_rule *r, const char *name, tb_cell *cell)
{
	regmatch_t m[10];
	char layer[32], tap[TB_TAP_LEN];
	char *end;
	long v = -1;

	if (regexec(&r->re, name, 10, m, 0) != 0)
		return false;
	if (!expand(r->tap, name, m, r->ngroups, tap, sizeof tap) || !tb_tap_valid(tap))
		return false;
	if (!r->layer) {
		if (!tb_tap_is_model_level(tap))
			return false;
	} else {
		if (!expand(r->layer, name, m, r->ngroups, layer, sizeof layer) || tb_tap_is_model_level(tap))
			return false;
		v = strtol(layer, &end, 10);
		if (end == layer || *end || v < 0 || v > MAX_LAYER)
			return false;
	}
	tb_cell_make(cell, (int)v, tap);
	return true;
}

/* Drop trailing ".output", ".out", ":0"; read '/' as '.'. */
static void normalise(const char *raw, char *buf, size_t size)
{
	static const char *const tails[] = {".output", ".out", ":0"};
	bool again = true;
	size_t n;

	snprintf(buf, size, "%s", raw);
	for (char *s = buf; *s; s++)
		if (*s == '/')
			*s = '.';
	while (again) {
		again = false;
		n = strlen(buf);
		for (size_t i = 0; i < sizeof tails / sizeof *tails; i++) {
			size_t t = strlen(tails[i]);
			if (n > t && !strcmp(buf + n - t, tails[i])) {
				buf[n - t] = '\0';
				again = true;
				break;
			}
		}
	}
}

static bool map_one(const tb_namer *namer, const char *name, tb_cell *cell, char *rule, size_t rule_size)
{
	for (size_t i = 0; namer && i < namer->n_rules; i++) {
		if (apply_rule(&namer->rules[i], name, cell)) {
			if (rule)
				snprintf(rule, rule_size, "map rule %zu", i);
			return true;
		}
	}
	for (size_t i = 0; i < tb_n_conventions; i++) {
		if (match_pattern(tb_conventions[i].pattern, tb_conventions[i].tap, name, cell)) {
			if (rule)
				snprintf(rule, rule_size, "%s", tb_conventions[i].pattern);
			return true;
		}
	}
	return false;
}

bool tb_namer_map(const tb_namer *namer, const char *raw, const char *shared, tb_cell *cell, char *rule,
		  size_t rule_size)
{
	char norm[8192];
	size_t cut = 0, len;

	/* User rules see the raw name first, exactly as written. */
	for (size_t i = 0; namer && i < namer->n_rules; i++) {
		if (apply_rule(&namer->rules[i], raw, cell)) {
			if (rule)
				snprintf(rule, rule_size, "map rule %zu", i);
			return true;
		}
	}
	normalise(raw, norm, sizeof norm);
	if (map_one(namer, norm, cell, rule, rule_size))
		return true;
	len = shared ? strlen(shared) : 0;
	if (len == 0 || strncmp(raw, shared, len) != 0)
		return false;
	/* Cut the shared prefix piece by piece: "run7.model.embed_tokens"
	 * tries "model.embed_tokens", then "embed_tokens". */
	for (size_t i = 0; i < len; i++) {
		if (shared[i] != '.')
			continue;
		cut = i + 1;
		normalise(raw + cut, norm, sizeof norm);
		if (*norm && map_one(namer, norm, cell, rule, rule_size))
			return true;
	}
	return false;
}

void tb_common_prefix(const char *const *names, size_t n, char *buf, size_t size)
{
	size_t len, last_dot = 0;

	buf[0] = '\0';
	if (n == 0)
		return;
	len = strlen(names[0]);
	for (size_t i = 1; i < n; i++) {
		size_t k = 0;
		while (k < len && names[i][k] == names[0][k])
			k++;
		len = k;
	}
	for (size_t k = 0; k < len; k++)
		if (names[0][k] == '.' || names[0][k] == '/')
			last_dot = k + 1;
	if (last_dot >= size)
		last_dot = 0;
	memcpy(buf, names[0], last_dot);
	buf[last_dot] = '\0';
}

static char *template_string(const cJSON *item, bool allow_int)
{
	char buf[32];

	if (cJSON_IsString(item))
		return strdup(item->valuestring);
	if (allow_int && cJSON_IsNumber(item)) {
		uint64_t v;
		if (!tb_json_uint(item, &v) || v > MAX_LAYER)
			return NULL;
		snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
		return strdup(buf);
	}
	return NULL;
}

/* glibc's matcher can take exponential time on back-references. */
static bool has_backreference(const char *re)
{
	for (const char *p = re; *p; p++) {
		if (*p == '\\') {
			if (p[1] >= '1' && p[1] <= '9')
				return true;
			if (p[1])
				p++;
		}
	}
	return false;
}

static int load_map(tb_namer *namer, const char *path, tb_err *err)
{
	const cJSON *rules, *r;
	cJSON *root;
	size_t i = 0;
	int rc = -1;

	root = tb_json_load(path, MAP_MAX_BYTES, "map file", err);
	if (!root)
		return -1;
	rules = cJSON_GetObjectItemCaseSensitive(root, "rules");
	if (!cJSON_IsObject(root) || !cJSON_IsArray(rules)) {
		tb_err_set(err, path, "map file must be an object with a \"rules\" array");
		goto out;
	}
	if (cJSON_GetArraySize(rules) > MAP_MAX_RULES) {
		tb_err_setc(err, TB_ERR_LIMIT, path, "map file has more than %d rules", MAP_MAX_RULES);
		goto out;
	}
	namer->rules = calloc((size_t)cJSON_GetArraySize(rules) + 1, sizeof *namer->rules);
	if (!namer->rules) {
		tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(r, rules) {
		const cJSON *match = cJSON_GetObjectItemCaseSensitive(r, "match");
		const cJSON *layer = cJSON_GetObjectItemCaseSensitive(r, "layer");
		const cJSON *tap = cJSON_GetObjectItemCaseSensitive(r, "tap");
		map_rule *mr = &namer->rules[i];
		char msg[256];
		int ec;

		if (!cJSON_IsObject(r)) {
			tb_err_set(err, path, "map rule %zu is not an object", i);
			goto out;
		}
		if (!cJSON_IsString(match)) {
			tb_err_set(err, path, "map rule %zu: \"match\" must be a string", i);
			goto out;
		}
		if (has_backreference(match->valuestring)) {
			tb_err_set(err, path, "map rule %zu: \"match\" uses a back-reference, which is refused", i);
			goto out;
		}
		ec = regcomp(&mr->re, match->valuestring, REG_EXTENDED);
		if (ec != 0) {
			regerror(ec, &mr->re, msg, sizeof msg);
			tb_err_set(err, path, "map rule %zu: \"match\": %s", i, msg);
			goto out;
		}
		namer->n_rules = ++i;
		mr->ngroups = (int)mr->re.re_nsub;
		if (mr->ngroups > 9) {
			tb_err_setc(err, TB_ERR_LIMIT, path, "map rule %zu: \"match\" has more than 9 groups", i - 1);
			goto out;
		}
		mr->tap = template_string(tap, false);
		if (!mr->tap) {
			tb_err_set(err, path, "map rule %zu: \"tap\" must be a string", i - 1);
			goto out;
		}
		if (!strchr(mr->tap, '\\') && !tb_tap_valid(mr->tap)) {
			tb_err_set(err, path, "map rule %zu: \"tap\": '%s' is not a canonical tap", i - 1, mr->tap);
			goto out;
		}
		if (layer && !cJSON_IsNull(layer)) {
			mr->layer = template_string(layer, true);
			if (!mr->layer) {
				tb_err_set(err, path, "map rule %zu: \"layer\" must be a string, a layer number or null", i - 1);
				goto out;
			}
		} else if (!strchr(mr->tap, '\\') && !tb_tap_is_model_level(mr->tap)) {
			tb_err_set(err, path, "map rule %zu: tap '%s' needs a \"layer\"", i - 1, mr->tap);
			goto out;
		}
	}
	rc = 0;
out:
	cJSON_Delete(root);
	return rc;
}

int tb_namer_new(const char *map_path, tb_namer **out, tb_err *err)
{
	tb_namer *namer = calloc(1, sizeof *namer);

	*out = NULL;
	if (!namer)
		return tb_err_setc(err, TB_ERR_NOMEM, map_path, "out of memory");
	if (map_path && load_map(namer, map_path, err) < 0) {
		tb_namer_free(namer);
		return -1;
	}
	*out = namer;
	return 0;
}

void tb_namer_free(tb_namer *namer)
{
	if (!namer)
		return;
	for (size_t i = 0; i < namer->n_rules; i++) {
		regfree(&namer->rules[i].re);
		free(namer->rules[i].layer);
		free(namer->rules[i].tap);
	}
	free(namer->rules);
	free(namer);
}

bool tb_name_is_token_ids(const char *raw)
{
	static const char *const names[] = {"tokens", "input_ids", "token_ids"};
	char norm[8192];
	const char *base;

	normalise(raw, norm, sizeof norm);
	base = strrchr(norm, '.');
	base = base ? base + 1 : norm;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (!strcmp(base, names[i]))
			return true;
	return false;
}
