#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "model/naming.h"
#include "model/taps.h"
#include "testutil.h"

/* One row of tbisect-dumps(5) NAMING as data: raw name, shared prefix, expected cell
 * ("-" for unmapped). */
static const struct {
	const char *raw, *shared, *cell;
} rows[] = {
	{"model.embed_tokens", NULL, "embed"},
	{"transformer.wte", NULL, "embed"},
	{"tok_embeddings", NULL, "embed"},
	{"embed", NULL, "embed"},
	{"post_embed", NULL, "embed"},
	{"model.layers.3.input_layernorm", NULL, "L3.attn_norm"},
	{"transformer.h.3.ln_1", NULL, "L3.attn_norm"},
	{"layers.3.attention_norm", NULL, "L3.attn_norm"},
	{"model.layers.12.self_attn", NULL, "L12.attn"},
	{"transformer.h.12.attn", NULL, "L12.attn"},
	{"layers.12.attention", NULL, "L12.attn"},
	{"model.layers.0.self_attn.q_proj", NULL, "L0.attn.q"},
	{"model.layers.0.self_attn.k_proj", NULL, "L0.attn.k"},
	{"model.layers.0.self_attn.v_proj", NULL, "L0.attn.v"},
	{"model.layers.0.self_attn.o_proj", NULL, "L0.attn.o"},
	{"model.layers.5.post_attention_layernorm", NULL, "L5.mlp_norm"},
	{"transformer.h.5.ln_2", NULL, "L5.mlp_norm"},
	{"layers.5.ffn_norm", NULL, "L5.mlp_norm"},
	{"model.layers.7.mlp", NULL, "L7.mlp"},
	{"transformer.h.7.mlp", NULL, "L7.mlp"},
	{"layers.7.feed_forward", NULL, "L7.mlp"},
	{"model.layers.7.mlp.gate_proj", NULL, "L7.mlp.gate"},
	{"model.layers.7.mlp.up_proj", NULL, "L7.mlp.up"},
	{"model.layers.7.mlp.down_proj", NULL, "L7.mlp.down"},
	{"model.layers.31", NULL, "L31.block"},
	{"transformer.h.31", NULL, "L31.block"},
	{"layers.31", NULL, "L31.block"},
	{"model.norm", NULL, "final_norm"},
	{"transformer.ln_f", NULL, "final_norm"},
	{"norm", NULL, "final_norm"},
	{"lm_head", NULL, "logits"},
	{"logits", NULL, "logits"},
	{"output", NULL, "logits"},
	{"layers.4.attn", NULL, "L4.attn"},
	{"layers.4.mlp_norm", NULL, "L4.mlp_norm"},
	{"layers.4.attn.q", NULL, "L4.attn.q"},
	{"layers.4.attn.scores", NULL, "L4.attn.scores"},
	{"L4.block", NULL, "L4.block"},
	{"L4.mlp.gate", NULL, "L4.mlp.gate"},
	{"layer_4.attn_norm", NULL, "L4.attn_norm"},
	{"blocks.4.mlp", NULL, "L4.mlp"},
	{"layers/4/attn", NULL, "L4.attn"},
	{"layers.2.post_attn", NULL, "L2.attn"},
	{"layers.2.post_mlp", NULL, "L2.mlp"},
	{"layers.2.post_block", NULL, "L2.block"},
	{"layer_hidden_states[6]", NULL, "L6.block"},
	/* Hugging Face output_hidden_states: entry 0 is the embedding output */
	{"hidden_states[0]", NULL, "embed"},
	{"hidden_states[1]", NULL, "L0.block"},
	{"hidden_states[32]", NULL, "L31.block"},
	{"hidden_states.0", NULL, "embed"},
	{"hidden_states.4", NULL, "L3.block"},
	{"run.hidden_states.2", "run.", "L1.block"},
	/* vLLM and SGLang: the attention module inside self_attn is o_proj's input */
	{"model.layers.7.self_attn.attn", NULL, "L7.attn.core"},
	{"model.layers.7.self_attn.qkv_proj", NULL, "L7.attn.qkv"},
	/* MaxText / Flax module paths */
	{"token_embedder", NULL, "embed"},
	{"decoder/layers_3/pre_self_attention_layer_norm", NULL, "L3.attn_norm"},
	{"decoder/layers_3/self_attention", NULL, "L3.attn"},
	{"decoder/layers_3/self_attention/query", NULL, "L3.attn.q"},
	{"decoder/layers_3/self_attention/key", NULL, "L3.attn.k"},
	{"decoder/layers_3/self_attention/value", NULL, "L3.attn.v"},
	{"decoder/layers_3/self_attention/out", NULL, "L3.attn"},
	{"decoder/layers_3/post_self_attention_layer_norm", NULL, "L3.mlp_norm"},
	{"decoder/layers_3/mlp", NULL, "L3.mlp"},
	{"decoder/layers_3/mlp/wi_0", NULL, "L3.mlp.gate"},
	{"decoder/layers_3/mlp/wi_1", NULL, "L3.mlp.up"},
	{"decoder/layers_3/mlp/wo", NULL, "L3.mlp.down"},
	{"decoder/layers_3", NULL, "L3.block"},
	{"decoder/decoder_norm", NULL, "final_norm"},
	{"layers_11/self_attention", NULL, "L11.attn"},
	{"layers_11", NULL, "L11.block"},
	{"decoder_norm", NULL, "final_norm"},
	/* llama.cpp graph tensors, by what they compute */
	{"inp_embd", NULL, "embed"},
	{"attn_norm-5", NULL, "L5.attn_norm"},
	{"Qcur-5", NULL, "L5.attn.q_rope"},
	{"Kcur-5", NULL, "L5.attn.k_rope"},
	{"Vcur-5", NULL, "L5.attn.v"},
	{"kqv_out-5", NULL, "L5.attn.core"},
	{"attn_out-5", NULL, "L5.attn"},
	{"ffn_inp-5", NULL, "L5.attn.resid"},
	{"ffn_norm-5", NULL, "L5.mlp_norm"},
	{"ffn_out-5", NULL, "L5.mlp"},
	{"l_out-5", NULL, "L5.block"},
	{"result_norm", NULL, "final_norm"},
	{"result_output", NULL, "logits"},
	/* modular's debug-model dumper */
	{"layer_07", NULL, "L7.block"},
	{"post_final_norm", NULL, "final_norm"},
	{"last_logits", NULL, "logits"},
	/* Flax capture_intermediates keys (MaxText): the call and item 0 are
	 * the module's, "out" is the output projection there */
	{"intermediates/decoder/layers_2/mlp/__call__", "intermediates/", "L2.mlp"},
	{"decoder/layers_2/self_attention/out/__call__", NULL, "L2.attn.o"},
	{"decoder/layers_2/self_attention/__call__/0", NULL, "L2.attn"},
	{"decoder/layers_2/self_attention/attention_op/__call__", NULL, "L2.attn.core"},
	{"decoder/layers_2/self_attention/query_rotary/__call__", NULL, "L2.attn.q_rope"},
	{"decoder/layers_2/__call__/0/0", NULL, "L2.block"},
	{"decoder/logits_dense/__call__", NULL, "logits"},
	{"decoder/layers_2/mlp/__call__/1", NULL, "-"},
	{"decoder/layers_2/__call__/0/1", NULL, "-"},
	{"decoder/layers_2/mlp/bogus/__call__", NULL, "-"},
	/* transformers v5: the text model of a multimodal one */
	{"model.language_model.layers.4.self_attn", NULL, "L4.attn"},
	{"model.language_model.embed_tokens", NULL, "embed"},
	{"model.language_model.norm", NULL, "final_norm"},
	{"language_model.model.layers.4", NULL, "L4.block"},
	{"language_model.lm_head", NULL, "logits"},
	/* ignored suffixes */
	{"model.layers.1.self_attn.output", NULL, "L1.attn"},
	{"model.layers.1.mlp.out", NULL, "L1.mlp"},
	{"lm_head:0", NULL, "logits"},
	{"layers.1.block.output:0", NULL, "L1.block"},
	/* shared prefix: stripped piece by piece */
	{"decoder.layers.3.attn", "decoder.", "L3.attn"},
	{"run7.model.embed_tokens", "run7.model.", "embed"},
	{"run7.model.layers.2.mlp", "run7.model.", "L2.mlp"},
	{"a.b.c.lm_head", "a.b.c.", "logits"},
	/* not mapped */
	{"decoder.layers.3.attn", NULL, "-"},
	{"model.layers.x.mlp", NULL, "-"},
	{"model.layers.3.mlp.weight", NULL, "-"},
	{"tokens", NULL, "-"},
	{"layers.3.embed", NULL, "-"},
	{"layers.3.bogus", NULL, "-"},
	{"layers.3.attn.Q", NULL, "-"},
	{"attn", NULL, "-"},
	{"x.norm.extra", "x.", "-"},
	{"model.layers.123456789.mlp", NULL, "-"},
	{"l_out-x", NULL, "-"},
	{"Qcur", NULL, "-"},
	{"decoder/layers_x/mlp", NULL, "-"},
};

static void expect(const tb_namer *nm, const char *raw, const char *shared, const char *want)
{
	char got[128];
	tb_cell c;

	if (tb_namer_map(nm, raw, shared, &c, NULL, 0))
		tb_cell_name(&c, got, sizeof got);
	else
		snprintf(got, sizeof got, "-");
	if (strcmp(got, want) != 0)
		fail_msg("%s (shared '%s'): got %s, want %s", raw, shared ? shared : "", got, want);
}

static void test_builtin_conventions(void **state)
{
	tb_namer *nm;
	tb_err err;
	(void)state;

	assert_int_equal(tb_namer_new(NULL, &nm, &err), 0);
	for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
		expect(nm, rows[i].raw, rows[i].shared, rows[i].cell);
	tb_namer_free(nm);
}

/* A Polygraphy mark-all dump: module outputs named by module path map,
 * an ONNX op's output inside a module is no cell and counts nowhere. */
/* What dumpers record beside the cells: no cell, no coverage.  And the
 * tuples and inputs that are cells after all. */
static void test_aux_names(void **state)
{
	static const char *const aux[] = {
		"positions", "step_0.model.layers.0.mlp.inputs_0", "LlamaForCausalLM.model.layers.0.mlp_inputs_args_0",
		"model.layers.2.inputs.0", "model.layers.1.outputs_1", "model.layers.1.output.0", "model",
		"uuid.model.outputs", "model.layers.0.self_attn.rotary_emb_1.outputs_0", "LlamaForCausalLM_outputs_logits",
		"(Unnamed Layer* 13) [Shuffle]_output", "intermediates/decoder/layers_0/Dropout_0/__call__",
		"intermediates/decoder/layers_0/mlp/Dropout_12/__call__/0", "intermediates/__call__", "decoder/__call__",
		"decoder/layers_0/activation_mean", "prompt_tokens",
	};
	static const char *const cells[] = {
		"model.layers.0.mlp", "model.layers.0.mlp.outputs", "model.layers.1.input_layernorm.outputs_1",
		"model.layers.0.post_attention_layernorm.outputs_1", "logits", "model.norm",
	};
	tb_namer *nm;
	tb_err err;
	(void)state;

	for (size_t i = 0; i < sizeof aux / sizeof *aux; i++)
		if (!tb_name_is_aux(aux[i]))
			fail_msg("%s is taken as a cell's tensor", aux[i]);
	for (size_t i = 0; i < sizeof cells / sizeof *cells; i++)
		if (tb_name_is_aux(cells[i]))
			fail_msg("%s is taken as no cell", cells[i]);
	assert_int_equal(tb_namer_new(NULL, &nm, &err), 0);
	expect(nm, "model.layers.0.mlp.down_proj.outputs_0", NULL, "L0.mlp.down");
	expect(nm, "model.layers.1.input_layernorm.outputs_1", NULL, "L0.block");
	expect(nm, "model.layers.1.input_layernorm.outputs_0", NULL, "L1.attn_norm");
	expect(nm, "model.layers.0.post_attention_layernorm.outputs_1", NULL, "L0.attn.resid");
	expect(nm, "model.layers.0.outputs_0", NULL, "-");
	expect(nm, "LlamaForCausalLM.model.layers.0.self_attn.q_proj_outputs", NULL, "L0.attn.q");
	expect(nm, "LlamaForCausalLM.model.layers.2_inputs_args_0", NULL, "L1.block");
	expect(nm, "layers.0.layer_input", NULL, "embed");
	expect(nm, "layers.3.layer_input", NULL, "L2.block");
	expect(nm, "layers.1.attn_pre_o_proj", NULL, "L1.attn.core");
	expect(nm, "logits_processor.outputs", NULL, "logits");
	assert_true(tb_name_is_last_block("uuid.model.norm.outputs_1"));
	assert_true(tb_name_is_last_block("LlamaForCausalLM.model.norm_inputs_args_0"));
	assert_false(tb_name_is_last_block("model.norm.outputs_0"));
	assert_true(tb_name_is_last_position("hf_layers/last_logits"));
	assert_false(tb_name_is_last_position("logits"));
	assert_true(tb_name_is_token_ids("prompt_tokens"));
	tb_namer_free(nm);
}

/* Towers of multimodal models are no text cells, whatever their names. */
static void test_towers(void **state)
{
	static const struct {
		const char *raw, *tower;
	} towers[] = {
		{"model.visual.blocks.3.attn", "vision"},
		{"model.vision_tower.vision_model.encoder.layers.0.self_attn", "vision"},
		{"vision_tower.vision_model.encoder.layers.0.mlp", "vision"},
		{"model.multi_modal_projector", "vision"},
		{"model.audio_tower.layers.1", "audio"},
		{"model.language_model.layers.0.mlp", NULL},
		{"lm_head", NULL},
		{"model.visualizer", NULL},
		{"model.multi_modal_projector_x", NULL},
	};
	(void)state;

	for (size_t i = 0; i < sizeof towers / sizeof *towers; i++) {
		const char *got = tb_name_tower(towers[i].raw);
		if ((got == NULL) != (towers[i].tower == NULL) || (got && strcmp(got, towers[i].tower)))
			fail_msg("%s: tower %s, want %s", towers[i].raw, got ? got : "none",
				 towers[i].tower ? towers[i].tower : "none");
	}
}

/* A tower's grid: its own rows, its prefix cut. */
static void test_tower_cells(void **state)
{
	static const struct {
		const char *raw, *tower, *cell;
	} cells[] = {
		{"model.visual.blocks.3.attn", "vision", "L3.attn"},
		{"model.visual.blocks.3", "vision", "L3.block"},
		{"model.visual.patch_embed", "vision", "embed"},
		{"model.visual.merger", "vision", "logits"},
		{"model.vision_tower.vision_model.encoder.layers.1.layer_norm2", "vision", "L1.mlp_norm"},
		{"vision_tower.vision_model.post_layernorm", "vision", "final_norm"},
		{"model.multi_modal_projector", "vision", "logits"},
		{"model.audio_tower.layers.2.fc2", "audio", "L2.mlp"},
		{"model.visual.blocks.3.attn", "audio", "-"},
		{"model.language_model.layers.0.mlp", "vision", "-"},
		{"model.visual.blocks.0.attn.qkv", "vision", "L0.attn.qkv"},
		{"model.visual.rotary_pos_emb", "vision", "-"},
	};
	tb_namer *nm;
	tb_err err;
	(void)state;

	assert_int_equal(tb_namer_new(NULL, &nm, &err), 0);
	for (size_t i = 0; i < sizeof cells / sizeof *cells; i++) {
		char got[128];
		tb_cell c;
		if (tb_namer_map_tower(nm, cells[i].raw, cells[i].tower, &c, NULL))
			tb_cell_name(&c, got, sizeof got);
		else
			snprintf(got, sizeof got, "-");
		if (strcmp(got, cells[i].cell))
			fail_msg("%s in the %s tower: got %s, want %s", cells[i].raw, cells[i].tower, got, cells[i].cell);
	}
	tb_namer_free(nm);
}

static void test_text_model_prefixed(void **state)
{
	tb_namer *nm;
	tb_err err;
	(void)state;

	assert_int_equal(tb_namer_new(NULL, &nm, &err), 0);
	expect(nm, "step_0.model.language_model.layers.1.mlp", "step_0.", "L1.mlp");
	tb_namer_free(nm);
}

static void test_onnx_names(void **state)
{
	static const char *const ops[] = {
		"model/layers.0/self_attn/Reshape_3_output_0", "model/layers.0/Add_output_0",
		"/model/norm/Mul_1_output_0",                   "model/layers.1/mlp/act_fn/Sigmoid_output_12",
		"Shape_output_0",
	};
	static const char *const others[] = {
		"model/layers.0/self_attn/o_proj", "logits", "model/layers.0/mlp_output_0", "model/x/Add_output_",
		"model/x/Add_x_output_0", "model/x/add_output_0", "model/x/Add_1_output_0a", "model/x/Add__output_0",
	};
	tb_namer *nm;
	tb_err err;
	(void)state;

	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
		if (!tb_name_is_aux(ops[i]))
			fail_msg("%s is not taken as an op output", ops[i]);
	for (size_t i = 0; i < sizeof others / sizeof *others; i++)
		if (tb_name_is_aux(others[i]))
			fail_msg("%s is taken as an op output", others[i]);
	assert_int_equal(tb_namer_new(NULL, &nm, &err), 0);
	expect(nm, "model/layers.0/self_attn/o_proj", NULL, "L0.attn.o");
	expect(nm, "model/layers.3", NULL, "L3.block");
	expect(nm, "model/embed_tokens", NULL, "embed");
	expect(nm, "model/layers.0/self_attn/Reshape_3_output_0", NULL, "-");
	tb_namer_free(nm);
}

static void test_rule_reported(void **state)
{
	tb_namer *nm;
	tb_err err;
	tb_cell c;
	char rule[128];
	(void)state;

	assert_int_equal(tb_namer_new(NULL, &nm, &err), 0);
	assert_true(tb_namer_map(nm, "transformer.h.2.ln_2", NULL, &c, rule, sizeof rule));
	assert_string_equal(rule, "transformer.h.{N}.ln_2");
	tb_namer_free(nm);
}

static void test_common_prefix(void **state)
{
	const char *a[] = {"run1.model.layers.0.mlp", "run1.model.layers.1.mlp", "run1.model.norm"};
	const char *b[] = {"x.a", "y.a"};
	const char *c[] = {"layers/0/attn", "layers/1/attn"};
	const char *one[] = {"model.layers.0.mlp"};
	char buf[256];
	(void)state;

	tb_common_prefix(a, 3, buf, sizeof buf);
	assert_string_equal(buf, "run1.model.");
	tb_common_prefix(b, 2, buf, sizeof buf);
	assert_string_equal(buf, "");
	tb_common_prefix(c, 2, buf, sizeof buf);
	assert_string_equal(buf, "layers/");
	tb_common_prefix(one, 1, buf, sizeof buf);
	assert_string_equal(buf, "model.layers.0.");
	tb_common_prefix(NULL, 0, buf, sizeof buf);
	assert_string_equal(buf, "");
}

static void test_map_file(void **state)
{
	const char *dir = tu_tmpdir(), *path = tu_path(dir, "map.json");
	tb_namer *nm;
	tb_err err;
	(void)state;

	tu_write_str(path, "{\"rules\": ["
			   "{\"match\": \"^dec\\\\.blk([0-9]+)\\\\.sa$\", \"layer\": \"\\\\1\", \"tap\": \"attn\"},"
			   "{\"match\": \"^dec\\\\.blk([0-9]+)\\\\.(mlp|attn_norm)$\", \"layer\": \"\\\\1\", \"tap\": \"\\\\2\"},"
			   "{\"match\": \"^final$\", \"tap\": \"final_norm\"},"
			   "{\"match\": \"^fixed$\", \"layer\": 9, \"tap\": \"block\"},"
			   "{\"match\": \"^model\\\\.norm$\", \"tap\": \"logits\"}"
			   "]}");
	assert_int_equal(tb_namer_new(path, &nm, &err), 0);
	expect(nm, "dec.blk12.sa", NULL, "L12.attn");
	expect(nm, "dec.blk3.mlp", NULL, "L3.mlp");
	expect(nm, "dec.blk3.attn_norm", NULL, "L3.attn_norm");
	expect(nm, "final", NULL, "final_norm");
	expect(nm, "fixed", NULL, "L9.block");
	/* user rules come before the built-ins */
	expect(nm, "model.norm", NULL, "logits");
	expect(nm, "dec.blk.sa", NULL, "-");
	expect(nm, "model.layers.2.mlp", NULL, "L2.mlp");
	tb_namer_free(nm);
}

static void map_error(const char *json, const char *want)
{
	const char *dir = tu_tmpdir(), *path = tu_path(dir, "bad.json");
	tb_namer *nm = (tb_namer *)1;
	tb_err err;

	tu_write_str(path, json);
	assert_int_equal(tb_namer_new(path, &nm, &err), -1);
	assert_null(nm);
	assert_string_equal(err.file, path);
	if (!strstr(err.msg, want))
		fail_msg("map %s: message '%s' lacks '%s'", json, err.msg, want);
}

static void test_map_errors(void **state)
{
	(void)state;
	map_error("{\"rules\": [", "not valid JSON");
	map_error("[]", "\"rules\" array");
	map_error("{\"rules\": {}}", "\"rules\" array");
	map_error("{\"rules\": [3]}", "rule 0 is not an object");
	map_error("{\"rules\": [{\"tap\": \"attn\", \"layer\": \"1\"}]}", "rule 0: \"match\"");
	map_error("{\"rules\": [{\"match\": \"(a\", \"tap\": \"attn\", \"layer\": \"1\"}]}", "rule 0: \"match\":");
	map_error("{\"rules\": [{\"match\": \"^x$\", \"tap\": \"attn\", \"layer\": \"1\"},"
		  "{\"match\": \"(a)\\\\1\", \"tap\": \"attn\", \"layer\": \"1\"}]}",
		  "rule 1: \"match\" uses a back-reference");
	map_error("{\"rules\": [{\"match\": \"x\", \"tap\": \"bogus\", \"layer\": \"1\"}]}", "rule 0: \"tap\": 'bogus'");
	/* Perl classes read as letters in POSIX: refused, with the POSIX spelling. */
	map_error("{\"rules\": [{\"match\": \"^blk(\\\\d+)$\", \"tap\": \"attn\", \"layer\": \"\\\\1\"}]}",
		  "rule 0: \"match\" uses \\d, a Perl class POSIX regular expressions lack: write [0-9]");
	map_error("{\"rules\": [{\"match\": \"^a\\\\sb$\", \"tap\": \"embed\"}]}", "uses \\s, a Perl class");
	map_error("{\"rules\": [{\"match\": \"^\\\\w+$\", \"tap\": \"embed\"}]}", "write [A-Za-z0-9_]");
	map_error("{\"rules\": [{\"match\": \"x\", \"tap\": \"attn\"}]}", "needs a \"layer\"");
	map_error("{\"rules\": [{\"match\": \"x\", \"tap\": \"attn\", \"layer\": true}]}", "\"layer\" must be");
	map_error("{\"rules\": [{\"match\": \"x\", \"tap\": 3, \"layer\": \"1\"}]}", "\"tap\" must be a string");
}

static void test_missing_map_file(void **state)
{
	tb_namer *nm;
	tb_err err;
	(void)state;

	assert_int_equal(tb_namer_new("/nonexistent/map.json", &nm, &err), -1);
	assert_string_equal(err.file, "/nonexistent/map.json");
}

static void test_cells(void **state)
{
	tb_cell a, b;
	char buf[64];
	(void)state;

	assert_int_equal(tb_cell_parse("L3.attn", &a), 0);
	assert_int_equal(a.layer, 3);
	assert_string_equal(a.tap, "attn");
	assert_int_equal(tb_cell_parse("layers.3.mlp.gate", &a), 0);
	assert_string_equal(a.tap, "mlp.gate");
	assert_int_equal(tb_cell_parse("logits", &a), 0);
	assert_int_equal(a.layer, -1);
	assert_int_equal(tb_cell_parse("L3.logits", &a), -1);
	assert_int_equal(tb_cell_parse("bogus", &a), -1);
	assert_int_equal(tb_cell_parse("L3", &a), -1);

	/* forward order */
	static const char *const order[] = {"embed", "L0.attn_norm", "L0.attn.qkv", "L0.attn.q", "L0.attn.k",
					    "L0.attn.v", "L0.attn.rope", "L0.attn.o", "L0.attn", "L0.mlp_norm",
					    "L0.mlp.gate_up", "L0.mlp.gate", "L0.mlp.up", "L0.mlp.act", "L0.mlp.down",
					    "L0.mlp", "L0.block",
					    "L1.attn_norm", "L10.block", "final_norm", "logits"};
	for (size_t i = 0; i + 1 < sizeof order / sizeof *order; i++) {
		assert_int_equal(tb_cell_parse(order[i], &a), 0);
		assert_int_equal(tb_cell_parse(order[i + 1], &b), 0);
		if (tb_cell_cmp(&a, &b) >= 0)
			fail_msg("%s should come before %s", order[i], order[i + 1]);
		assert_true(tb_cell_cmp(&b, &a) > 0);
	}
	tb_cell_parse("L12.mlp", &a);
	tb_cell_name(&a, buf, sizeof buf);
	assert_string_equal(buf, "L12.mlp");
}

static void test_tap_ids(void **state)
{
	tb_cell a, b, none = {-1, "", TB_TAP_NONE};
	tb_feed f[TB_MAX_FEEDS];
	(void)state;

	/* every table entry: its id, its name back, and its parent by id */
	for (size_t i = 0; i < tb_n_taps; i++) {
		assert_int_equal(tb_taps[i].id, (int)i + 1);
		assert_int_equal(tb_tap_id_of(tb_taps[i].name), tb_taps[i].id);
		assert_ptr_equal(tb_tap_info_of(tb_taps[i].id), &tb_taps[i]);
	}
	assert_null(tb_tap_info_of(TB_TAP_NONE));
	assert_null(tb_tap_info_of(TB_TAP_OTHER));

	tb_cell_make(&a, 3, "attn.q");
	assert_int_equal(a.id, TB_TAP_ATTN_Q);
	assert_int_equal(tb_cell_parent(&a), TB_TAP_ATTN);
	tb_cell_make(&a, 3, "mlp.inner");
	assert_int_equal(a.id, TB_TAP_OTHER);
	assert_int_equal(tb_cell_parent(&a), TB_TAP_MLP);
	assert_string_equal(tb_tap_parent("mlp.inner"), "mlp");
	tb_cell_make(&a, 3, "attn");
	assert_int_equal(tb_cell_parent(&a), TB_TAP_NONE);
	assert_null(tb_tap_parent("attn"));
	tb_cell_make(&a, 3, "bogus.q");
	assert_int_equal(a.id, TB_TAP_NONE);
	assert_int_equal(tb_cell_parent(&a), TB_TAP_NONE);
	assert_int_equal(tb_cell_parse("L2.attn.rope", &a), 0);
	assert_int_equal(a.id, TB_TAP_OTHER);
	assert_int_equal(tb_cell_parse("final_norm", &a), 0);
	assert_int_equal(a.id, TB_TAP_FINAL_NORM);

	/* free-form sub-taps share an id and differ by name */
	tb_cell_make(&a, 0, "attn.rope");
	tb_cell_make(&b, 0, "attn.q_norm");
	assert_false(tb_cell_eq(&a, &b));
	assert_true(tb_cell_cmp(&a, &b) > 0);
	tb_cell_make(&b, 0, "attn.rope");
	assert_true(tb_cell_eq(&a, &b));
	/* a cell written without its id still equals and sorts as its name says */
	b = (tb_cell){.layer = 0};
	snprintf(b.tap, sizeof b.tap, "attn");
	tb_cell_make(&a, 0, "attn");
	assert_true(tb_cell_eq(&a, &b));
	assert_int_equal(tb_cell_cmp(&a, &b), 0);
	tb_cell_make(&a, -1, "");
	assert_true(tb_cell_eq(&a, &none));

	/* the wiring by id: attn.X is fed as attn is, layer 0's block input is embed */
	tb_cell_make(&a, 0, "attn.rope");
	assert_int_equal(tb_cell_feeders(&a, f), 1);
	assert_int_equal(f[0].tap, TB_TAP_ATTN_NORM);
	tb_cell_make(&a, 0, "block");
	assert_int_equal(tb_cell_feeders(&a, f), 3);
	assert_true(tb_feed_cell(&f[0], &a, 4, &b));
	assert_int_equal(b.id, TB_TAP_EMBED);
	assert_int_equal(b.layer, -1);
	tb_cell_make(&a, -1, "final_norm");
	assert_int_equal(tb_cell_feeders(&a, f), 1);
	assert_false(tb_feed_cell(&f[0], &a, 0, &b));
	assert_true(tb_feed_cell(&f[0], &a, 4, &b));
	assert_int_equal(b.layer, 3);
	assert_int_equal(b.id, TB_TAP_BLOCK);
	assert_string_equal(b.tap, "block");
	tb_cell_make(&a, -1, "embed");
	assert_int_equal(tb_cell_feeders(&a, f), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_builtin_conventions), cmocka_unit_test(test_rule_reported),
		cmocka_unit_test(test_onnx_names),          cmocka_unit_test(test_aux_names),
		cmocka_unit_test(test_towers),              cmocka_unit_test(test_text_model_prefixed),
		cmocka_unit_test(test_tower_cells),
		cmocka_unit_test(test_common_prefix),       cmocka_unit_test(test_map_file),
		cmocka_unit_test(test_map_errors),          cmocka_unit_test(test_missing_map_file),
		cmocka_unit_test(test_cells),               cmocka_unit_test(test_tap_ids),
	};
	return cmocka_run_group_tests_name("naming", tests, NULL, NULL);
}
