/*
 * The keymap (ui/tui/keymap.c) without a terminal: every key label reads
 * back as its key, every action has a key, no key is bound twice, keys map
 * to their actions, and an action's keys are listed in the table's order.
 */
#include "config.h"

#include <curses.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tui/keymap.h"

/* Every bound key's label parses back to the key. */
static void test_label_round_trip(void **state)
{
	char label[32];
	(void)state;

	for (size_t i = 0; i < tb_n_bindings; i++) {
		int key = tb_bindings[i].key;
		tb_key_label(key, label, sizeof label);
		if (tb_key_parse(label) != key)
			fail_msg("key %d is labelled \"%s\", which parses as %d", key, label, tb_key_parse(label));
	}
	/* Every control key and printable character too, but 28 .. 31: their
	 * labels ("Ctrl-\\" ...) tb_key_parse does not read back, and no
	 * binding uses them. */
	for (int key = 1; key < 127; key++) {
		if (key >= 28 && key <= 31)
			continue;
		tb_key_label(key, label, sizeof label);
		if (tb_key_parse(label) != key)
			fail_msg("key %d is labelled \"%s\", which parses as %d", key, label, tb_key_parse(label));
	}
}

static void test_labels(void **state)
{
	static const struct {
		int key;
		const char *label;
	} want[] = {
		{KEY_UP, "Up"}, {KEY_NPAGE, "PgDn"}, {'\n', "Enter"}, {KEY_ENTER, "KpEnter"}, {27, "Esc"},
		{3, "Ctrl-C"}, {'j', "j"}, {' ', "Space"}, {KEY_MOUSE, "click"}, {KEY_F(1), "F1"}, {'G', "G"},
	};
	char label[32];
	(void)state;

	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		assert_string_equal(tb_key_label(want[i].key, label, sizeof label), want[i].label);
		assert_int_equal(tb_key_parse(want[i].label), want[i].key);
	}
	assert_string_equal(tb_key_label(KEY_F(5), label, sizeof label), "key 269");
	assert_int_equal(tb_key_parse("key 269"), -1);
	assert_int_equal(tb_key_parse("Ctrl-c"), -1);
	assert_int_equal(tb_key_parse("Ctrl-CC"), -1);
	assert_int_equal(tb_key_parse("jj"), -1);
	assert_int_equal(tb_key_parse(""), -1);
	assert_int_equal(tb_key_parse("PageDown"), -1);
}

/* Every action can be reached from the keyboard (none is ':'-only). */
static void test_every_action_has_a_key(void **state)
{
	(void)state;

	for (int a = TB_ACT_NONE + 1; a < TB_ACT_COUNT; a++) {
		size_t n = 0;
		for (size_t i = 0; i < tb_n_bindings; i++)
			n += tb_bindings[i].action == (tb_action)a;
		if (n == 0)
			fail_msg("action %s has no key", tb_action_infos[a].name);
		assert_true(strlen(tb_action_infos[a].help) > 0);
	}
	for (size_t i = 0; i < tb_n_bindings; i++)
		assert_true(tb_bindings[i].action > TB_ACT_NONE && tb_bindings[i].action < TB_ACT_COUNT);
}

/* A key means one thing: tb_key_action gives the table's action for it. */
static void test_key_action(void **state)
{
	(void)state;

	for (size_t i = 0; i < tb_n_bindings; i++) {
		for (size_t j = i + 1; j < tb_n_bindings; j++)
			if (tb_bindings[i].key == tb_bindings[j].key)
				fail_msg("key %d is bound twice", tb_bindings[i].key);
		assert_int_equal(tb_key_action(tb_bindings[i].key), tb_bindings[i].action);
	}
	assert_int_equal(tb_key_action('q'), TB_ACT_QUIT);
	assert_int_equal(tb_key_action(KEY_DOWN), TB_ACT_DOWN);
	assert_int_equal(tb_key_action('\r'), TB_ACT_OPEN);
	assert_int_equal(tb_key_action('x'), TB_ACT_NONE);
	assert_int_equal(tb_key_action(KEY_F(5)), TB_ACT_NONE);
}

static void test_action_names(void **state)
{
	(void)state;

	assert_string_equal(tb_action_infos[TB_ACT_FIRST_DIV].name, "first-divergence");
	assert_string_equal(tb_action_infos[TB_ACT_CLICK].name, "select");
	for (int a = 0; a < TB_ACT_COUNT; a++)
		for (int b = a + 1; b < TB_ACT_COUNT; b++)
			assert_string_not_equal(tb_action_infos[a].name, tb_action_infos[b].name);
}

static void test_action_keys(void **state)
{
	char buf[64], small[6];
	(void)state;

	tb_action_keys(TB_ACT_UP, buf, sizeof buf);
	assert_string_equal(buf, "k Up");
	tb_action_keys(TB_ACT_PAGE_DOWN, buf, sizeof buf);
	assert_string_equal(buf, "PgDn Ctrl-F Space");
	tb_action_keys(TB_ACT_OPEN, buf, sizeof buf);
	assert_string_equal(buf, "Enter Return KpEnter");
	tb_action_keys(TB_ACT_NONE, buf, sizeof buf);
	assert_string_equal(buf, "");
	/* Cut to the buffer, still a string. */
	tb_action_keys(TB_ACT_PAGE_DOWN, small, sizeof small);
	assert_string_equal(small, "PgDn ");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_label_round_trip),
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_every_action_has_a_key),
		cmocka_unit_test(test_key_action),
		cmocka_unit_test(test_action_names),
		cmocka_unit_test(test_action_keys),
	};
	return cmocka_run_group_tests_name("keymap", tests, NULL, NULL);
}
