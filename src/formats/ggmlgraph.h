/*
 * ggmlgraph: what the nodes of a llama.cpp graph compute, read from the op
 * and the operands each node's header prints (ggmltext), never from its
 * name alone: llama.cpp's graph names changed meaning between versions
 * (kqv_out-N was the attention output after o_proj in 2024 and is o_proj's
 * input since; the embedding was inp_embd, now embd), while
 * MUL_MAT(blk.N.attn_output.weight, X) is the attention output whatever it
 * is called, and X is o_proj's input.
 *
 * The rules are one table of (op, weight operand) -> tap, plus RoPE of a
 * query or key, bias additions, row selections and reshapes that carry
 * their source's tap along, the residual additions after attention and
 * after the MLP, and an experts block's routing by the ops that build it
 * (llm_graph_context::build_moe_ffn): the score function of the router's
 * logits, the top-k of those probabilities (TOP_K, or a view of their
 * ARGSORT), the rows of the probabilities the top-k selects (GET_ROWS),
 * their renormalisation (DIV) and scaling (SCALE), the selected experts'
 * projections (MUL_MAT_ID by ffn_gate_exps, ffn_up_exps, ffn_down_exps:
 * one row per selected expert), down's outputs times those weights (MUL,
 * mlp.weighted) and the sum (ADD) of that product's views.  Each GET_ROWS from token_embd.weight starts a
 * forward pass.  Pure functions over borrowed strings; ggmltext.c calls it.
 */
#ifndef TB_GGMLGRAPH_H
#define TB_GGMLGRAPH_H

#include <stdbool.h>
#include <stddef.h>

/* A slice of the file's text. */
typedef struct tb_span {
	const char *p;
	size_t n;
} tb_span;

/* One node header, as ggmltext read it, with what classify works out. */
typedef struct tb_ggml_node {
	tb_span name, op;
	tb_span src[2];    /* operand names; n == 0 when absent */
	/* set by tb_ggml_classify */
	int pass;          /* forward pass: 0, 1, ... in the file's order */
	int layer;         /* -1: model-level (or no tap nor inner) */
	const char *tap;   /* canonical tap (static), or NULL: a graph internal */
	bool carried;      /* tap carried from a source (a reshape, a row selection), not computed
			    * here: it holds the tap's values, but another node is the tap */
	const char *inner; /* a graph internal of an experts block that later nodes are told by
			    * (static): "moe.argsort"; NULL otherwise.
			    * Carried along reshapes and views, with its layer in layer */
} tb_ggml_node;

/* Do two spans hold the same text? */
bool tb_span_eq(tb_span a, tb_span b);

/* Classify n nodes in file order. */
void tb_ggml_classify(tb_ggml_node *nodes, size_t n);

/* Is this tap (as classify gives it) the model's last, the logits? */
bool tb_ggml_is_logits(const char *tap);

/* The operand of node that names a layer's weight no llama.cpp GGUF file
 * has (a typo, or a llama.cpp newer than the table), or an empty span. */
tb_span tb_ggml_unknown_weight(const tb_ggml_node *node);

/* Does this node start a forward pass (the embedding lookup)? */
bool tb_ggml_is_embed(const tb_ggml_node *node);

#endif
