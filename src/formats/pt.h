/*
 * pt: the torch.save reader (zip archives, read with the restricted
 * unpickler of pickle.h; the format entry is tb_fmt_pt).  Beside the
 * format entry it serves readers of dumpers that write one torch.save
 * file per record and name it in the file name (SGLang's dumper).
 */
#ifndef TB_PT_H
#define TB_PT_H

#include "base/error.h"
#include "formats/reader.h"

/* Index a torch.save file whose payload the caller names: a dict
 * {"value": tensor, "meta": {...}} (its value taken, the meta's "dims"
 * string kept on the tensor) or a bare tensor.  A list or dict value gives
 * name.0, name.1, ... */
int tb_pt_index_named(tb_builder *b, const tb_file *f, const char *name, tb_err *err);

#endif
