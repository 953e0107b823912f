#include "config.h"

#include <stdlib.h>

#include "diagnose/cause.h"

const char *const tb_cause_ids[] = {
#define TB_CAUSE_NAME(id, name) name,
	TB_CAUSE_LIST(TB_CAUSE_NAME)
#undef TB_CAUSE_NAME
};
const size_t tb_n_cause_ids = sizeof tb_cause_ids / sizeof tb_cause_ids[0];

const char *tb_cause_name(tb_cause_id id)
{
	return id > TB_CAUSE_NONE && id < TB_CAUSE_COUNT ? tb_cause_ids[id - 1] : NULL;
}

void tb_causes_done(tb_causes *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].id);
		free(c->v[i].why);
		free(c->v[i].look_at);
		free(c->v[i].confirmed);
	}
	free(c->v);
	c->v = NULL;
	c->n = 0;
}
