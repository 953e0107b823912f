/*
 * trtllm: the file names TensorRT-LLM's debug hook writes
 * (tensorrt_llm/_torch/debug/debug_hook.py, debug_mode) read as module
 * paths.
 *
 * The hook names a tensor by the chain of calls that reached it, each
 * "ORDINAL.Class" (the call's 1-based count among its parent call's
 * children), joined by '-', then "input.X" or "output.X": X an argument
 * name of forward, or the tensor's count in the call.  Its after-forward
 * hook dumps the module's positional arguments again as "output.X" before
 * the real outputs, so an output whose X is also an input's is that input.
 * Here each call gets the module path a Hugging Face dump would name it
 * by (model.layers.3.self_attn, model.norm, lm_head: by class and call
 * order), its real outputs are its items (.output.K when several), its
 * inputs are inputs (.inputs.X), and what a linear layer calls inside is
 * internal.  Calls of the top-level model beyond the first are steps.
 */
#ifndef TB_TRTLLM_H
#define TB_TRTLLM_H

#include <stdbool.h>
#include <stddef.h>

/* One tensor's name: in, the hook's name (rank tags removed); out, set
 * by tb_trtllm_rename. */
typedef struct tb_trtllm_name {
	const char *in;
	char *out;     /* malloc'd module path, or NULL when the tensor is internal */
	int step;      /* the top-level call's index among its class's, from 0 */
	bool internal; /* no cell: a duplicate of an input, or inside a linear layer */
} tb_trtllm_name;

/* Are all n names the hook's?  Then each gets its module path; -1 when
 * out of memory, 0 when the names are not the hook's (nothing set), 1
 * when renamed. */
int tb_trtllm_rename(tb_trtllm_name *names, size_t n);

#endif
