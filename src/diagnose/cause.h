/*
 * cause: one suggested cause of a divergence, as the diagnosis step ranks
 * them and the reports show them (tbisect-rules(5) CAUSE IDS).  A tb_causes list owns its
 * strings; tb_causes_done releases them.
 */
#ifndef TB_CAUSE_H
#define TB_CAUSE_H

#include <stddef.h>

typedef struct tb_cause {
	char *id;      /* "rope-style", ... */
	double score;  /* 0..1 */
	char *why;     /* the measured facts that matched */
	char *look_at; /* what to open in the reference forward and check */
	char *confirmed; /* the variant a replay confirmed it by ("gelu (tanh)"), or NULL */
	double confirmed_rel_l2; /* that variant's residual against the candidate */
} tb_cause;

typedef struct tb_causes {
	tb_cause *v; /* sorted by score, highest first */
	size_t n;
} tb_causes;

void tb_causes_done(tb_causes *c);

#endif
