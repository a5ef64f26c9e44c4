#!/bin/bash
# Regenerates every <name>.tfstate in this directory with the real terraform
# binary (tested with 1.11.4), fully offline (only the builtin terraform_data
# resource / terraform_remote_state data source; local-exec provisioners).
# Runs in a scratch copy under /tmp so no .terraform/ or lock files land here.
# Usage: ./regen.sh [name ...]   (default: all, in dependency order)
set -euo pipefail
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
: "${TF_CLI_CONFIG_FILE:=}"
if [ -n "$TF_CLI_CONFIG_FILE" ] && [ ! -e "$TF_CLI_CONFIG_FILE" ]; then
  export TF_CLI_CONFIG_FILE=/dev/null
fi
here=$(cd "$(dirname "$0")" && pwd)
scratch=${SCRATCH:-/tmp/tf-fixtures}
tf() { terraform "$@" -no-color -input=false; }

prep() { # copy fixture <name> (and the sibling state files) to scratch, cd, init
  rm -rf "${scratch:?}/$1"; mkdir -p "$scratch"
  cp -r "$here/$1" "$scratch/$1"
  cp "$here"/*.tfstate "$scratch"/ 2>/dev/null || true
  cd "$scratch/$1"
  tf init >/dev/null
}
save() { cp "$scratch/$1/terraform.tfstate" "$here/$1.tfstate"; }

gen_count()             { prep count;             tf apply -auto-approve; save count; }
gen_for_each_odd_keys() { prep for_each_odd_keys; tf apply -auto-approve; save for_each_odd_keys; }
gen_outputs()           { prep outputs;           tf apply -auto-approve; save outputs; }
# modules reads ../outputs.tfstate through terraform_remote_state: run after outputs
gen_modules()           { prep modules;           tf apply -auto-approve; save modules; }
gen_tainted_deposed() {
  prep tainted_deposed
  tf apply -auto-approve                       # creates cbd (v1), tainted, multi[0..1]
  if tf apply -auto-approve -var gen=v2; then  # must fail: provisioner exits 1
    echo "expected the gen=v2 apply to fail" >&2; exit 1
  fi                                           # -> cbd: tainted current (v2) + deposed (v1)
  terraform taint -no-color terraform_data.tainted
  terraform taint -no-color 'terraform_data.multi[1]'
  save tainted_deposed
}
gen_empty() { prep empty; tf apply -auto-approve; tf destroy -auto-approve; save empty; }

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(count for_each_odd_keys outputs modules tainted_deposed empty)
for n in "${names[@]}"; do echo "=== $n"; "gen_$n"; done
