#include "config.h"

#include <stddef.h>

#include "formats/reader.h"

/* The first reader whose sniffer claims a file reads it, so a special case
 * of another reader's format comes before it (SGLang's records are
 * torch.save files, a safetensors index is JSON); the text readers that
 * claim by content anywhere in a file come last. */
const tb_format *const tb_formats[] = {
	&tb_fmt_tbsk,
	&tb_fmt_npy,
	&tb_fmt_safetensors_index,
	&tb_fmt_safetensors,
	&tb_fmt_sglang,
	&tb_fmt_pt,
	&tb_fmt_npz,
	&tb_fmt_polygraphy,
	&tb_fmt_golden,
	&tb_fmt_vllm_sidecar,
	&tb_fmt_hfdebug_tree,
	&tb_fmt_moetrace,
	&tb_fmt_ggmltext,
	&tb_fmt_rawlogits,
	NULL,
};
