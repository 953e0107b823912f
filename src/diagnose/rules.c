#include "config.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diagnose/features.h"
#include "base/jsonutil.h"
#include "diagnose/rules.h"

#define RULES_MAX_BYTES (4u * 1024 * 1024)
#define RULES_MAX 4096
#define COND_MAX 64
#define TEXT_MAX 4096

/* The shipped table compiled in (rules_builtin.c, generated from data/rules.json). */
extern const char tb_rules_builtin[];
extern const size_t tb_rules_builtin_len;

typedef enum op { OP_TRUE, OP_FALSE, OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE, OP_IN } op;

typedef struct cond {
	int feature;
	op op;
	double a, b;
	double weight; /* prefer conditions only */
} cond;

typedef struct rule {
	char *id, *why, *look_at, *source;
	double weight;
	cond *require, *unless, *prefer;
	size_t n_require, n_unless, n_prefer;
} rule;

struct tb_ruleset {
	rule *v;
	size_t n, cap;
	char shipped[PATH_MAX];
};

tb_ruleset *tb_ruleset_new(void)
{
	return calloc(1, sizeof(tb_ruleset));
}

static void rule_done(rule *r)
{
	free(r->id);
	free(r->why);
	free(r->look_at);
	free(r->source);
	free(r->require);
	free(r->unless);
	free(r->prefer);
}

void tb_ruleset_free(tb_ruleset *rs)
{
	if (!rs)
		return;
	for (size_t i = 0; i < rs->n; i++)
		rule_done(&rs->v[i]);
	free(rs->v);
	free(rs);
}

size_t tb_ruleset_count(const tb_ruleset *rs)
{
	return rs->n;
}

const char *tb_ruleset_shipped_source(const tb_ruleset *rs)
{
	return rs->shipped;
}

static const char *skip_space(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

static bool parse_number(const char **s, double *out)
{
	char *end;

	*s = skip_space(*s);
	*out = strtod(*s, &end);
	if (end == *s || !isfinite(*out))
		return false;
	*s = end;
	return true;
}

/* "name", "!name", "name OP x", "name in [a, b]"; msg gets what is wrong. */
static bool parse_cond(const char *text, cond *c, char *msg, size_t size)
{
	const char *s = skip_space(text), *start;
	char name[64];
	size_t n;
	bool neg = false;

	memset(c, 0, sizeof *c);
	c->weight = 1;
	if (*s == '!') {
		neg = true;
		s = skip_space(s + 1);
	}
	start = s;
	while (*s && (isalnum((unsigned char)*s) || *s == '_'))
		s++;
	n = (size_t)(s - start);
	if (n == 0 || n >= sizeof name) {
		snprintf(msg, size, "'%s' does not start with a feature name", text);
		return false;
	}
	memcpy(name, start, n);
	name[n] = '\0';
	c->feature = tb_feature_lookup(name);
	if (c->feature < 0) {
		snprintf(msg, size, "unknown feature '%s'", name);
		return false;
	}
	s = skip_space(s);
	if (!*s) {
		c->op = neg ? OP_FALSE : OP_TRUE;
		return true;
	}
	if (neg) {
		snprintf(msg, size, "'%s': '!' only goes before a bare feature", text);
		return false;
	}
	if (!strncmp(s, "in", 2) && (s[2] == ' ' || s[2] == '[')) {
		s = skip_space(s + 2);
		if (*s != '[' || (s++, !parse_number(&s, &c->a)) || *(s = skip_space(s)) != ',' ||
		    (s++, !parse_number(&s, &c->b)) || *(s = skip_space(s)) != ']' || *skip_space(s + 1) ||
		    c->a > c->b) {
			snprintf(msg, size, "'%s': expected 'feature in [a, b]' with a <= b", text);
			return false;
		}
		c->op = OP_IN;
		return true;
	}
	static const struct {
		const char *tok;
		op op;
	} ops[] = {{"<=", OP_LE}, {">=", OP_GE}, {"==", OP_EQ}, {"!=", OP_NE}, {"<", OP_LT}, {">", OP_GT}};
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
		size_t k = strlen(ops[i].tok);
		if (strncmp(s, ops[i].tok, k) != 0)
			continue;
		s += k;
		if (!parse_number(&s, &c->a) || *skip_space(s)) {
			snprintf(msg, size, "'%s': expected a number after '%s'", text, ops[i].tok);
			return false;
		}
		c->op = ops[i].op;
		return true;
	}
	snprintf(msg, size, "'%s': expected an operator (< <= > >= == != in)", text);
	return false;
}

static bool holds(const cond *c, const double *f)
{
	double v = f[c->feature];

	if (isnan(v))
		return false;
	switch (c->op) {
	case OP_TRUE: return v != 0;
	case OP_FALSE: return v == 0;
	case OP_LT: return v < c->a;
	case OP_LE: return v <= c->a;
	case OP_GT: return v > c->a;
	case OP_GE: return v >= c->a;
	case OP_EQ: return v == c->a;
	case OP_NE: return v != c->a;
	case OP_IN: return v >= c->a && v <= c->b;
	}
	return false;
}

/* The placeholders that are words, not features: the target cell's names
 * and the model-wide facts the why-texts quote ("-" when absent). */
static const char *ctx_word(const char *name, const tb_rule_ctx *ctx, char *buf, size_t size)
{
	const char *s;

	if (!strcmp(name, "layer")) {
		snprintf(buf, size, "%d", ctx ? ctx->layer : -1);
		return buf;
	}
	if (!strcmp(name, "cell"))
		s = ctx ? ctx->cell : NULL;
	else if (!strcmp(name, "tap"))
		s = ctx ? ctx->tap : NULL;
	else if (!strcmp(name, "ref_name"))
		s = ctx ? ctx->ref_name : NULL;
	else if (!strcmp(name, "cand_name"))
		s = ctx ? ctx->cand_name : NULL;
	else if (!strcmp(name, "nan_cell"))
		s = ctx ? ctx->nan_cell : NULL;
	else if (!strcmp(name, "dup_tap"))
		s = ctx ? ctx->dup_tap : NULL;
	else if (!strcmp(name, "measured"))
		s = ctx ? ctx->measured : NULL;
	else if (!strcmp(name, "alias_sum"))
		s = ctx ? ctx->alias_sum : NULL;
	else
		return NULL;
	snprintf(buf, size, "%s", s ? s : "-");
	return buf;
}

/* Check a template's placeholders at load time. */
static bool check_template(const char *t, char *msg, size_t size)
{
	char word[8];

	for (const char *p = t; (p = strchr(p, '{')); p++) {
		const char *end = strchr(p, '}'), *colon;
		char name[64];
		size_t n;
		bool ok = false;

		if (!end) {
			snprintf(msg, size, "unclosed '{' in template");
			return false;
		}
		colon = memchr(p, ':', (size_t)(end - p));
		n = (size_t)((colon ? colon : end) - p - 1);
		if (n == 0 || n >= sizeof name) {
			snprintf(msg, size, "empty placeholder in template");
			return false;
		}
		memcpy(name, p + 1, n);
		name[n] = '\0';
		ok = ctx_word(name, NULL, word, sizeof word) != NULL;
		if (!ok && tb_feature_lookup(name) < 0) {
			snprintf(msg, size, "template names unknown feature '%s'", name);
			return false;
		}
		if (colon) {
			/* a printf conversion for a double: flags, width, precision, one of f e g */
			const char *q = colon + 1;
			while (q < end && strchr("+- #0123456789.", *q))
				q++;
			if (q + 1 != end || !strchr("feg", *q) || end - colon > 12) {
				snprintf(msg, size, "placeholder '%s' has a bad format (use e.g. {%s:.3f})", name, name);
				return false;
			}
		}
		p = end;
	}
	return true;
}

static int parse_conds(const cJSON *arr, bool weighted, cond **out, size_t *n, const char *field, const char *path,
		       size_t idx, tb_err *err)
{
	const cJSON *it;
	size_t k = 0;
	char msg[256];

	*out = NULL;
	*n = 0;
	if (!arr)
		return 0;
	if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > COND_MAX)
		return tb_err_setc(err, TB_ERR_LIMIT, path, "rule %zu: \"%s\" must be a list of at most %d conditions",
				   idx, field, COND_MAX);
	*out = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof **out);
	if (!*out)
		return tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
	cJSON_ArrayForEach(it, arr) {
		const cJSON *text = it, *w = NULL;
		if (weighted && cJSON_IsObject(it)) {
			text = cJSON_GetObjectItemCaseSensitive(it, "if");
			w = cJSON_GetObjectItemCaseSensitive(it, "weight");
		}
		if (!cJSON_IsString(text))
			return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu: %s[%zu] must be a condition string%s", idx, field, k,
					  weighted ? " or {\"if\": ..., \"weight\": ...}" : "");
		if (!parse_cond(text->valuestring, &(*out)[k], msg, sizeof msg))
			return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu: %s[%zu]: %s", idx, field, k, msg);
		if (w) {
			if (!cJSON_IsNumber(w) || !(w->valuedouble > 0) || w->valuedouble > 100)
				return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu: %s[%zu]: \"weight\" must be a number in (0, 100]", idx,
						  field, k);
			(*out)[k].weight = w->valuedouble;
		}
		k++;
	}
	*n = k;
	return 0;
}

static bool valid_id(const char *s)
{
	if (!*s || strlen(s) > 63)
		return false;
	for (; *s; s++)
		if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '-')
			return false;
	return true;
}

static int parse_rule(const cJSON *o, rule *r, const char *path, size_t idx, tb_err *err)
{
	static const char *const known[] = {"id", "weight", "require", "unless", "prefer", "why", "look_at", "comment"};
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id"), *w = cJSON_GetObjectItemCaseSensitive(o, "weight");
	const cJSON *why = cJSON_GetObjectItemCaseSensitive(o, "why");
	const cJSON *look = cJSON_GetObjectItemCaseSensitive(o, "look_at"), *it;
	char msg[256];

	if (!cJSON_IsObject(o))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu is not an object", idx);
	cJSON_ArrayForEach(it, o) {
		bool ok = false;
		for (size_t k = 0; k < sizeof known / sizeof *known && !ok; k++)
			ok = !strcmp(it->string, known[k]);
		if (!ok)
			return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu: unknown field \"%s\"", idx, it->string);
	}
	if (!cJSON_IsString(id) || !valid_id(id->valuestring))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu: \"id\" must be a cause id of lower-case letters, digits and '-'", idx);
	if (!cJSON_IsNumber(w) || !(w->valuedouble > 0) || w->valuedouble > 1)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu (%s): \"weight\" must be a number in (0, 1]", idx, id->valuestring);
	if (!cJSON_IsString(why) || !*why->valuestring || strlen(why->valuestring) > TEXT_MAX)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu (%s): \"why\" must be a non-empty string", idx, id->valuestring);
	if (!cJSON_IsString(look) || !*look->valuestring || strlen(look->valuestring) > TEXT_MAX)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu (%s): \"look_at\" must be a non-empty string", idx, id->valuestring);
	if (!check_template(why->valuestring, msg, sizeof msg))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu (%s): \"why\": %s", idx, id->valuestring, msg);
	if (!check_template(look->valuestring, msg, sizeof msg))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu (%s): \"look_at\": %s", idx, id->valuestring, msg);
	r->id = strdup(id->valuestring);
	r->why = strdup(why->valuestring);
	r->look_at = strdup(look->valuestring);
	r->source = strdup(path);
	r->weight = w->valuedouble;
	if (!r->id || !r->why || !r->look_at || !r->source)
		return tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
	if (parse_conds(cJSON_GetObjectItemCaseSensitive(o, "require"), false, &r->require, &r->n_require, "require",
			path, idx, err) < 0 ||
	    parse_conds(cJSON_GetObjectItemCaseSensitive(o, "unless"), false, &r->unless, &r->n_unless, "unless", path,
			idx, err) < 0 ||
	    parse_conds(cJSON_GetObjectItemCaseSensitive(o, "prefer"), true, &r->prefer, &r->n_prefer, "prefer", path,
			idx, err) < 0)
		return -1;
	if (r->n_require == 0)
		return tb_err_setc(err, TB_ERR_FORMAT, path, "rule %zu (%s): \"require\" must list at least one condition", idx, r->id);
	return 0;
}

int tb_ruleset_add_text(tb_ruleset *rs, const char *text, size_t len, const char *source, tb_err *err)
{
	const cJSON *list, *it;
	cJSON *root = tb_json_parse(text, len, source, "rules file", err);
	size_t idx = 0, before = rs->n;
	int rc = -1;

	if (!root)
		return -1;
	list = cJSON_GetObjectItemCaseSensitive(root, "rules");
	if (!cJSON_IsObject(root) || !cJSON_IsArray(list)) {
		tb_err_setc(err, TB_ERR_FORMAT, source, "rules file must be an object with a \"rules\" list");
		goto out;
	}
	cJSON_ArrayForEach(it, list) {
		if (rs->n >= RULES_MAX) {
			tb_err_setc(err, TB_ERR_LIMIT, source, "more than %d rules", RULES_MAX);
			goto out;
		}
		if (rs->n == rs->cap) {
			size_t cap = rs->cap ? rs->cap * 2 : 64;
			rule *v = realloc(rs->v, cap * sizeof *v);
			if (!v) {
				tb_err_setc(err, TB_ERR_NOMEM, source, "out of memory");
				goto out;
			}
			rs->v = v;
			rs->cap = cap;
		}
		memset(&rs->v[rs->n], 0, sizeof rs->v[rs->n]);
		if (parse_rule(it, &rs->v[rs->n], source, idx, err) < 0) {
			rule_done(&rs->v[rs->n]);
			goto out;
		}
		rs->n++;
		idx++;
	}
	rc = 0;
out:
	/* A file loads whole or not at all. */
	while (rc < 0 && rs->n > before)
		rule_done(&rs->v[--rs->n]);
	cJSON_Delete(root);
	return rc;
}

int tb_ruleset_add_file(tb_ruleset *rs, const char *path, tb_err *err)
{
	tb_file *f;
	int rc;

	if (tb_file_open(path, &f, err) < 0)
		return -1;
	if (f->size > RULES_MAX_BYTES) {
		tb_file_free(f);
		return tb_err_setc(err, TB_ERR_LIMIT, path, "rules file larger than %u bytes", RULES_MAX_BYTES);
	}
	rc = tb_ruleset_add_text(rs, f->data ? (const char *)f->data : "", (size_t)f->size, path, err);
	tb_file_free(f);
	return rc;
}

int tb_ruleset_add_standard(tb_ruleset *rs, const char *extra, tb_err *err)
{
	const char *dirs[2] = {getenv("TBISECT_DATADIR"), TB_PKGDATADIR};
	char path[PATH_MAX];
	bool shipped = false;

	for (int i = 0; i < 2 && !shipped; i++) {
		if (!dirs[i] || !*dirs[i])
			continue;
		snprintf(path, sizeof path, "%s/rules.json", dirs[i]);
		if (access(path, R_OK) != 0)
			continue;
		if (tb_ruleset_add_file(rs, path, err) < 0)
			return -1;
		snprintf(rs->shipped, sizeof rs->shipped, "%s", path);
		shipped = true;
	}
	if (!shipped) {
		if (tb_ruleset_add_text(rs, tb_rules_builtin, tb_rules_builtin_len, "built-in rules.json", err) < 0)
			return -1;
		snprintf(rs->shipped, sizeof rs->shipped, "built-in");
	}
	{
		const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
		if (xdg && *xdg)
			snprintf(path, sizeof path, "%s/tbisect/rules.json", xdg);
		else if (home && *home)
			snprintf(path, sizeof path, "%s/.config/tbisect/rules.json", home);
		else
			path[0] = '\0';
		if (path[0] && access(path, F_OK) == 0 && tb_ruleset_add_file(rs, path, err) < 0)
			return -1;
	}
	return extra ? tb_ruleset_add_file(rs, extra, err) : 0;
}

/* Fill a template; placeholders were checked at load time. */
static char *render(const char *t, const double *f, const tb_rule_ctx *ctx)
{
	size_t cap = strlen(t) * 2 + 256, n = 0;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	for (const char *p = t; *p;) {
		char piece[512];
		size_t k;
		if (*p != '{') {
			piece[0] = *p++;
			piece[1] = '\0';
		} else {
			const char *end = strchr(p, '}'), *colon = memchr(p, ':', (size_t)(end - p));
			char name[64], fmt[16] = "%.3g";
			size_t len = (size_t)((colon ? colon : end) - p - 1);
			memcpy(name, p + 1, len);
			name[len] = '\0';
			if (colon)
				snprintf(fmt, sizeof fmt, "%%%.*s", (int)(end - colon - 1), colon + 1);
			if (!ctx_word(name, ctx, piece, sizeof piece)) {
				double v = f[tb_feature_lookup(name)];
				if (isnan(v))
					snprintf(piece, sizeof piece, "n/a");
				else
					snprintf(piece, sizeof piece, fmt, v);
			}
			p = end + 1;
		}
		k = strlen(piece);
		if (n + k + 1 > cap) {
			char *bigger = realloc(out, (cap = (n + k + 1) * 2));
			if (!bigger) {
				free(out);
				return NULL;
			}
			out = bigger;
		}
		memcpy(out + n, piece, k);
		n += k;
	}
	out[n] = '\0';
	return out;
}

char *tb_ruleset_look_at(const tb_ruleset *rs, const char *id, const double *features, const tb_rule_ctx *ctx)
{
	for (size_t i = 0; rs && i < rs->n; i++)
		if (!strcmp(rs->v[i].id, id))
			return render(rs->v[i].look_at, features, ctx);
	return NULL;
}

static double score_of(const rule *r, const double *f)
{
	double got = 0, all = 0;

	for (size_t i = 0; i < r->n_require; i++)
		if (!holds(&r->require[i], f))
			return -1;
	for (size_t i = 0; i < r->n_unless; i++)
		if (holds(&r->unless[i], f))
			return -1;
	/* Evidence that cannot be measured here (NaN) neither helps nor hurts. */
	for (size_t i = 0; i < r->n_prefer; i++) {
		if (isnan(f[r->prefer[i].feature]))
			continue;
		all += r->prefer[i].weight;
		if (holds(&r->prefer[i], f))
			got += r->prefer[i].weight;
	}
	return r->weight * (1 + got) / (1 + all);
}

/* The share of a rule's score left when it matches only elsewhere in the
 * features' spans than at their estimates. */
#define ELSEWHERE_SHARE 0.5
/* Estimated features a rule reads, at most. */
#define SPAN_FEATURES 4
/* Points tried per estimated feature: its estimate, its span's ends, and
 * each threshold inside the span with its neighbours. */
#define SPAN_POINTS 32

typedef struct span_walk {
	const rule *r;
	double *f;                            /* the features, the spanned ones at the point tried */
	int feature[SPAN_FEATURES];
	double point[SPAN_FEATURES][SPAN_POINTS];
	int n_points[SPAN_FEATURES];
	int n;
	double best;                          /* the best score where the rule matches, -1: nowhere */
	bool missed;                          /* somewhere it does not */
} span_walk;

static void add_point(span_walk *w, int k, double x, double lo, double hi)
{
	if (x >= lo && x <= hi && w->n_points[k] < SPAN_POINTS)
		w->point[k][w->n_points[k]++] = x;
}

/* A rule's three lists of conditions: require, unless, prefer. */
static void rule_conds(const rule *r, const cond *c[3], size_t n[3])
{
	c[0] = r->require, c[1] = r->unless, c[2] = r->prefer;
	n[0] = r->n_require, n[1] = r->n_unless, n[2] = r->n_prefer;
}

/* The thresholds of w's rule's conditions on feature k inside [lo, hi],
 * each with its neighbours: there a condition changes truth (a prefer
 * condition's too: the best score elsewhere may be where it holds). */
static void add_thresholds(span_walk *w, int k, double lo, double hi)
{
	const cond *c[3];
	size_t n[3];

	rule_conds(w->r, c, n);
	for (int g = 0; g < 3; g++)
		for (size_t i = 0; i < n[g]; i++) {
			if (c[g][i].feature != w->feature[k])
				continue;
			for (int j = 0; j < (c[g][i].op == OP_IN ? 2 : 1); j++) {
				double t = j ? c[g][i].b : c[g][i].a;
				add_point(w, k, nextafter(t, -INFINITY), lo, hi);
				add_point(w, k, t, lo, hi);
				add_point(w, k, nextafter(t, INFINITY), lo, hi);
			}
		}
}

static void walk_points(span_walk *w, int k)
{
	if (k == w->n) {
		double s = score_of(w->r, w->f);
		if (s < 0)
			w->missed = true;
		else if (s > w->best)
			w->best = s;
		return;
	}
	for (int i = 0; i < w->n_points[k]; i++) {
		w->f[w->feature[k]] = w->point[k][i];
		walk_points(w, k + 1);
	}
}

static bool reads(const rule *r, int fe)
{
	const cond *c[3];
	size_t n[3];

	rule_conds(r, c, n);
	for (int g = 0; g < 3; g++)
		for (size_t i = 0; i < n[g]; i++)
			if (c[g][i].feature == fe)
				return true;
	return false;
}

/* A rule's score where the estimated features it reads may lie anywhere
 * in their spans [lo, hi]: its score at the estimates when it matches
 * there, else ELSEWHERE_SHARE of its best where it matches in the spans.
 * *open: it matches at some points of the spans and not at others (the
 * estimates cannot settle it). */
static double span_score(const rule *r, const double *f, const double *lo, const double *hi, bool *open)
{
	double work[TB_F_COUNT], at = score_of(r, f);
	span_walk w = {.r = r, .f = work, .best = -1};

	*open = false;
	for (int fe = 0; lo && fe < TB_F_COUNT && w.n < SPAN_FEATURES; fe++) {
		if (!(lo[fe] < hi[fe]) || !reads(r, fe))
			continue;
		w.feature[w.n] = fe;
		add_point(&w, w.n, f[fe], lo[fe], hi[fe]);
		add_point(&w, w.n, lo[fe], lo[fe], hi[fe]);
		add_point(&w, w.n, hi[fe], lo[fe], hi[fe]);
		add_thresholds(&w, w.n, lo[fe], hi[fe]);
		w.n++;
	}
	if (!w.n)
		return at;
	memcpy(work, f, sizeof work);
	walk_points(&w, 0);
	*open = w.best >= 0 && w.missed;
	return at >= 0 ? at : w.best >= 0 ? ELSEWHERE_SHARE * w.best : -1;
}

/* why with "; a sketch's estimates cannot settle it: cosine 0.715 to 0.952"
 * added, for the spanned features the rule reads (why is freed). */
static char *add_open_note(char *why, const rule *r, const double *lo, const double *hi)
{
	char note[256];
	size_t n = (size_t)snprintf(note, sizeof note, "; a sketch's estimates cannot settle it:");
	const char *sep = " ";
	char *out;

	for (int fe = 0; fe < TB_F_COUNT && n < sizeof note; fe++) {
		if (!(lo[fe] < hi[fe]) || !reads(r, fe))
			continue;
		n += (size_t)snprintf(note + n, sizeof note - n, "%s%s %.3g to %.3g", sep, tb_feature_table[fe].name,
				      lo[fe], hi[fe]);
		sep = ", ";
	}
	out = why ? malloc(strlen(why) + strlen(note) + 1) : NULL;
	if (out) {
		strcpy(out, why);
		strcat(out, note);
	}
	free(why);
	return out;
}

static int cmp_cause(const void *a, const void *b)
{
	const tb_cause *x = a, *y = b;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return strcmp(x->id, y->id);
}

int tb_ruleset_eval(const tb_ruleset *rs, const double *f, const double *lo, const double *hi, const tb_rule_ctx *ctx,
		    size_t max_causes, tb_causes *out, tb_err *err)
{
	tb_cause *v = calloc(rs->n ? rs->n : 1, sizeof *v);
	size_t n = 0;

	out->v = NULL;
	out->n = 0;
	if (!v)
		return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	for (size_t i = 0; i < rs->n; i++) {
		const rule *r = &rs->v[i];
		bool open;
		double s = span_score(r, f, lo, hi, &open);
		size_t k;
		if (s < 0)
			continue;
		for (k = 0; k < n && strcmp(v[k].id, r->id); k++)
			;
		if (k < n && v[k].score >= s)
			continue;
		if (k == n) {
			v[k].id = strdup(r->id);
			n++;
		} else {
			free(v[k].why);
			free(v[k].look_at);
		}
		v[k].score = s;
		v[k].why = render(r->why, f, ctx);
		if (open)
			v[k].why = add_open_note(v[k].why, r, lo, hi);
		v[k].look_at = render(r->look_at, f, ctx);
		if (!v[k].id || !v[k].why || !v[k].look_at) {
			out->v = v;
			out->n = n;
			tb_causes_done(out);
			return tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
		}
	}
	qsort(v, n, sizeof *v, cmp_cause);
	while (n > max_causes) {
		n--;
		free(v[n].id);
		free(v[n].why);
		free(v[n].look_at);
	}
	out->v = v;
	out->n = n;
	return 0;
}
