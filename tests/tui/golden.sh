#!/bin/sh
# Golden screens without a terminal: TBISECT_SCRIPT plays keys and commands
# against a curses screen drawn to /dev/null, `:save-display FILE` writes
# the screen's text, and each screen is compared exactly.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
. "${top_srcdir:-.}/tests/tui/tuilib.sh"
tui_script_setup
LINES=24
COLUMNS=80
export LINES COLUMNS

"$TBGEN" --bug pos@L2.mlp:3 "$TAP_TMP/ref" "$TAP_TMP/cand" || bail_out "tbgen failed"
top_srcdir=$(cd "$top_srcdir" && pwd)
MKDEMO=$(cd "$(dirname "$MKDEMO")" && pwd)/$(basename "$MKDEMO")
cd "$TAP_TMP" || bail_out "cd failed"
cat >script <<'KEYS'
# the first divergence, its detail, then a wider terminal and the cosine metric
f
:save-display heatmap.txt
Enter
:save-display detail.txt
Esc
resize 100x30
m
:save-display wide.txt
q
KEYS
expect_exit 1 "the script runs to q; exit 1 (diverged)" env TBISECT_SCRIPT=script "$TBISECT" ref cand

# same_screen FILE DESC: the saved screen equals the text on stdin.
same_screen() {
	cat >want.txt
	if cmp -s "$1" want.txt; then ok "$2"; else not_ok "$2" "screen differs"; diff want.txt "$1" | sed 's/^/#   /'; fi
}

same_screen heatmap.txt "heatmap after f, 80x24" <<'SCREEN'
tbisect  DIVERGED  first divergence L2.mlp pos 3  paired 23  unpaired 0/0
atol 0.0001 rtol 0.0001 diverge 0.01  ref ref  cand cand
rel_l2 1e-08 .....~~~XXXX 1e+01  .match<=1e-04 ~close Xdiverged>1e-02 -missing
            attn_norm  attn       mlp_norm   mlp        block
embed       . 0.0e+00
L0          . 0.0e+00  . 0.0e+00  . 0.0e+00  . 0.0e+00  . 0.0e+00
L1          . 0.0e+00  . 0.0e+00  . 0.0e+00  . 0.0e+00  . 0.0e+00
L2          . 0.0e+00  . 0.0e+00  . 0.0e+00 >X 3.0e-01  X 2.0e-01
L3          X 1.9e-01  X 2.0e-01  X 1.8e-01  X 1.8e-01  X 1.9e-01
final_norm  X 1.9e-01
logits      X 2.1e-01








pass 1: first divergence L2.mlp
causes of L2.mlp: weight-mapping 0.90 ...  (c: causes pane)
L2.mlp diverged: rel_l2 0.298 > diverge 0.01
rel_l2 3.0e-01 cosine 0.9586 max_abs 1.5e+00 norm_ratio 1.0446 allclose 0.3750
? help  Enter open  f first divergence  c causes  : command  q quit
SCREEN
same_screen detail.txt "detail of the first divergence, 80x24" <<'SCREEN'
L2.mlp  diverged: rel_l2 0.298 > diverge 0.01
MLP output (post-mlp)   (Esc/q back, Up/Down scroll)
ref   model.layers.2.mlp  f32 [1, 8, 64]  ref/model.layers.2.mlp.npy
cand  model.layers.2.mlp  f32 [1, 8, 64]  cand/model.layers.2.mlp.npy
statistic          ref         cand | metrics
mean          0.024528   -0.0025628 | max_abs            1.5042
std             1.3124       1.3711 | mean_abs           0.2458
min            -5.1751      -5.0506 | rel_l2             0.29759
max             3.7081       3.7081 | cosine             0.958563
L2 norm         29.701       31.026 | norm_ratio         1.0446
NaN                  0            0 | allclose_frac      0.375000
Inf                  0            0 | first_bad_position 3
worst element [0, 4, 25]  ref -1.1646  cand -2.6688   (512 elements)
error from its inputs 0 -> here 0.298: x3.91e+03 added  (the error is born here)

per position  (shown 0-7 of 8; Left/Right, < > page, p go to, f first bad)
rel_l2  ...XXXXX
cosine  ...XXXXX
           ^
glyphs  rel_l2 .<=1e-04 ~ X>1e-02   cosine .>=0.9999 ~ X<0.999
^ first bad position 3 (rel_l2 > diverge 1e-02)
pos 3: rel_l2 0.45363  cosine 0.916439  norm_ratio 1.1301
worst channels at pos 3:  index                    ref        cand      |diff|
Left/Right position  f first bad position  n next bad  Up/Down scroll  Esc back
SCREEN
same_screen wide.txt "heatmap by cosine after a resize to 100x30" <<'SCREEN'
tbisect  DIVERGED  first divergence L2.mlp pos 3  paired 23  unpaired 0/0
atol 0.0001 rtol 0.0001 diverge 0.01  ref ref  cand cand
1-cosine 1e-12 ........~XXX 1e+00  .match<=1e-04 ~close Xdiverged>1e-03 -missing
            attn_norm  attn       mlp_norm   mlp        block
embed       .  1.0000
L0          .  1.0000  .  1.0000  .  1.0000  .  1.0000  .  1.0000
L1          .  1.0000  .  1.0000  .  1.0000  .  1.0000  .  1.0000
L2          .  1.0000  .  1.0000  .  1.0000 >X  0.9586  X  0.9798
L3          X  0.9833  X  0.9809  X  0.9839  X  0.9850  X  0.9825
final_norm  X  0.9823
logits      X  0.9789














pass 1: first divergence L2.mlp
causes of L2.mlp: weight-mapping 0.90 ...  (c: causes pane)
L2.mlp diverged: rel_l2 0.298 > diverge 0.01
rel_l2 3.0e-01 cosine 0.9586 max_abs 1.5e+00 norm_ratio 1.0446 allclose 0.3750  model.layers.2.mlp
metric: cosine
SCREEN

# README's key and command list is the help screen, so the docs cannot drift.
printf '?\n:save-display help.txt\n' >help.script
expect_exit 1 "the help screen is saved at 100x120 (exit 1: diverged)" env LINES=120 COLUMNS=100 TBISECT_SCRIPT=help.script "$TBISECT" ref cand
sed -n '/^keys$/,/^cells$/p' help.txt | sed '$d' | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >help.keys
sed -n '/^<!-- help: begin -->$/,/^<!-- help: end -->$/p' "$top_srcdir/README" | sed '1d;$d' | sed 's/^    //' >readme.keys
if [ -s help.keys ] && cmp -s help.keys readme.keys; then
	ok "README lists the keys and commands exactly as the help screen"
else
	not_ok "README lists the keys and commands exactly as the help screen" "README differs from the help screen"
	diff readme.keys help.keys | sed 's/^/#   /'
fi

# README's session shows two screens at 80x24 (between "<!-- screen: NAME
# -->" and "<!-- screen: end -->"): they are what the program draws for the
# pair its commands make, so the guide cannot go stale.
mkdir readme && (cd readme && "$MKDEMO" --bug rope-style ref cand >/dev/null) || bail_out "mkdemo failed"
printf 'f\n:save-display ../heatmap.txt\nEnter\n:save-display ../detail.txt\nq\nq\n' >readme/script
expect_exit 1 "README's session: the script runs (exit 1: diverged)" sh -c 'cd readme && TBISECT_SCRIPT=script "$1" ref cand' x "$TBISECT"
for screen in heatmap detail; do
	sed -n "/^<!-- screen: $screen -->\$/,/^<!-- screen: end -->\$/p" "$top_srcdir/README" | sed '1d;$d' | sed 's/^    //' >"readme.$screen"
	if [ -s "readme.$screen" ] && cmp -s "readme.$screen" "$screen.txt"; then
		ok "README's $screen screen is the program's, 80x24"
	else
		not_ok "README's $screen screen is the program's, 80x24" "README differs"
		diff "readme.$screen" "$screen.txt" | sed 's/^/#   /'
	fi
done

# --keys prints the same tables for the man page: every action and command once.
"$TBISECT" --keys >keys.tsv
check_that "--keys: one row per action of the keymap" test "$(grep -c '^key	' keys.tsv)" = "$(grep -c '^	X(' "$top_srcdir/ui/tui/keymap.h")"
check_that "--keys: one row per prompt command" test "$(grep -c '^command	' keys.tsv)" = "$(grep -c '{\.name = ' "$top_srcdir/ui/tui/cmdline.c")"
check_that "--keys: each action's keys and name are in README's list" sh -c '
	awk -F "\t" "\$1 == \"key\" { print \$2 \"\t\" \$3 }" keys.tsv | while IFS="	" read -r k a; do
		kk=$(printf "%s" "$k" | sed "s/[][\\.*^\$]/\\\\&/g")
		grep -q "^  $kk  *$a " readme.keys || { echo "missing: $k $a"; exit 1; }
	done'

printf 'f\nNoSuchKey\n' >bad
expect_error_msg 2 "NoSuchKey" "script: unknown key" "an unknown key in a script is an error" env TBISECT_SCRIPT=bad "$TBISECT" ref cand
expect_error_msg 2 "nosuch.script" "cannot open the script" "a missing script is an error" env TBISECT_SCRIPT=nosuch.script "$TBISECT" ref cand

tap_done
