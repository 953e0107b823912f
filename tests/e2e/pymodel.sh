#!/bin/sh
# End to end: the diagnosis on a second decoder written apart from mkdemo,
# in numpy (tests/pymodel/model.py): other shapes (6 heads of 16, 8 of 32),
# nested Hugging Face paths, bf16 safetensors, o_proj/down_proj dumped.
# tests/pymodel/check.py computes each pair's first divergence itself and
# prints the TAP lines; without numpy the whole file is one skip.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
if ! PY=$(find_python numpy); then
	skip "the numpy decoder" "no python3 with numpy (Debian: python3-numpy)"
	tap_done
fi
tap_end_by "$PY" "$top_srcdir/tests/pymodel/check.py" "$TBISECT" "$TAP_TMP"
