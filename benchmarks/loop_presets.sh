#!/usr/bin/env bash
# Runs every rung's short preset into $1/<name> (metrics.jsonl, summary.json), one after another, niced:
# the recordings benchmarks/loop_compare.py compares before and after a change to the training loop.
set -u
base=${1:?usage: loop_presets.sh OUT_DIR}
run() { name=$1; shift; nice python -m ladder.run "$@" --out "$base/$name" --overwrite --no-progress \
          >"$base/$name.log" 2>&1 || echo "FAILED $name"; echo "done $name"; }
mkdir -p "$base"
run cartpole cartpole --total-steps 8192
run reinforce reinforce --preset tiny --total-steps 12000 --eval-every 4000
run ppo-sentiment ppo-sentiment --preset tiny --steps 6
run grpo grpo --preset tiny --steps 12
for algo in grpo dr_grpo dapo gspo cispo rloo sapo luspo vespo gdpo; do
  run "grpo-$algo" grpo --preset tiny --algo "$algo" --steps 3
done
run agent agent --preset tiny --steps 12
run agent-guess agent --preset tiny-guess --steps 3
