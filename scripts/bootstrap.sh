#!/usr/bin/env bash
# Set up everything Geo Rebalancer needs on a fresh machine, once; later calls are no-ops.
#   .venv          - Python venv with requirements-dev.txt (Spark 4.0 line, moto, CDK, linters)
#   node_modules   - the CDK CLI (aws-cdk@^2.1148, pinned in package.json)
#   .cache/lambda-wheels - wheel cache for the Lambda layer (requirements-lambda.txt; synth installs it offline)
#   java           - Spark needs a JRE 17; installed with apt-get when missing (root only)
# Re-runs the install whenever a requirements file or package.json changes.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}

log() { printf '[bootstrap] %s\n' "$*" >&2; }

stamp_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }

ensure_venv() {  # ensure_venv DIR REQUIREMENTS...
  local dir=$1; shift
  local want; want=$(stamp_of "$@" requirements.txt)
  if [[ -x $dir/bin/python && -f $dir/.stamp && $(cat "$dir/.stamp") == "$want" ]]; then return 0; fi
  log "creating $dir from $* (a few minutes on a fresh machine)"
  [[ -x $dir/bin/python ]] || "$PY" -m venv "$dir"
  "$dir/bin/python" -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' >&2 || true
  for req in "$@"; do
    "$dir/bin/python" -m pip install -q -r "$req" 2>&1 | grep -v '^WARNING: Location' >&2 || true
  done
  "$dir/bin/python" -m pip check >/dev/null 2>&1 || log "pip check reports conflicts in $dir (see '$dir/bin/pip check')"
  for req in "$@"; do "$dir/bin/python" - "$req" <<'PYEOF'
import re, sys
from importlib.metadata import PackageNotFoundError, version
missing = []
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line or line.startswith("-r"):
        continue
    name = re.split(r"[\[<>=!~ ]", line, maxsplit=1)[0]
    try:
        version(name)
    except PackageNotFoundError:
        missing.append(name)
if missing:
    sys.exit(f"[bootstrap] install failed, missing from {sys.argv[1]}: {missing}")
PYEOF
  done
  echo "$want" > "$dir/.stamp"
  log "$dir ready (${SECONDS}s since this bootstrap started)"
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

ensure_lambda_wheels() {  # wheel cache for the Lambda layer (Python 3.14, arm64); synth installs from it offline
  local dir=$ROOT/.cache/lambda-wheels want; want=$(stamp_of requirements-lambda.txt)
  if [[ -f $dir/.stamp && $(cat "$dir/.stamp") == "$want" ]]; then return 0; fi
  local py=$ROOT/.venv/bin/python; [[ -x $py ]] || py=$PY
  log "downloading the Lambda layer wheels (requirements-lambda.txt) into $dir"
  rm -rf "$dir"; mkdir -p "$dir"
  "$py" -m pip download -q --only-binary=:all: --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 --implementation cp \
    --python-version 3.14 -d "$dir" -r requirements-lambda.txt
  echo "$want" > "$dir/.stamp"
}

what=${1:-all}
case $what in
  python) ensure_java; ensure_venv "$ROOT/.venv" requirements-dev.txt ;;
  spark35) ensure_java; ensure_venv "$ROOT/.venv-spark35" requirements-spark35.txt ;;
  checkov) ensure_venv "$ROOT/.venv-checkov" requirements-checkov.txt ;;
  cdk) ensure_cdk_cli ;;
  lambda-wheels) ensure_lambda_wheels ;;
  java) ensure_java ;;
  all) ensure_java; ensure_cdk_cli & cdk=$!  # npm beside pip: neither waits for the other
       ensure_venv "$ROOT/.venv" requirements-dev.txt; ensure_lambda_wheels; wait "$cdk" ;;
  *) log "usage: scripts/bootstrap.sh [all|python|spark35|checkov|cdk|lambda-wheels|java]"; exit 2 ;;
esac
