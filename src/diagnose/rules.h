/*
 * rules: the diagnosis rule table, read from JSON files (the shipped
 * data/rules.json, a user config file, --rules FILE) and evaluated against
 * the features of a target cell (features.h).
 *
 * A rule: {"id", "weight" (0..1], "require": [COND...], "unless": [COND...],
 * "prefer": [COND | {"if": COND, "weight": W}...], "why": TEMPLATE,
 * "look_at": TEXT}.  COND is "feature", "!feature", "feature OP number"
 * (OP: < <= > >= == !=) or "feature in [a, b]".  A rule matches when every
 * require holds and no unless does; its score is weight * (1 + matched
 * prefer weight) / (1 + prefer weight of the measurable conditions).  Templates fill {feature} or
 * {feature:.3f} and {cell} {tap} {layer} {ref_name} {cand_name}.
 * The ruleset owns its rules; tb_ruleset_free releases them.
 */
#ifndef TB_RULES_H
#define TB_RULES_H

#include <stddef.h>

#include "diagnose/cause.h"
#include "base/error.h"

typedef struct tb_ruleset tb_ruleset;

/* Strings the templates may name besides features. */
typedef struct tb_rule_ctx {
	const char *cell, *tap, *ref_name, *cand_name;
	int layer;
	const char *nan_cell; /* the first cell with NaN/Inf on one side only, or NULL */
	const char *dup_tap;  /* the tap whose tensors repeat across layers (sanity), or NULL */
	const char *measured; /* the cell the features were measured at (tb_features_measured), or NULL */
	const char *alias_sum; /* the residual sum that matches while the target diverges (alias_here), or NULL */
} tb_rule_ctx;

tb_ruleset *tb_ruleset_new(void);
void tb_ruleset_free(tb_ruleset *rs);
/* Parse and add rules; errors name the file, the rule index and the field. */
int tb_ruleset_add_text(tb_ruleset *rs, const char *text, size_t len, const char *source, tb_err *err);
int tb_ruleset_add_file(tb_ruleset *rs, const char *path, tb_err *err);
/* The shipped table ($TBISECT_DATADIR, then the installed pkgdatadir, then
 * the copy built into the program), the user's
 * $XDG_CONFIG_HOME/tbisect/rules.json when present, then extra (may be NULL). */
int tb_ruleset_add_standard(tb_ruleset *rs, const char *extra, tb_err *err);
size_t tb_ruleset_count(const tb_ruleset *rs);
/* The look_at text of the first rule naming the cause id, rendered with
 * the features and ctx as the rules' are (malloc'd), or NULL when no rule
 * names it (or out of memory). */
char *tb_ruleset_look_at(const tb_ruleset *rs, const char *id, const double *features, const tb_rule_ctx *ctx);
/* Where the shipped rules were read from ("built-in" or a path). */
const char *tb_ruleset_shipped_source(const tb_ruleset *rs);

/* Matching rules as causes, best first, one per id (its best score),
 * at most max_causes.  features: TB_F_COUNT values.  lo and hi (NULL:
 * none) span the estimated ones (tb_features_span): a rule that matches at
 * the estimates keeps its score, one that matches only elsewhere in the
 * spans gets half its best there, and either says in its why that the
 * estimates cannot settle it when it matches at some points of the spans
 * and not at others. */
int tb_ruleset_eval(const tb_ruleset *rs, const double *features, const double *lo, const double *hi,
		    const tb_rule_ctx *ctx, size_t max_causes, tb_causes *out, tb_err *err);

#endif
