#include "config.h"

#include <curses.h>
#include <stdio.h>
#include <string.h>

#include "tui/keymap.h"

const tb_action_info tb_action_infos[TB_ACT_COUNT] = {
	[TB_ACT_NONE] = {"none", ""},
#define X(id, name, help) [TB_ACT_##id] = {name, help},
	TB_ACTIONS(X)
#undef X
};

#define CTRL(c) ((c) & 0x1f)
#define KEY_ESC 27

/* The key list of the help screen and the man page, in this order. */
const tb_binding tb_bindings[] = {
	{'k', TB_ACT_UP},
	{KEY_UP, TB_ACT_UP},
	{'j', TB_ACT_DOWN},
	{KEY_DOWN, TB_ACT_DOWN},
	{'h', TB_ACT_LEFT},
	{KEY_LEFT, TB_ACT_LEFT},
	{'l', TB_ACT_RIGHT},
	{KEY_RIGHT, TB_ACT_RIGHT},
	{'<', TB_ACT_PAGE_LEFT},
	{'>', TB_ACT_PAGE_RIGHT},
	{'p', TB_ACT_GOTO_POS},
	{KEY_PPAGE, TB_ACT_PAGE_UP},
	{CTRL('b'), TB_ACT_PAGE_UP},
	{KEY_NPAGE, TB_ACT_PAGE_DOWN},
	{CTRL('f'), TB_ACT_PAGE_DOWN},
	{' ', TB_ACT_PAGE_DOWN},
	{'g', TB_ACT_TOP},
	{KEY_HOME, TB_ACT_TOP},
	{'G', TB_ACT_BOTTOM},
	{KEY_END, TB_ACT_BOTTOM},
	{'f', TB_ACT_FIRST_DIV},
	{'n', TB_ACT_NEXT_DIV},
	{'N', TB_ACT_PREV_DIV},
	{'m', TB_ACT_METRIC},
	{'z', TB_ACT_FOLD},
	{'\n', TB_ACT_OPEN},
	{'\r', TB_ACT_OPEN},
	{KEY_ENTER, TB_ACT_OPEN},
	{'c', TB_ACT_CAUSES},
	{'R', TB_ACT_REPLAY},
	{'u', TB_ACT_UNPAIRED},
	{'M', TB_ACT_SUGGEST},
	{'y', TB_ACT_CONFIRM},
	{'H', TB_ACT_HISTORY},
	{'r', TB_ACT_RELOAD},
	{'[', TB_ACT_PREV_STEP},
	{']', TB_ACT_NEXT_STEP},
	{'t', TB_ACT_TOWER},
	{'?', TB_ACT_HELP},
	{KEY_F(1), TB_ACT_HELP},
	{':', TB_ACT_PROMPT},
	{'/', TB_ACT_SEARCH},
	{CTRL('l'), TB_ACT_REDRAW},
	{CTRL('z'), TB_ACT_SUSPEND},
	{KEY_ESC, TB_ACT_BACK},
	{KEY_BACKSPACE, TB_ACT_BACK},
	{'q', TB_ACT_QUIT},
	{CTRL('c'), TB_ACT_INTERRUPT},
	{KEY_MOUSE, TB_ACT_CLICK},
};
const size_t tb_n_bindings = sizeof tb_bindings / sizeof tb_bindings[0];

/* Names of the keys that are not one printable character. */
static const struct {
	int key;
	const char *label;
} names[] = {
	{KEY_UP, "Up"}, {KEY_DOWN, "Down"}, {KEY_LEFT, "Left"}, {KEY_RIGHT, "Right"},
	{KEY_PPAGE, "PgUp"}, {KEY_NPAGE, "PgDn"}, {KEY_HOME, "Home"}, {KEY_END, "End"},
	{KEY_ENTER, "KpEnter"}, {'\n', "Enter"}, {'\r', "Return"}, {KEY_ESC, "Esc"},
	{KEY_BACKSPACE, "Backspace"}, {' ', "Space"}, {KEY_MOUSE, "click"}, {KEY_F(1), "F1"},
};


tb_action tb_key_action(int key)
{
	for (size_t i = 0; i < tb_n_bindings; i++)
		if (tb_bindings[i].key == key)
			return tb_bindings[i].action;
	return TB_ACT_NONE;
}

const char *tb_key_label(int key, char *buf, size_t size)
{
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		if (names[i].key == key) {
			snprintf(buf, size, "%s", names[i].label);
			return buf;
		}
	}
	if (key > 0 && key < 32)
		snprintf(buf, size, "Ctrl-%c", key + 'A' - 1);
	else if (key > 32 && key < 127)
		snprintf(buf, size, "%c", key);
	else
		snprintf(buf, size, "key %d", key);
	return buf;
}

void tb_action_keys(tb_action a, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < tb_n_bindings && len + 1 < size; i++) {
		char k[32];
		if (tb_bindings[i].action != a)
			continue;
		len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? " " : "",
					tb_key_label(tb_bindings[i].key, k, sizeof k));
	}
	if (len >= size && size > 0)
		buf[size - 1] = '\0';
}

int tb_key_parse(const char *name)
{
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(names[i].label, name))
			return names[i].key;
	if (!strncmp(name, "Ctrl-", 5) && name[5] >= 'A' && name[5] <= 'Z' && !name[6])
		return name[5] - 'A' + 1;
	if (name[0] > 32 && name[0] < 127 && !name[1])
		return name[0];
	return -1;
}
