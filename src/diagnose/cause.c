#include "config.h"

#include <stdlib.h>

#include "diagnose/cause.h"

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
