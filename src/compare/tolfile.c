#include "config.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/pattern.h"
#include "compare/tolfile.h"

#define TOL_MAX_BYTES (1024 * 1024)
#define TOL_MAX_ENTRIES 10000

/* The fields an entry sets; the others keep the tolerance it is applied
 * over, so a tolerance changed after loading (the TUI's :tol) still
 * reaches them. */
enum { SET_ATOL = 1, SET_RTOL = 2, SET_DIVERGE = 4, SET_MAX_KL = 8, SET_MODE = 16 };

typedef struct tol_entry {
	regex_t re;
	char *pattern;
	tb_tolerance tol; /* the fields named by set */
	unsigned set;
	double noise;     /* rel_l2 between two runs of the reference (calibrate), or -1 */
} tol_entry;

struct tb_tolfile {
	tol_entry *v;
	size_t n;
};

static bool full_match(const regex_t *re, const char *s)
{
	regmatch_t m;

	return s && regexec(re, s, 1, &m, 0) == 0 && m.rm_so == 0 && (size_t)m.rm_eo == strlen(s);
}

static int number_field(const cJSON *e, const char *key, unsigned bit, tol_entry *te, double *out, const char *path,
			size_t i, tb_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);

	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "tolerance entry %zu: \"%s\" must be a non-negative number", i, key);
	*out = v->valuedouble;
	te->set |= bit;
	return 0;
}

static int parse_entry(const cJSON *e, tol_entry *te, const char *path, size_t i, tb_err *err)
{
	static const char *const known[] = {"match", "atol", "rtol", "diverge", "max_kl", "mode", "noise"};
	const cJSON *match = cJSON_GetObjectItemCaseSensitive(e, "match"), *mode, *it, *noise;
	char msg[256];
	int rc;

	if (!cJSON_IsObject(e))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "tolerance entry %zu is not an object", i);
	cJSON_ArrayForEach(it, e) {
		bool ok = false;
		for (size_t k = 0; k < sizeof known / sizeof *known && !ok; k++)
			ok = !strcmp(it->string, known[k]);
		if (!ok)
			return tb_err_setc(err, TB_ERR_FORMAT, path, "tolerance entry %zu: unknown field \"%s\"", i, it->string);
	}
	if (!cJSON_IsString(match))
		return tb_err_setc(err, TB_ERR_FORMAT, path, "tolerance entry %zu: \"match\" must be a string", i);
	if (number_field(e, "atol", SET_ATOL, te, &te->tol.atol, path, i, err) < 0 ||
	    number_field(e, "rtol", SET_RTOL, te, &te->tol.rtol, path, i, err) < 0 ||
	    number_field(e, "diverge", SET_DIVERGE, te, &te->tol.diverge, path, i, err) < 0 ||
	    number_field(e, "max_kl", SET_MAX_KL, te, &te->tol.max_kl, path, i, err) < 0)
		return -1;
	/* what calibrate measured: {"rel_l2": ..., ...} (other keys are notes) */
	noise = cJSON_GetObjectItemCaseSensitive(e, "noise");
	te->noise = -1;
	if (noise) {
		const cJSON *rel = cJSON_GetObjectItemCaseSensitive(noise, "rel_l2");
		if (!cJSON_IsObject(noise) || !cJSON_IsNumber(rel) || !(rel->valuedouble >= 0))
			return tb_err_setc(err, TB_ERR_FORMAT, path, "tolerance entry %zu: \"noise\" must be an object with a non-negative \"rel_l2\"", i);
		te->noise = rel->valuedouble;
	}
	mode = cJSON_GetObjectItemCaseSensitive(e, "mode");
	if (mode) {
		if (!cJSON_IsString(mode) || (strcmp(mode->valuestring, "rel") && strcmp(mode->valuestring, "abs")))
			return tb_err_setc(err, TB_ERR_FORMAT, path, "tolerance entry %zu: \"mode\" must be \"rel\" or \"abs\"", i);
		te->tol.absolute = !strcmp(mode->valuestring, "abs");
		te->set |= SET_MODE;
	}
	rc = tb_pattern_compile(&te->re, match->valuestring, 0, msg, sizeof msg);
	if (rc < 0)
		return tb_err_setc(err, TB_ERR_FORMAT, path,
				  rc == TB_PATTERN_REFUSED ? "tolerance entry %zu: \"match\" %s" : "tolerance entry %zu: \"match\": %s",
				  i, msg);
	te->pattern = strdup(match->valuestring);
	if (!te->pattern) {
		regfree(&te->re);
		return tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
	}
	return 0;
}

int tb_tolfile_load(const char *path, tb_tolfile **out, tb_err *err)
{
	tb_tolfile *tf = NULL;
	const cJSON *list, *e;
	cJSON *root;
	int rc = -1;

	*out = NULL;
	root = tb_json_load(path, TOL_MAX_BYTES, "tolerance file", err);
	if (!root)
		return -1;
	list = cJSON_IsArray(root) ? root : cJSON_GetObjectItemCaseSensitive(root, "tolerances");
	if (!cJSON_IsArray(list)) {
		tb_err_setc(err, TB_ERR_FORMAT, path, "tolerance file must be a JSON list of entries (or {\"tolerances\": [...]})");
		goto out;
	}
	if (cJSON_GetArraySize(list) > TOL_MAX_ENTRIES) {
		tb_err_setc(err, TB_ERR_LIMIT, path, "tolerance file has more than %d entries", TOL_MAX_ENTRIES);
		goto out;
	}
	tf = calloc(1, sizeof *tf);
	if (tf)
		tf->v = calloc((size_t)cJSON_GetArraySize(list) + 1, sizeof *tf->v);
	if (!tf || !tf->v) {
		tb_err_setc(err, TB_ERR_NOMEM, path, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(e, list) {
		tol_entry *te = &tf->v[tf->n];
		if (parse_entry(e, te, path, tf->n, err) < 0)
			goto out;
		tf->n++;
	}
	*out = tf;
	tf = NULL;
	rc = 0;
out:
	tb_tolfile_free(tf);
	cJSON_Delete(root);
	return rc;
}

void tb_tolfile_free(tb_tolfile *tf)
{
	if (!tf)
		return;
	for (size_t i = 0; i < tf->n; i++) {
		regfree(&tf->v[i].re);
		free(tf->v[i].pattern);
	}
	free(tf->v);
	free(tf);
}

static void overlay(const tol_entry *te, tb_tolerance *tol)
{
	if (te->set & SET_ATOL)
		tol->atol = te->tol.atol;
	if (te->set & SET_RTOL)
		tol->rtol = te->tol.rtol;
	if (te->set & SET_DIVERGE)
		tol->diverge = te->tol.diverge;
	if (te->set & SET_MAX_KL)
		tol->max_kl = te->tol.max_kl;
	if (te->set & SET_MODE)
		tol->absolute = te->tol.absolute;
}

/* The first entry that matches the cell or one of its tensors, or -1. */
static int entry_for(const tb_tolfile *tf, const tb_cell *cell, const char *ref_name, const char *cand_name)
{
	char name[TB_CELL_NAME_MAX];

	tb_cell_name(cell, name, sizeof name);
	for (size_t i = 0; tf && i < tf->n; i++) {
		const regex_t *re = &tf->v[i].re;
		if (full_match(re, name) || full_match(re, ref_name) || full_match(re, cand_name))
			return (int)i;
	}
	return -1;
}

double tb_tolfile_noise(const tb_tolfile *tf, const tb_cell *cell, const char *ref_name, const char *cand_name)
{
	int i = entry_for(tf, cell, ref_name, cand_name);

	return i >= 0 ? tf->v[i].noise : -1;
}

int tb_tolfile_apply(const tb_tolfile *tf, const tb_cell *cell, const char *ref_name, const char *cand_name,
		     tb_tolerance *tol)
{
	int i = entry_for(tf, cell, ref_name, cand_name);

	if (i >= 0) {
		overlay(&tf->v[i], tol);
		return i;
	}
	return -1;
}

const char *tb_tolfile_pattern(const tb_tolfile *tf, int entry)
{
	return tf && entry >= 0 && (size_t)entry < tf->n ? tf->v[entry].pattern : NULL;
}

void tb_tolfile_for_cell(void *ud, const tb_cell *cell, const tb_tensor *ref, const tb_tensor *cand,
			 tb_tolerance *tol)
{
	tb_tolfile_apply(ud, cell, ref ? ref->name : NULL, cand ? cand->name : NULL, tol);
}
