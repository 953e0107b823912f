/*
 * sidecar: the JSON files dumpers write beside their tensors (vLLM's
 * inputs.json / outputs.json, the transformers model debugger's
 * *_debug_tree_FULL_TENSORS.json), read to check that what they describe
 * is there; they add no tensor.  The format entries are
 * tb_fmt_vllm_sidecar and tb_fmt_hfdebug_tree (reader.h).
 */
#ifndef TB_SIDECAR_H
#define TB_SIDECAR_H

#include "base/error.h"

/* A vLLM record (step_N/<module>/outputs_0_cuda_1.pt) must have its
 * sidecar (outputs.json) beside it; 0 for any other file name. */
int tb_sidecar_check_vllm_record(const char *path, tb_err *err);

/* Is c[0..n) the stem of a vLLM record, its kind and item indices then the
 * tensor's device as torch names it with ':' as '_' ("outputs_0_cuda_1",
 * "outputs_cpu", "inputs_2_xpu_0")?  The length before the device, with
 * the device's index in *index (-1 for one without, "cpu"); 0 when not. */
size_t tb_vllm_record_stem(const char *c, size_t n, int *index);

#endif
