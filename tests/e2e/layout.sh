#!/bin/sh
# Source layout rules that keep the core a library (STYLE.md, DESIGN.md):
# src/ never touches the terminal, every .c includes config.h first, every
# header opens with a comment saying what the module does.
set -u
top=${top_srcdir:-.}
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }

hits=$(grep -lE '#include *[<"](n?curses|ncursesw/|readline/|term\.h)' "$top"/src/*.[ch] 2>/dev/null)
if [ -z "$hits" ]; then ok "src/ includes no curses or readline header"; else bad "src/ includes terminal headers: $hits"; fi

hits=$(grep -lE '\b(printf|puts|perror|exit)\(' "$top"/src/*.c 2>/dev/null)
if [ -z "$hits" ]; then ok "src/ never prints or exits"; else bad "src/ prints or exits: $hits"; fi

for f in "$top"/src/*.c "$top"/ui/*.c; do
	first=$(grep -m1 '^#include' "$f")
	if [ "$first" = '#include "config.h"' ]; then ok "$(basename "$f") includes config.h first"; else bad "$(basename "$f") does not include config.h first"; fi
done

for h in "$top"/src/*.h "$top"/ui/*.h; do
	if head -n 1 "$h" | grep -q '^/\*'; then ok "$(basename "$h") opens with a comment"; else bad "$(basename "$h") lacks an opening comment"; fi
	if grep -q 'config\.h' "$h"; then bad "$(basename "$h") includes config.h"; else ok "$(basename "$h") leaves config.h to .c files"; fi
done
echo "1..$n"
[ "$fails" -eq 0 ]
