#!/usr/bin/env bash
# Set up everything Geo Rebalancer needs on a fresh machine, once; later calls are no-ops.
#   .venv          - Python venv from the lock requirements-dev.txt (Spark 4.0 line, moto, CDK, linters), and this
#                    checkout installed into it (editable, no dependencies): .venv/bin/partitioner and
#                    .venv/bin/georebal, and `import partitioner` from any directory
#   .venv-spark35  - from requirements-spark35.txt (Spark 3.5 line); .venv-checkov from requirements-checkov.txt
#   node_modules   - the CDK CLI (aws-cdk@^2.1148, pinned in package.json)
#   .cache/lambda-wheels - wheel cache for the Lambda layer (the lock requirements-lambda.txt; synth installs it offline)
#   java           - Spark needs a JRE 17; installed with apt-get when missing (root only)
# Python packages come from LOCK files only (exact versions, sha256 hashes: pip refuses any other file), never from
# the ranges in requirements*.in: those are resolved into the locks by scripts/lock. A fresh clone installs what the
# tests ran, not whatever the ranges allow that day (moto 5.2.6 broke the local loop that way).
# Re-runs an install whenever its lock or package.json changes.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}

log() { printf '[bootstrap] %s\n' "$*" >&2; }

stamp_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }

run_pip() {  # run_pip WHAT COMMAND...: a pip command; its output without the 'Location ... is ignored' warnings of
  # an extra index configured but absent on the machine; exits 1 naming WHAT when it fails
  local what=$1 out rc=0; shift
  out=$(mktemp)
  "$@" >"$out" 2>&1 || rc=$?
  grep -v '^WARNING: Location' "$out" >&2 || true
  rm -f "$out"
  if [[ $rc -ne 0 ]]; then
    log "$what failed (above; a hash mismatch: the index served a file other than the one locked)"; exit 1
  fi
}

ensure_venv() {  # ensure_venv DIR LOCK: the venv holds exactly the lock's pins (pip itself is one of them)
  local dir=$1 lock=$2
  local want; want=$(stamp_of "$lock")
  if [[ -x $dir/bin/python && -f $dir/.stamp && $(cat "$dir/.stamp") == "$want" ]]; then return 0; fi
  log "creating $dir from $lock (a few minutes on a fresh machine)"
  [[ -x $dir/bin/python ]] || "$PY" -m venv "$dir"
  # hashes in the lock turn on --require-hashes; no --no-deps: pip's resolver then also fails on a dependency the
  # lock lacks (an incomplete lock), naming it
  run_pip "installing $lock into $dir" "$dir/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r "$lock"
  "$dir/bin/python" -m pip check >/dev/null 2>&1 || log "pip check reports conflicts in $dir (see '$dir/bin/pip check')"
  "$dir/bin/python" - "$lock" <<'PYEOF'
import re, sys
from importlib.metadata import PackageNotFoundError, version
from pip._vendor.packaging.markers import Marker
from pip._vendor.packaging.version import Version
# every pin of the lock whose marker holds here must be installed at exactly its version
wrong = []
for line in open(sys.argv[1]):
    pin = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)\s*(?:;\s*(.*?))?\s*\\?$", line.strip())
    if pin is None:
        continue
    name, pinned, marker = pin.groups()
    if marker and not Marker(marker).evaluate():
        continue
    try:
        found = version(name)
    except PackageNotFoundError:
        found = "missing"
    if found == "missing" or Version(found) != Version(pinned):
        wrong.append(f"{name}=={pinned} ({found})")
if wrong:
    sys.exit(f"[bootstrap] install failed, not as {sys.argv[1]} pins (installed): {wrong}")
PYEOF
  echo "$want" > "$dir/.stamp"
  log "$dir ready (${SECONDS}s since this bootstrap started)"
}

ensure_project() {  # ensure_project DIR: this checkout installed into the venv DIR, editable, from the venv alone
  # --no-deps: the lock installed every dependency at its locked version, nothing else comes in; --no-build-isolation
  # and --no-index: built with the lock's setuptools, offline. Editable: the commands run this checkout's code as it
  # is edited, and georebal finds the CDK app's settings (infra/) beside its package (georebal/launch.py). Re-run
  # when pyproject.toml changes or another checkout sharing the venv installed itself (the stamp holds the path).
  local dir=$1 want; want=$( { cat pyproject.toml; echo "$ROOT"; } | sha256sum | cut -c1-16)
  if [[ -x $dir/bin/partitioner && -f $dir/.stamp-project && $(cat "$dir/.stamp-project") == "$want" ]]; then return 0; fi
  log "installing this checkout ($ROOT) into $dir (editable, no dependencies: the lock's)"
  run_pip "installing this checkout into $dir" "$dir/bin/python" -m pip install -q --disable-pip-version-check \
    --no-index --no-deps --no-build-isolation -e "$ROOT"
  # the commands answer from any directory (not only from the checkout's root, where its packages are on sys.path)
  local cmd; for cmd in partitioner georebal; do
    (cd / && "$dir/bin/$cmd" --version >/dev/null) || { log "$dir/bin/$cmd --version failed after the install"; exit 1; }
  done
  echo "$want" > "$dir/.stamp-project"
}

ensure_java() {
  if command -v java >/dev/null 2>&1; then return 0; fi
  log "no java on PATH: installing openjdk-17-jre-headless for Spark"
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    log "cannot install java (not root or no apt-get): install a Java 17 runtime and re-run"; exit 1
  fi
}

ensure_cdk_cli() {
  local want; want=$(stamp_of package.json)
  if [[ -x node_modules/.bin/cdk && -f node_modules/.stamp && $(cat node_modules/.stamp) == "$want" ]]; then return 0; fi
  command -v npm >/dev/null || { log "npm not found: install Node.js 20+ and re-run"; exit 1; }
  log "installing the CDK CLI from npm (aws-cdk@^2.1148)"
  npm install --no-audit --no-fund --loglevel=error >/dev/null 2>&1 || npm install --no-audit --no-fund
  echo "$want" > node_modules/.stamp
}

ensure_lambda_wheels() {  # wheel cache for the Lambda layer (Python 3.14, arm64); synth installs it offline
  local dir=$ROOT/.cache/lambda-wheels lock=requirements-lambda.txt want; want=$(stamp_of "$lock")
  if [[ -f $dir/.stamp && $(cat "$dir/.stamp") == "$want" ]]; then return 0; fi
  local py=$ROOT/.venv/bin/python; [[ -x $py ]] || py=$PY
  log "downloading the Lambda layer wheels ($lock, hash-checked) into $dir"
  rm -rf "$dir"; mkdir -p "$dir"
  # the lock's hashes: every wheel is the one locked (infra/assets.py installs from this cache with the same lock)
  run_pip "downloading $lock into $dir" "$py" -m pip download -q --disable-pip-version-check --require-hashes \
    --only-binary=:all: --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 --implementation cp \
    --python-version 3.14 -d "$dir" -r "$lock"
  echo "$want" > "$dir/.stamp"
}

what=${1:-all}
case $what in
  python) ensure_java; ensure_venv "$ROOT/.venv" requirements-dev.txt; ensure_project "$ROOT/.venv" ;;
  spark35) ensure_java; ensure_venv "$ROOT/.venv-spark35" requirements-spark35.txt ;;
  checkov) ensure_venv "$ROOT/.venv-checkov" requirements-checkov.txt ;;
  cdk) ensure_cdk_cli ;;
  lambda-wheels) ensure_lambda_wheels ;;
  java) ensure_java ;;
  all) ensure_java; ensure_cdk_cli & cdk=$!  # npm beside pip: neither waits for the other
       ensure_venv "$ROOT/.venv" requirements-dev.txt; ensure_project "$ROOT/.venv"; ensure_lambda_wheels; wait "$cdk" ;;
  *) log "usage: scripts/bootstrap.sh [all|python|spark35|checkov|cdk|lambda-wheels|java]"; exit 2 ;;
esac
