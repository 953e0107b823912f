#!/bin/sh
# check --html FILE: the self-contained HTML report.  Read as XML (it is
# well-formed), its cells, first divergence, causes and per-position strips
# must be check --json's; no URL is in it; names from the dumps stay text,
# whatever they hold; equal inputs give equal bytes; a 128-layer model
# with sub-taps stays under 2 MB.  Where Debian's chromium is installed the
# report is loaded headless: no console message, the DOM after its script
# ran holds the same facts, and the screenshot is not blank.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP
PY=$(find_python xml.etree.ElementTree) || {
	echo "1..0 # SKIP no python3 to read the report with"
	TAP_ENDED=1
	exit 0
}

# facts HTML: what the report says, one "key value" line each, read by an
# XML parser (it fails on markup that is not well-formed).
facts() {
	"$PY" - "$1" <<'PY'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
def by_id(i):
    return next((e for e in root.iter() if e.get("id") == i), None)
cells = [e for e in root.iter("g") if e.get("class") == "cell"]
print("cells", len(cells))
print("first", by_id("first-divergence").get("data-cell") or "null")
causes = [e.get("data-cause") for e in root.iter("li") if e.get("class") == "cause"]
print("cause0", causes[0] if causes else "none")
print("causes", len(causes))
print("verdict", by_id("verdict").get("data-verdict"))
for tr in root.iter("tr"):
    if tr.get("data-cell"):
        strip = next((td.text or "" for td in tr if td.get("class") == "strip"), "")
        print("row", tr.get("data-cell"), tr.get("data-status"), tr.get("data-rel_l2", "-"), strip or "-")
print("scripts", len(list(root.iter("script"))))
print("external", sum(1 for e in root.iter() for k, v in e.attrib.items() if k in ("src", "href") and not v.startswith("#")))
PY
}

# json_rows JSON: "row CELL STATUS REL_L2 STRIP-FIRST-X" per cell of check --json.
json_rows() {
	"$PY" - "$1" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
for c in rep["cells"]:
    name = c["tap"] if c["layer"] is None else "L%d.%s" % (c["layer"], c["tap"])
    r = c.get("rel_l2")
    print("row", name, c["status"], "-" if c["status"] == "missing" else ("%.4g" % r if r is not None else "nan"),
          "-" if c.get("first_bad_position") is None else c["first_bad_position"])
PY
}

"$MKDEMO" --bug rope-style "$T/ref" "$T/cand" >/dev/null || bail_out "mkdemo failed"
expect_exit 1 "check --html: exit 1, as check" "$TBISECT" check --no-history --html "$T/r.html" "$T/ref" "$T/cand"
check_that "the text report still goes to standard output" grep -q '^verdict: diverged$' "$TAP_OUT"
expect_exit 1 "check --json for the same pair" "$TBISECT" check --json --no-history "$T/ref" "$T/cand"
cp "$TAP_OUT" "$T/r.json"
facts "$T/r.html" >"$T/facts" || bail_out "the report is not well-formed XML"
ok "the report is well-formed (an XML parser reads it)"
fact() { sed -n "s/^$1 //p" "$T/facts" | head -n 1; }
check_that "the heatmap has a cell per cell of the JSON ($(fact cells))" test "$(fact cells)" = "$(json_get 'cells.#')"
check_that "the first divergence is the JSON's" test "$(fact first)" = "$(json_get first_divergence.cell)"
check_that "the top cause is the JSON's" test "$(fact cause0)" = "$(json_get causes.0.id)"
check_that "every cause is listed" test "$(fact causes)" = "$(json_get 'causes.#')"
check_that "the verdict is the JSON's" test "$(fact verdict)" = "$(json_get verdict)"
# Each row: its status and rel_l2 are the JSON's, and its strip's first X
# is the JSON's first bad position.
"$PY" - "$T/facts" "$T/rows.json" <<'PY' >"$T/rows.html" || bail_out "rows"
import sys
for line in open(sys.argv[1]):
    if line.startswith("row "):
        _, cell, status, rel, strip = line.split()
        first = strip.find("X") if strip != "-" else -1
        print("row", cell, status, rel, "-" if first < 0 else first)
PY
json_rows "$T/r.json" >"$T/rows.json"
check_that "every cell: status, rel_l2 and first bad position as in the JSON" cmp -s "$T/rows.html" "$T/rows.json"
check_that "two scripts: the palette and the page's own" test "$(fact scripts)" -eq 2
check_that "no src or href leaves the page" test "$(fact external)" -eq 0
check_that "no URL anywhere in the file" sh -c "! grep -E -i -q 'https?:|ftp:|file:|//[a-z0-9]' '$T/r.html'"
check_that "the command line is in the header" grep -q "tbisect check --no-history --html $T/r.html $T/ref $T/cand" "$T/r.html"

# The first divergence in detail, read again from the dumps.
check_that "detail: the first divergence's section" grep -q '<h2>The first divergence, L0.attn</h2>' "$T/r.html"
check_that "detail: its strips, position 0 matching" grep -q 'class="strip">rel_l2  \.XXXXXXXXXXXXXXX$' "$T/r.html"
check_that "detail: its first bad position" grep -q '^first bad position 1</pre>$' "$T/r.html"
check_that "detail: ten worst elements, the worst the JSON's" sh -c '
	w=$(sed -n "/<h3>Worst elements</,/<\/table>/p" "$1" | grep -c "^<tr><td>\[")
	first=$(sed -n "/<h3>Worst elements</,/<\/table>/p" "$1" | grep -m1 "^<tr><td>\[" | sed "s/^<tr><td>\(\[[^]]*\]\).*/\1/")
	test "$w" -eq 10 && test "$first" = "[$2]"' x "$T/r.html" "$("$JSONQ" "$T/r.json" cells.2.worst.index.0), $("$JSONQ" "$T/r.json" cells.2.worst.index.1), $("$JSONQ" "$T/r.json" cells.2.worst.index.2)"
check_that "detail: the worst channels at the first bad position" grep -q '<h3>Worst channels at position 1</h3>' "$T/r.html"
check_that "detail: the attention output has no heads, and says which taps do" \
	grep -q 'no heads after o_proj, which mixes them' "$T/r.html"
"$MKDEMO" --sub --bug qk-norm "$T/sref" "$T/scand" >/dev/null || bail_out "mkdemo --sub failed"
expect_exit 1 "sub-taps with --heads: a report" "$TBISECT" check --no-history --heads 4 --kv-heads 4 --html "$T/s.html" "$T/sref" "$T/scand"
check_that "sub-taps with --heads: a per-head table of 4 heads" \
	sh -c "grep -q '<p>4 heads of [0-9]* (--heads)</p>' '$T/s.html' && test \"\$(sed -n '/class=\"heads\"/,/<\/table>/p' '$T/s.html' | grep -c '^<tr><td>')\" -eq 4"

# With the pair's history: its passes, plotted and listed.
expect_exit 1 "with history: pass 1" "$TBISECT" check --html "$T/h1.html" "$T/ref" "$T/cand"
expect_exit 1 "with history: pass 2, another tolerance" "$TBISECT" check --atol 2e-4 --html "$T/h2.html" "$T/ref" "$T/cand"
check_that "with history: the passes section" grep -q '<section id="history">' "$T/h2.html"
check_that "with history: two passes listed" test "$(sed -n '/<section id="history">/,/<\/section>/p' "$T/h2.html" | grep -c '^<li>pass ')" -eq 2
check_that "with history: plotted" sh -c "sed -n '/<section id=\"history\">/,/<\\/section>/p' '$T/h2.html' | grep -q '<polyline'"
# One pass is one point: a polyline of one point draws nothing.
check_that "with one pass: the point is drawn" sh -c "sed -n '/<section id=\"history\">/,/<\\/section>/p' '$T/h1.html' | grep -q '<circle '"
check_that "with one pass: it says so" grep -q '<p>One pass recorded' "$T/h1.html"

# 512 positions: the strip (256 glyphs) and the every-cell table scroll in
# their own boxes (measured in the browser below).
"$MKDEMO" --seq 512 --bug rope-style "$T/lref" "$T/lcand" >/dev/null || bail_out "mkdemo --seq 512 failed"
expect_exit 1 "512 positions: a report" "$TBISECT" check --no-history --html "$T/long.html" "$T/lref" "$T/lcand"
check_that "512 positions: a strip of 256 glyphs" grep -q 'class="strip">rel_l2  [.X~]\{256\}$' "$T/long.html"
check_that "512 positions: the strip scrolls in its box" grep -q 'pre\.strip{overflow-x:auto' "$T/long.html"
check_that "512 positions: the every-cell table scrolls in its box, one line a tensor" \
	sh -c 'grep -q "^<div class=\"wide\"><table>\$" "$1" && grep -q "\.wide td{white-space:nowrap" "$1"' x "$T/long.html"

# Equal inputs, equal bytes; --html-timestamp adds the time.
expect_exit 1 "the same check again" "$TBISECT" check --no-history --html "$T/again.html" "$T/ref" "$T/cand"
sed "s|again.html|r.html|g" "$T/again.html" >"$T/again-renamed.html"
check_that "equal inputs give equal bytes (the command line aside)" cmp -s "$T/r.html" "$T/again-renamed.html"
check_that "no time in the report by default" sh -c "! grep -q 'Written' '$T/r.html'"
expect_exit 1 "--html-timestamp" "$TBISECT" check --no-history --html "$T/ts.html" --html-timestamp "$T/ref" "$T/cand"
check_that "--html-timestamp: the time of the run" grep -q '<dt>Written</dt><dd>[0-9-]* [0-9:]* UTC</dd>' "$T/ts.html"
expect_exit 2 "--html-timestamp without --html" "$TBISECT" check --html-timestamp "$T/ref" "$T/cand"
expect_exit 2 "--html belongs to check" "$TBISECT" ls --html "$T/x.html" "$T/ref"
expect_error_msg 2 "$T/no/such/dir/r.html" "cannot write the HTML report" "an unwritable --html FILE: exit 2, named" \
	"$TBISECT" check --no-history --html "$T/no/such/dir/r.html" "$T/ref" "$T/cand"

# Names from the dumps stay text: unpaired npz members whose names hold
# markup, quotes, ampersands and accented letters, seeded at random, and a
# file whose name holds a newline too, come back from the parsed page as
# written, and add no element.
NPY=$(find_python numpy) || bail_out "no python3 with numpy (Debian: python3-numpy)"
"$NPY" - "$T/ref" "$T/hostile" "$T/names" <<'PY' || bail_out "writing the hostile names failed"
import os, random, shutil, sys
import numpy as np
src, dst, names_out = sys.argv[1:4]
shutil.copytree(src, dst)
rng = random.Random(20261204)
pieces = ["<", ">", "&", "&amp;", '"', "'", "<script>alert(1)</script>", "]]>", "<!--", "x", "\u00e9", "\u00ff"]
names = ["odd%d_" % i + "".join(rng.choice(pieces) for _ in range(6)) for i in range(12)]
np.savez(os.path.join(dst, "odd.npz"), **{n: np.ones(1, np.float32) for n in names})
# zip member names may not hold control characters; file names may.
lined = "odd_line\n<b>&amp;<i>\"'"
np.save(os.path.join(dst, lined + ".npy"), np.ones(1, np.float32))
with open(names_out, "w", encoding="utf-8", newline="") as f:
    for n in names + [lined]:
        f.write(n.replace("\n", "\\n") + "\n")
PY
expect_exit 1 "hostile names: a report" "$TBISECT" check --no-history --html "$T/hostile.html" "$T/hostile" "$T/cand"
"$PY" - "$T/hostile.html" "$T/names" <<'PY' >"$T/hostile.out" 2>&1 || true
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
want = [l.rstrip("\n").replace("\\n", "\n") for l in open(sys.argv[2], encoding="utf-8")]
shown = set()
for ul in root.iter("ul"):
    if ul.get("class") == "unpaired":
        for li in ul:
            code = li.find("code")
            shown.add(code.text or "")
missing = [w for w in want if w not in shown]
print("scripts", len(list(root.iter("script"))))
print("missing", len(missing))
for m in missing:
    print("not shown:", repr(m))
PY
check_that "hostile names: the page parses, and no script was added" grep -q -x 'scripts 2' "$T/hostile.out"
check_that "hostile names: each shown as text, as written" grep -q -x 'missing 0' "$T/hostile.out" ||
	diag_file "$T/hostile.out"

# A deep model with sub-taps stays small.
"$TBGEN" --layers 128 --sub --seq 64 --bug noise@L100.mlp "$T/dref" "$T/dcand" || bail_out "tbgen failed"
expect_exit 1 "128 layers with sub-taps" "$TBISECT" check --no-history --html "$T/deep.html" "$T/dref" "$T/dcand"
size=$(wc -c <"$T/deep.html")
check_that "128 layers with sub-taps: $size bytes, at most 2 MB" test "$size" -le 2097152
facts "$T/deep.html" >"$T/deepfacts" || bail_out "the deep report is not well-formed"
check_that "128 layers: the first divergence" grep -q -x 'first L100.mlp' "$T/deepfacts"

# --- in a browser ---
BROWSER=
for b in chromium chromium-browser google-chrome; do
	if command -v "$b" >/dev/null 2>&1; then BROWSER=$b; break; fi
done
if [ -z "$BROWSER" ]; then
	skip "the report in a headless browser" "no chromium (Debian: apt-get install chromium)"
	tap_done
	exit 0
fi
# browse ARGS...: the browser headless, no sandbox (root in CI), its
# profile, config and crash reports in this test's folder (never in the
# build tree), no name resolved (a request could not leave the machine).
mkdir -p "$T/home" "$T/config" "$T/cache"
browse() {
	HOME="$T/home" XDG_CONFIG_HOME="$T/config" XDG_CACHE_HOME="$T/cache" \
		"$BROWSER" --headless --no-sandbox --disable-gpu --no-first-run --disable-breakpad \
		--user-data-dir="$T/profile" --host-resolver-rules='MAP * ~NOTFOUND' --enable-logging=stderr --v=0 "$@"
}
browse --dump-dom "file://$T/r.html" >"$T/dom.html" 2>"$T/browser.log" || bail_out "$BROWSER failed: $(tail -n 3 "$T/browser.log")"
check_that "in the browser: no console message (no script error)" sh -c "! grep -q ':CONSOLE' '$T/browser.log'" ||
	diag_file "$T/browser.log"
"$PY" - "$T/dom.html" <<'PY' >"$T/dom.facts" || bail_out "reading the DOM failed"
import sys
from html.parser import HTMLParser
class P(HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells = 0; self.first = None; self.causes = []; self.js = False; self.metric_options = 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html" and "js" in (a.get("class") or "").split():
            self.js = True
        if tag == "g" and a.get("class") == "cell":
            self.cells += 1
        if a.get("id") == "first-divergence":
            self.first = a.get("data-cell") or "null"
        if tag == "li" and a.get("class") == "cause":
            self.causes.append(a.get("data-cause"))
        if tag == "option":
            self.metric_options += 1
p = P()
p.feed(open(sys.argv[1], encoding="utf-8").read())
print("cells", p.cells)
print("first", p.first)
print("cause0", p.causes[0] if p.causes else "none")
print("js", "yes" if p.js else "no")
print("metrics", p.metric_options)
PY
dfact() { sed -n "s/^$1 //p" "$T/dom.facts" | head -n 1; }
rjson() { "$JSONQ" "$T/r.json" "$1"; }
check_that "in the browser: the page's script ran" test "$(dfact js)" = yes
check_that "in the browser: the heatmap's cells ($(dfact cells))" test "$(dfact cells)" = "$(rjson 'cells.#')"
check_that "in the browser: the first divergence" test "$(dfact first)" = "$(rjson first_divergence.cell)"
check_that "in the browser: the top cause" test "$(dfact cause0)" = "$(rjson causes.0.id)"
check_that "in the browser: a metric switch of six metrics" test "$(dfact metrics)" -eq 6
printf '<!DOCTYPE html><html><head><title>blank</title></head><body></body></html>\n' >"$T/blank.html"
browse --window-size=1200,900 --screenshot="$T/blank.png" "file://$T/blank.html" >/dev/null 2>&1 || bail_out "blank screenshot failed"
browse --window-size=1200,900 --screenshot="$T/shot.png" "file://$T/r.html" >/dev/null 2>&1 || bail_out "screenshot failed"
check_that "in the browser: the screenshot is not blank ($(wc -c <"$T/shot.png") bytes against $(wc -c <"$T/blank.png"))" \
	test "$(wc -c <"$T/shot.png")" -gt $(($(wc -c <"$T/blank.png") * 4))
# The 512-position report at 1200 pixels: nothing wider than the window
# but inside a scrolling box, and the every-cell table's rows at most two
# lines (the reference's tensor over the candidate's).  A script added to
# a copy of the page measures it after the page's own script ran.
"$PY" - "$T/long.html" "$T/measure.html" <<'PY' || bail_out "writing the measuring copy failed"
import sys
js = """<script>//<![CDATA[
window.addEventListener('load', function () {
  var o = [], W = window.innerWidth;
  o.push('page ' + document.documentElement.scrollWidth + ' ' + W);
  var s = document.querySelector('pre.strip');
  o.push('strip ' + Math.round(s.getBoundingClientRect().right) + ' ' + getComputedStyle(s).overflowX);
  var h = [].map.call(document.querySelectorAll('#cells tbody tr'), function (t) { return t.getBoundingClientRect().height; });
  o.push('rows ' + Math.round(Math.max.apply(null, h)) + ' ' + Math.round(parseFloat(getComputedStyle(document.body).lineHeight)));
  var p = document.createElement('pre'); p.id = 'measure'; p.textContent = o.join('\\n'); document.body.appendChild(p);
});
//]]></script>"""
page = open(sys.argv[1], encoding="utf-8").read()
open(sys.argv[2], "w", encoding="utf-8").write(page.replace("</body>", js + "\n</body>"))
PY
browse --window-size=1200,900 --dump-dom "file://$T/measure.html" 2>/dev/null | sed -n '/<pre id="measure">/,/<\/pre>/p' |
	sed 's/<[^>]*>//g' >"$T/measure.out" || true
mfact() { sed -n "s/^$1 //p" "$T/measure.out" | head -n 1; }
set -- $(mfact page) 0 0
check_that "in the browser: a 512-position report is no wider than the window ($1 px in $2)" test "$1" -gt 0 -a "$1" -le "$2"
set -- $(mfact strip) 0 x
check_that "in the browser: the strip ends inside the window and scrolls ($1 px, overflow $2)" \
	sh -c 'test "$1" -gt 0 -a "$1" -le 1200 && test "$2" = auto' x "$1" "$2"
set -- $(mfact rows) 0 0
check_that "in the browser: every-cell rows at most two lines ($1 px, lines of $2)" test "$1" -gt 0 -a "$1" -le $(($2 * 2 + 4))
check_that "the browser wrote nothing outside this test's folder" test ! -e "${XDG_CONFIG_HOME:-/nonexistent}/chromium"

tap_done
