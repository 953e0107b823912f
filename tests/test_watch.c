/*
 * The --watch watcher (ui/tui/watch.c) on a temp tree, with the clock set
 * by the test (ui_watch_poll takes the time): a change is ready once the
 * settle delay has passed with nothing happening, never while a file is
 * still open for writing however long that takes, and once only; new
 * subdirectories are watched, hidden files are no change, a whole tree
 * replaced counts, and a single-file tree ignores its neighbours.
 * inotify queues an event before the call that caused it returns, so no
 * step here waits for anything.
 */
#include "config.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"
#include "tui/watch.h"

#define SETTLE 0.3

static const char *state_name(ui_watch_state s)
{
	static const char *const names[] = {"quiet", "settling", "writing", "ready"};

	return names[s];
}

#define assert_state(w, now, want) \
	assert_string_equal(state_name(ui_watch_poll((w), (now))), state_name(want))

static ui_watch *watch(const char *path)
{
	const char *paths[1] = {path};
	char msg[256];
	ui_watch *w = ui_watch_new(paths, 1, SETTLE, msg, sizeof msg);

	if (!w)
		fail_msg("%s", msg);
	return w;
}

static void test_quiet_until_a_change(void **state)
{
	const char *dir = tu_tmpdir();
	ui_watch *w;
	(void)state;

	tu_write_str(tu_path(dir, "a.npy"), "x");
	w = watch(dir);
	assert_state(w, 0, UI_WATCH_QUIET);
	assert_state(w, 1000, UI_WATCH_QUIET);
	assert_string_equal(ui_watch_writing(w), "");
	ui_watch_free(w);
}

/* Ready when the settle delay has passed since the last event, once. */
static void test_settle(void **state)
{
	const char *dir = tu_tmpdir();
	ui_watch *w;
	(void)state;

	w = watch(dir);
	tu_write_str(tu_path(dir, "a.npy"), "x");
	assert_state(w, 10, UI_WATCH_SETTLING);
	assert_state(w, 10 + SETTLE / 2, UI_WATCH_SETTLING);
	/* Another change starts the delay again. */
	tu_write_str(tu_path(dir, "b.npy"), "y");
	assert_state(w, 10.2, UI_WATCH_SETTLING);
	assert_state(w, 10.2 + SETTLE - 0.01, UI_WATCH_SETTLING);
	assert_state(w, 10.2 + SETTLE, UI_WATCH_READY);
	assert_state(w, 11, UI_WATCH_QUIET);
	assert_state(w, 100, UI_WATCH_QUIET);
	ui_watch_free(w);
}

/* A file open for writing holds the change back whatever the clock says. */
static void test_writing(void **state)
{
	const char *dir = tu_tmpdir();
	char want[4200];
	ui_watch *w;
	int fd;
	(void)state;

	tu_write_str(tu_path(dir, "big.safetensors"), "old");
	w = watch(dir);
	fd = open(tu_path(dir, "big.safetensors"), O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "half", 4), 4);
	assert_state(w, 1, UI_WATCH_WRITING);
	snprintf(want, sizeof want, "%s/big.safetensors", dir);
	assert_string_equal(ui_watch_writing(w), want);
	assert_state(w, 1000, UI_WATCH_WRITING);
	assert_int_equal(write(fd, " done", 5), 5);
	assert_state(w, 2000, UI_WATCH_WRITING);
	assert_int_equal(close(fd), 0);
	/* The close is the last event: the delay runs from it. */
	assert_state(w, 3000, UI_WATCH_SETTLING);
	assert_string_equal(ui_watch_writing(w), "");
	assert_state(w, 3000 + SETTLE / 2, UI_WATCH_SETTLING);
	assert_state(w, 3000 + 2 * SETTLE, UI_WATCH_READY);
	ui_watch_free(w);
}

static void test_new_subdirectory(void **state)
{
	const char *dir = tu_tmpdir();
	ui_watch *w;
	(void)state;

	w = watch(dir);
	assert_int_equal(mkdir(tu_path(dir, "shard"), 0700), 0);
	assert_state(w, 1, UI_WATCH_SETTLING);
	assert_state(w, 2, UI_WATCH_READY);
	tu_write_str(tu_path(dir, "shard/x.npy"), "x");
	assert_state(w, 3, UI_WATCH_SETTLING);
	assert_state(w, 4, UI_WATCH_READY);
	ui_watch_free(w);
}

/* Hidden files are no part of a tree. */
static void test_hidden_files(void **state)
{
	const char *dir = tu_tmpdir();
	ui_watch *w;
	(void)state;

	w = watch(dir);
	tu_write_str(tu_path(dir, ".cache"), "x");
	assert_int_equal(remove(tu_path(dir, ".cache")), 0);
	assert_state(w, 1, UI_WATCH_QUIET);
	assert_state(w, 100, UI_WATCH_QUIET);
	ui_watch_free(w);
}

/* The tree removed and made again (rm -rf, mv): the new one is watched. */
static void test_tree_replaced(void **state)
{
	const char *dir = tu_tmpdir();
	char tree[4096], fresh[4096];
	ui_watch *w;
	(void)state;

	snprintf(tree, sizeof tree, "%s/cand", dir);
	snprintf(fresh, sizeof fresh, "%s/cand.new", dir);
	tu_write_str(tu_path(tree, "a.npy"), "x");
	tu_write_str(tu_path(fresh, "a.npy"), "y");
	w = watch(tree);
	assert_int_equal(remove(tu_path(tree, "a.npy")), 0);
	assert_int_equal(rmdir(tree), 0);
	assert_int_equal(rename(fresh, tree), 0);
	assert_state(w, 1, UI_WATCH_SETTLING);
	assert_state(w, 2, UI_WATCH_READY);
	/* Files of the new tree are watched. */
	tu_write_str(tu_path(tree, "a.npy"), "z");
	assert_state(w, 3, UI_WATCH_SETTLING);
	assert_state(w, 4, UI_WATCH_READY);
	/* A sibling of the tree is not part of it. */
	tu_write_str(tu_path(dir, "notes.txt"), "n");
	assert_state(w, 5, UI_WATCH_QUIET);
	ui_watch_free(w);
}

/* A single-file tree: its own changes count, its neighbours' do not. */
static void test_single_file(void **state)
{
	const char *dir = tu_tmpdir();
	char file[4096];
	ui_watch *w;
	(void)state;

	snprintf(file, sizeof file, "%s/dump.safetensors", dir);
	tu_write_str(file, "x");
	tu_write_str(tu_path(dir, "other.safetensors"), "o");
	w = watch(file);
	tu_write_str(tu_path(dir, "other.safetensors"), "p");
	assert_state(w, 1, UI_WATCH_QUIET);
	tu_write_str(file, "y");
	assert_state(w, 2, UI_WATCH_SETTLING);
	assert_state(w, 3, UI_WATCH_READY);
	ui_watch_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quiet_until_a_change),
		cmocka_unit_test(test_settle),
		cmocka_unit_test(test_writing),
		cmocka_unit_test(test_new_subdirectory),
		cmocka_unit_test(test_hidden_files),
		cmocka_unit_test(test_tree_replaced),
		cmocka_unit_test(test_single_file),
	};
	return cmocka_run_group_tests_name("watch", tests, NULL, NULL);
}
