#!/bin/sh
# Source layout rules that keep the core a library and the folders a
# picture of the architecture (doc/architecture.md):
#   - src/ never touches the terminal, never prints or exits;
#   - every .c includes config.h first, no header does;
#   - every header opens with a comment saying what the module does;
#   - each folder of src/ includes only the folders below it (no include
#     cycle): base < tensor < formats < model < compare < diagnose < run;
#   - in ui/, the command line (cli) may use the interactive view (tui),
#     never the other way; only the loop knows the screens; a screen never
#     includes another one;
#   - no module of src/ or ui/ reaches itself through includes (a module
#     is a .c and its .h: an edge from X.c to Y.h makes X depend on Y);
#   - a header has its .c, but for a few listed interfaces;
#   - doc/architecture.md names every module;
#   - no module's code calls into a module that calls it, nor a folder's
#     into a folder that calls it (the objects' symbols, read with nm).
# Files are found with find, and every list is checked to be non-empty,
# so a move cannot make a rule pass vacuously.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
top=$top_srcdir
T=$TAP_TMP

# files_matching ERE LIST: the files named in LIST with a line matching ERE;
# a file grep cannot read stops the script (it must not pass as "no match").
files_matching() {
	while read -r _f; do
		_rc=0
		grep -q -E -- "$1" "$_f" || _rc=$?
		case $_rc in
		0) echo "$_f" ;;
		1) ;;
		*) echo "layout.sh: grep failed on $_f" >&2; return 2 ;;
		esac
	done <"$2"
}

find "$top/src" -name '*.[ch]' | sort >"$T/src"
find "$top/src" "$top/ui" -name '*.c' | sort >"$T/c"
find "$top/src" "$top/ui" -name '*.h' | sort >"$T/h"
for l in src c h; do
	if [ "$(wc -l <"$T/$l")" -ge 10 ]; then ok "found the $l files ($(wc -l <"$T/$l"))"; else not_ok "too few $l files found"; fi
done

# The library's folders, lowest first; each may include only those before it.
src_layers="base tensor formats model compare diagnose run"
for d in $src_layers; do
	if [ -d "$top/src/$d" ]; then ok "src/$d exists"; else not_ok "src/$d is missing"; fi
done
if [ -z "$(find "$top/src" -maxdepth 1 -name '*.[ch]')" ]; then ok "src/ holds folders only"; else not_ok "loose files in src/"; fi

hits=$(files_matching '#include *[<"](n?curses|ncursesw/|readline/|term\.h)' "$T/src")
if [ -z "$hits" ]; then ok "src/ includes no curses or readline header"; else not_ok "src/ includes terminal headers: $hits"; fi

grep '\.c$' "$T/src" >"$T/src.c"
hits=$(files_matching '\b(printf|puts|perror|exit)\(' "$T/src.c")
if [ -z "$hits" ]; then ok "src/ never prints or exits"; else not_ok "src/ prints or exits: $hits"; fi

while read -r f; do
	first=$(grep -m1 '^#include' "$f" || true)
	rel=${f#"$top"/}
	if [ "$first" = '#include "config.h"' ]; then ok "$rel includes config.h first"; else not_ok "$rel does not include config.h first"; fi
done <"$T/c"

while read -r h; do
	rel=${h#"$top"/}
	if head -n 1 "$h" | grep -q '^/\*'; then ok "$rel opens with a comment"; else not_ok "$rel lacks an opening comment"; fi
	if grep -q 'config\.h' "$h"; then not_ok "$rel includes config.h"; else ok "$rel leaves config.h to .c files"; fi
done <"$T/h"

# rank DIR: the place of a library folder in $src_layers (0 if unknown).
rank() {
	_i=0
	for _d in $src_layers; do
		_i=$((_i + 1))
		[ "$_d" = "$1" ] && echo "$_i" && return
	done
	echo 0
}

# Every quoted include of the library names its folder and goes down.
while read -r f; do
	rel=${f#"$top"/src/}
	from=${rel%%/*}
	rf=$(rank "$from")
	grep -o '^#include "[^"]*"' "$f" | sed 's/#include "//; s/"$//' | while read -r inc; do
		[ "$inc" = config.h ] && continue
		to=${inc%%/*}
		if [ "$to" = "$inc" ]; then
			echo "src/$rel: #include \"$inc\" names no folder"
			continue
		fi
		rt=$(rank "$to")
		if [ "$rt" -eq 0 ] || [ "$rt" -gt "$rf" ]; then
			echo "src/$rel ($from) includes $inc ($to)"
		fi
	done
done <"$T/src" >"$T/up"
if [ ! -s "$T/up" ]; then ok "every src/ include names its folder and goes down the layers"; else not_ok "src/ includes against the layers: $(cat "$T/up")"; fi

# ui: cli may use tui; tui never uses cli; only tui/loop.c includes the
# screens' table; a screen includes no other screen.
find "$top/ui" -name '*.[ch]' | sort >"$T/ui"
if [ "$(wc -l <"$T/ui")" -ge 10 ]; then ok "found the ui files ($(wc -l <"$T/ui"))"; else not_ok "too few ui files found"; fi
for d in cli tui tui/screens; do
	if [ -d "$top/ui/$d" ]; then ok "ui/$d exists"; else not_ok "ui/$d is missing"; fi
done
while read -r f; do
	rel=${f#"$top"/ui/}
	grep -o '^#include "[^"]*"' "$f" | sed 's/#include "//; s/"$//' | while read -r inc; do
		case "$rel:$inc" in
		*:config.h) ;;
		tui/*:cli/*) echo "ui/$rel includes the command line's $inc" ;;
		tui/screens/*:tui/screens/screens.h) ;;
		tui/screens/*:tui/screens/*) echo "ui/$rel includes another screen, $inc" ;;
		tui/loop.c:tui/screens/screens.h) ;;
		*:tui/screens/*) echo "ui/$rel includes the screens ($inc); only the loop may" ;;
		*:*/*) ;;
		*) echo "ui/$rel: #include \"$inc\" names no folder" ;;
		esac
	done
done <"$T/ui" >"$T/uibad"
if [ ! -s "$T/uibad" ]; then ok "ui includes go one way: cli -> tui -> screens only from the loop"; else not_ok "ui includes: $(cat "$T/uibad")"; fi

# The module graph of src/ and ui/ has no cycle (tsort names one if it does).
cat "$T/src" "$T/ui" | while read -r f; do
	case "$f" in "$top"/src/*) base=src ;; *) base=ui ;; esac
	from=${f#"$top"/}
	from=${from%.[ch]}
	grep -o '^#include "[^"]*/[^"]*\.h"' "$f" | sed 's/#include "//; s/\.h"$//' | while read -r inc; do
		[ "$base/$inc" = "$from" ] || echo "$from $base/$inc"
	done
done >"$T/edges"
if [ -s "$T/edges" ]; then ok "include graph read ($(wc -l <"$T/edges") edges)"; else not_ok "no include edges found"; fi
if tsort "$T/edges" >/dev/null 2>"$T/cycle"; then ok "no include cycle among the modules of src/ and ui/"; else not_ok "include cycle: $(tr '\n' ' ' <"$T/cycle")"; fi

# Header = module: a header has its .c of the same name, except the
# interfaces that several files implement, each named here with its reason.
interfaces="
src/base/simd_stamp.h		a kernel file stamped per instruction set, included by the kernels
src/diagnose/replay_ops.h	the replay ops' interface: one op per replay_*.c
ui/cli/commands.h		the commands' interface: one command per ui/cli/*.c
ui/tui/screen.h			the screens' interface: one screen per ui/tui/screens/*.c
ui/tui/screens/screens.h	the screens' list, generated from TB_SCREEN_LIST
"
while read -r h; do
	rel=${h#"$top"/}
	if [ -f "${h%.h}.c" ] || printf '%s\n' "$interfaces" | grep -q "^$rel	"; then :; else echo "$rel"; fi
done <"$T/h" >"$T/lone"
if [ ! -s "$T/lone" ]; then ok "every header has its .c, or is a listed interface"; else not_ok "headers without a .c: $(cat "$T/lone")"; fi
printf '%s\n' "$interfaces" | while read -r h _; do
	[ -z "$h" ] || [ -f "$top/$h" ] || echo "$h"
done >"$T/gone"
if [ ! -s "$T/gone" ]; then ok "every listed interface exists"; else not_ok "listed interfaces that are gone: $(cat "$T/gone")"; fi

# doc/architecture.md maps every module: each .c's name is in it.
sed 's|.*/||; s|\.c$||' "$T/c" | sort -u | while read -r m; do
	grep -qw -- "$m" "$top/doc/architecture.md" || echo "$m"
done >"$T/unmapped"
if [ ! -s "$T/unmapped" ]; then ok "doc/architecture.md names every module"; else not_ok "modules doc/architecture.md does not name: $(tr '\n' ' ' <"$T/unmapped")"; fi

# The link graph, read from the built objects (nm): which folder's code
# calls which.  A cycle between folders is a layer calling up.
find "$top_builddir/src" "$top_builddir/ui" -name '*.o' 2>/dev/null | sort >"$T/objs"
if [ "$(wc -l <"$T/objs")" -ge 50 ] && command -v nm >/dev/null; then
	: >"$T/defs"
	: >"$T/uses"
	while read -r o; do
		# the module: the object's folder and the source's name (automake
		# names objects PROGRAM-NAME.o)
		m=${o#"$top_builddir"/}
		f=${m##*/}
		m=${m%/*}/${f##*-}
		m=${m%.o}
		nm -g --defined-only "$o" | awk -v m="$m" 'NF == 3 && $2 ~ /[TDBR]/ { print $3, m }' >>"$T/defs"
		nm -u "$o" | awk -v m="$m" '{ print $2, m }' >>"$T/uses"
	done <"$T/objs"
	sort -u "$T/defs" -o "$T/defs"
	sort -u "$T/uses" -o "$T/uses"
	join "$T/uses" "$T/defs" | awk '$2 != $3 { print $2, $3 }' | sort -u >"$T/mlinks"
	# the screens are rows of the loop's table: one folder with it
	sed -e 's|/[^/ ]* | |' -e 's|/[^/ ]*$||' -e 's|ui/tui/screens|ui/tui|g' "$T/mlinks" | awk '$1 != $2' | sort -u >"$T/links"
	if [ -s "$T/links" ]; then ok "link graph read ($(wc -l <"$T/mlinks") module edges, $(wc -l <"$T/links") between folders)"; else not_ok "no link edges between folders"; fi
	if tsort "$T/links" >/dev/null 2>"$T/lcycle"; then ok "no link cycle between the folders of src/ and ui/"; else not_ok "link cycle: $(tr '\n' ' ' <"$T/lcycle")"; fi
	if tsort "$T/mlinks" >/dev/null 2>"$T/mcycle"; then ok "no link cycle between the modules of src/ and ui/"; else not_ok "link cycle: $(tr '\n' ' ' <"$T/mcycle")"; fi
else
	skip "no built objects or no nm: the link graph is not read" 3
fi

tap_done
