#!/usr/bin/env bash
# Build the sdist and wheel with `python -m build` (the wheel from the sdist), install
# the wheel alone in a fresh venv and run `market-sim demo` from it, outside the
# source tree.  Used by `make wheel-check` and .ci/run.
#   PYTHON=python3.12 bash .ci/wheel_check.sh     (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/market_sim-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$PYTHON" -m venv "$work/build-env"
"$work/build-env/bin/python" -m pip install --quiet --upgrade pip build
"$work/build-env/bin/python" -m build --outdir "$work/dist" . > "$work/build.log" 2>&1 \
    || { cat "$work/build.log"; exit 1; }
ls "$work/dist"
wheel=$(ls "$work"/dist/*.whl)

# What the wheel must carry besides the modules.
"$work/build-env/bin/python" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
text = zipfile.ZipFile(sys.argv[1]).read(meta).decode()
missing = [want for want in ("market_sim/py.typed", "market_sim/cli/__init__.py",
                                "market_sim/cli/simulate.py",
                                "market_sim/neural/networks/regretnet-u01-m10.onnx")
           if want not in names]
missing += [] if any(n.endswith(".dist-info/licenses/LICENSE") for n in names) else ["LICENSE"]
missing += [] if "License-Expression: MIT" in text.splitlines() else ["License-Expression: MIT"]
if missing:
    sys.exit(f"wheel lacks: {missing}")
print(f"wheel carries py.typed, LICENSE, License-Expression: MIT ({len(names)} files)")
PY

"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install --quiet "$wheel"
"$work/venv/bin/python" -m pip check
mkdir "$work/run"
(cd "$work/run" && "$work/venv/bin/market-sim" demo --out-dir out)
test -s "$work/run/out/offline_market.png"
echo "wheel check: ok ($("$work/venv/bin/python" --version), $(basename "$wheel"))"
