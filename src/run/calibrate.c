#include "config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run/calibrate.h"

/* The cell's name as a POSIX extended regex that matches it alone. */
static void literal(const char *name, char *buf, size_t size)
{
	size_t n = 0;

	for (; *name && n + 3 < size; name++) {
		if (strchr(".[]()*+?{}|^$\\", *name))
			buf[n++] = '\\';
		buf[n++] = *name;
	}
	buf[n] = '\0';
}

char *tb_calibrate_json(const tb_result *res, const char *ref, const char *ref2, double factor, tb_err *err)
{
	cJSON *root = cJSON_CreateObject(), *list = NULL, *about = NULL;
	size_t used = 0;
	char *text = NULL;

	if (root) {
		about = cJSON_AddObjectToObject(root, "calibrated");
		list = cJSON_AddArrayToObject(root, "tolerances");
	}
	if (!root || !about || !list)
		goto oom;
	cJSON_AddStringToObject(about, "ref", ref);
	cJSON_AddStringToObject(about, "ref2", ref2);
	cJSON_AddNumberToObject(about, "factor", factor);
	for (size_t i = 0; i < res->n_cells; i++) {
		const tb_cell_result *c = &res->cells[i];
		const tb_metrics *m = &c->m;
		char name[TB_CELL_NAME_MAX], re[2 * TB_CELL_NAME_MAX];
		double floor;
		cJSON *e, *noise;
		if (!c->ref || !c->cand || c->shape_mismatch || !isfinite(m->rel_l2) || !isfinite(m->max_abs))
			continue;
		/* below the rounding of the coarser dtype, the next run's
		 * rounding would read as a divergence */
		floor = fmax(tb_dtype_rounding(c->ref->dtype), tb_dtype_rounding(c->cand->dtype));
		tb_cell_name(&c->cell, name, sizeof name);
		literal(name, re, sizeof re);
		e = cJSON_CreateObject();
		if (!e || !cJSON_AddItemToArray(list, e))
			goto oom;
		cJSON_AddStringToObject(e, "match", re);
		/* every element within factor times the largest difference seen */
		cJSON_AddNumberToObject(e, "atol", factor * m->max_abs);
		cJSON_AddNumberToObject(e, "rtol", floor);
		cJSON_AddNumberToObject(e, "diverge", fmax(factor * m->rel_l2, floor));
		if (c->logits && isfinite(c->logits->kl_mean))
			cJSON_AddNumberToObject(e, "max_kl", fmax(factor * c->logits->kl_mean, floor * floor));
		noise = cJSON_AddObjectToObject(e, "noise");
		if (!noise)
			goto oom;
		cJSON_AddNumberToObject(noise, "rel_l2", m->rel_l2);
		cJSON_AddNumberToObject(noise, "max_abs", m->max_abs);
		cJSON_AddNumberToObject(noise, "cosine", isfinite(m->cosine) ? m->cosine : 0);
		used++;
	}
	if (!used) {
		cJSON_Delete(root);
		tb_err_setc(err, TB_ERR_FORMAT, ref2, "no cell compared with %s: nothing to calibrate from", ref);
		return NULL;
	}
	text = cJSON_Print(root);
	cJSON_Delete(root);
	if (!text)
		tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	return text;
oom:
	cJSON_Delete(root);
	tb_err_setc(err, TB_ERR_NOMEM, NULL, "out of memory");
	return NULL;
}
