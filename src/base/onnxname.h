/*
 * onnxname: the names ONNX exporters give node outputs.  torch.onnx names
 * every node after its module path and op ("/model/layers.0/Add_1" gives
 * the tensor "/model/layers.0/Add_1_output_0"); the Polygraphy reader names
 * such tensors by module, and naming keeps the rest out of coverage.
 * A pure function; owns nothing.
 */
#ifndef TB_ONNXNAME_H
#define TB_ONNXNAME_H

#include <stdbool.h>
#include <stddef.h>

/* Does s[0..n) read [A-Z][A-Za-z]*(_[0-9]+)?_output_[0-9]+ ("MatMul_output_0",
 * "Reshape_3_output_0")? */
bool tb_onnx_output_name(const char *s, size_t n);

#endif
