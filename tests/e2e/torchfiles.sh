#!/bin/sh
# torch.save files written by real torch (when python3-torch is installed):
# state dicts, nested dicts, views with offsets and strides, expand (stride
# 0), bf16/f16/int64, a lone tensor; values checked against numpy's copies.
set -eu
. "${top_srcdir:-.}/tests/e2e/lib.sh"
tap_setup
T=$TAP_TMP

if ! PY=$(find_python torch) || ! "$PY" -c 'import numpy' 2>/dev/null; then
	skip "torch.save files from real torch" "no python3 with torch and numpy (Debian: python3-torch)"
	tap_done
fi

mkdir -p "$T/npy" "$T/views"
"$PY" - "$T" <<'PY' || bail_out "torch could not write the fixtures"
import collections, sys
import numpy as np, torch
t = sys.argv[1]
torch.manual_seed(0)
sd = collections.OrderedDict()
for l in range(2):
    sd[f"model.layers.{l}.self_attn"] = torch.randn(1, 8, 16)
    sd[f"model.layers.{l}.mlp"] = torch.randn(1, 8, 16)
sd["model.embed_tokens"] = torch.randn(1, 8, 16)
sd["lm_head"] = torch.randn(32, 8).t()                  # a transposed view
sd["model.norm"] = torch.randn(8, 16).to(torch.bfloat16)
torch.save(sd, f"{t}/state.pt")
for k, v in sd.items():
    np.save(f"{t}/npy/{k}.npy", v.float().numpy())
base = torch.randn(6, 4)
torch.save({"layers": {"0": {"attn": base[:, 1:3], "mlp": base.t()}},
            "layers.1.attn": torch.ones(3, 1).expand(3, 4),
            "layers.1.mlp": torch.randn(4, 4).half()}, f"{t}/views.pt")
np.save(f"{t}/views/layers.0.attn.npy", base[:, 1:3].numpy())
np.save(f"{t}/views/layers.0.mlp.npy", base.t().numpy())
np.save(f"{t}/views/layers.1.attn.npy", np.ones((3, 4), np.float32))
torch.save(torch.arange(8), f"{t}/ids.pt")
PY
# the half tensor compares against its own f32 copy
"$PY" -c "import torch, numpy as np; d = torch.load('$T/views.pt'); np.save('$T/views/layers.1.mlp.npy', d['layers.1.mlp'].float().numpy())"

expect_exit 0 "a torch state dict lists" "$TBISECT" ls "$T/state.pt"
check_that "state dict: 7 tensors, all mapped" grep -q '^7 tensors, 0 unmapped$' "$TAP_OUT"
check_that "state dict: bf16 kept as bf16" grep -q '^model.norm  *final_norm  *bf16  *\[8, 16\]' "$TAP_OUT"
expect_exit 0 "torch state dict equals numpy's copy" "$TBISECT" check --json --no-history "$T/npy" "$T/state.pt"
json_is "state dict: verdict match" verdict match
json_is "state dict: every cell paired" 'unpaired.cand.#' 0
expect_exit 0 "views, nested dicts, expand, f16" "$TBISECT" check --json --no-history "$T/views" "$T/views.pt"
json_is "views: verdict match" verdict match
json_is "views: four cells" 'cells.#' 4
json_is "views: strided view exact" cells.0.max_abs 0
expect_exit 0 "a lone tensor" "$TBISECT" ls "$T/ids.pt"
check_that "a lone tensor takes the file's name" grep -q '^ids  *(unmapped)  *i64  *\[8\]' "$TAP_OUT"
tap_done
