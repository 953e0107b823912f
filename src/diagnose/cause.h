/*
 * cause: one suggested cause of a divergence, as the diagnosis step ranks
 * them and the reports show them (tbisect-rules(5) CAUSE IDS).  A tb_causes list owns its
 * strings; tb_causes_done releases them.
 */
#ifndef TB_CAUSE_H
#define TB_CAUSE_H

#include <stddef.h>

/* The cause ids (tbisect-rules(5) CAUSE IDS), one row each: the rule table
 * may name only these (test_rules checks it names them all), and the
 * replay ops name them by enum, so an id they confirm is one of these at
 * build time. */
#define TB_CAUSE_LIST(X) \
	X(TOKENIZER, "tokenizer") \
	X(EMBEDDING_WEIGHTS, "embedding-weights") \
	X(EMBEDDING_SCALE, "embedding-scale") \
	X(TIED_EMBEDDINGS, "tied-embeddings") \
	X(ATTENTION_LAYOUT, "attention-layout") \
	X(GQA_REPEAT, "gqa-repeat") \
	X(ROPE_STYLE, "rope-style") \
	X(ROPE_THETA, "rope-theta") \
	X(PARTIAL_ROPE, "partial-rope") \
	X(ROTATE_HALF_SIGN, "rotate-half-sign") \
	X(QK_NORM, "qk-norm") \
	X(SOFTMAX_SCALE, "softmax-scale") \
	X(ATTENTION_MASK, "attention-mask") \
	X(SLIDING_WINDOW, "sliding-window") \
	X(MLP_ACTIVATION, "mlp-activation") \
	X(MLP_GATING, "mlp-gating") \
	X(MLP_BIAS, "mlp-bias") \
	X(NORM_FORMULATION, "norm-formulation") \
	X(NORM_EPSILON, "norm-epsilon") \
	X(RESIDUAL_WIRING, "residual-wiring") \
	X(SCALE_MULTIPLIER, "scale-multiplier") \
	X(WEIGHT_MAPPING, "weight-mapping") \
	X(FINAL_NORM, "final-norm") \
	X(LM_HEAD, "lm-head") \
	X(DTYPE_PRECISION, "dtype-precision") \
	X(NAN_OVERFLOW, "nan-overflow") \
	X(DECODE_POSITION, "decode-position") \
	X(DUMP_OFFSET, "dump-offset") \
	X(DUMP_DUPLICATE, "dump-duplicate") \
	X(MOE_ROUTING, "moe-routing") \
	X(EXPERT_MAPPING, "expert-mapping") \
	X(SHARED_EXPERT, "shared-expert") \
	X(ATTENTION_SINK, "attention-sink") \
	X(FINAL_SOFTCAP, "final-softcap") \
	X(KV_CACHE, "kv-cache") \
	X(DUMP_ALIASING, "dump-aliasing") \
	X(ROPE_SCALING, "rope-scaling") \
	X(YARN_SCALING, "yarn-scaling") \
	X(NOPE_LAYERS, "nope-layers")

typedef enum tb_cause_id {
	TB_CAUSE_NONE,
#define TB_CAUSE_ENUM(id, name) TB_CAUSE_##id,
	TB_CAUSE_LIST(TB_CAUSE_ENUM)
#undef TB_CAUSE_ENUM
	TB_CAUSE_COUNT
} tb_cause_id;

/* The ids' names in the list's order (tb_cause_ids[id - 1]). */
extern const char *const tb_cause_ids[];
extern const size_t tb_n_cause_ids;

/* The id's name, "rope-style"; NULL for TB_CAUSE_NONE. */
const char *tb_cause_name(tb_cause_id id);

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
