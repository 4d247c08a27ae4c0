#!/usr/bin/env bash
# Runs isomer's fuzzers side by side for about SECONDS each, and exits non-zero on any
# finding, printing where its reproducer is:
#   - the optimizer differential fuzzer (random models, simplify vs original, text and
#     ONNX round trips): FuzzOptimizer.DISABLED_TimedRun in the C++ test binary;
#     reproducers are minimized graph-text files;
#   - the eqsat differential fuzzer (EqsatFuzz.DISABLED_TimedRun: saturation over the
#     shipped rules, greedy and ILP extraction, the whole search in small regions);
#     a finding names its seed and prints the model;
#   - libFuzzer harnesses (fuzz/*_fuzzer.cpp, built with clang in build/fuzz/) for the
#     ONNX importer, the graph text parser and the rule parser; crashes are minimized
#     by libFuzzer.
#
#   scripts/fuzz.sh [--seconds N] [--tests path/to/isomer_tests] [--quick]
# --quick: the libFuzzer harnesses only, a few seconds each: the seed corpus, then a
# fixed number of mutations from a fixed seed, so that `make test` is repeatable (the
# differential fuzzer's quick run is part of the C++ tests).
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS_EACH=60
TESTS="$ROOT/build/tests/isomer_tests"
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_EACH="$2"; shift 2 ;;
    --tests) TESTS="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

FUZZ_BUILD="${ISOMER_FUZZ_BUILD:-$ROOT/build/fuzz}"  # the harnesses' build, corpora, findings
FINDINGS="$FUZZ_BUILD/findings"
mkdir -p "$FINDINGS"

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found; libFuzzer harnesses skipped" >&2
  HARNESSES=()
else
  HARNESSES=(onnx_import text_parse rule_parse)
  mkdir -p "$FUZZ_BUILD"
  if ! { cmake -S "$ROOT/fuzz" -B "$FUZZ_BUILD" -DCMAKE_CXX_COMPILER=clang++ &&
         cmake --build "$FUZZ_BUILD" -j"$(nproc)"; } >"$FUZZ_BUILD/build.log" 2>&1; then
    tail -n 30 "$FUZZ_BUILD/build.log" >&2
    echo "fuzz.sh: building the harnesses failed (log: $FUZZ_BUILD/build.log)" >&2
    exit 1
  fi
fi

# Working corpora live in build/fuzz/ and grow between runs; seeds come from the
# repository (graph text) and from Debian's ONNX test models.
seed_corpus() {  # harness, directory
  local dir="$2"
  mkdir -p "$dir"
  case "$1" in
    text_parse)
      cp -n "$ROOT"/fuzz/corpus/text/*.graph "$dir"/ 2>/dev/null
      for f in "$ROOT"/tests/golden/text/*.txt; do [ -f "$f" ] && cp -n "$f" "$dir/golden_$(basename "$f")"; done ;;
    rule_parse)
      # Small rule files whole, and the first 100 rules of each file on their own
      # (small seeds mutate further; the generated file has thousands).
      for f in "$ROOT"/rules/*.rules "$ROOT"/rules/fixtures/*.rules; do
        [ -f "$f" ] || continue
        awk -v dir="$dir" -v base="$(basename "$f" .rules)" '
          /^rule / { n++; out = n <= 100 ? sprintf("%s/%s_%03d.rules", dir, base, n) : "" }
          out != "" { print > out }
          /^}/ { close(out); out = "" }' "$f"
        [ "$(stat -c %s "$f")" -le 65536 ] && cp -n "$f" "$dir/$(basename "$f")"
      done ;;
    onnx_import)
      cp -n "$ROOT"/fuzz/corpus/onnx/*.onnx "$dir"/ 2>/dev/null  # current onnx: IR 14, opset 28
      local n=0
      for f in /usr/share/libonnx-testdata/data/{simple,node,pytorch-operator}/*/model.onnx; do
        [ -f "$f" ] || continue
        [ "$(stat -c %s "$f")" -le 65536 ] || continue
        cp -n "$f" "$dir/$(basename "$(dirname "$f")").onnx"
        n=$((n + 1)); [ $n -ge 300 ] && break
      done ;;
  esac
}

pids=() names=()
for h in "${HARNESSES[@]}"; do
  mkdir -p "$FINDINGS/$h"
  # -rss_limit_mb: a small input that makes isomer allocate gigabytes is a finding.
  if [ "$QUICK" = 1 ]; then
    # Only the seeds: the quick run must not depend on what earlier runs found.
    corpus="$FUZZ_BUILD/quick/$h"
    rm -rf "$corpus"
    limits=(-seed=1 -runs=300 -max_total_time=30)
  else
    corpus="$FUZZ_BUILD/corpus/$h"
    limits=(-max_total_time="$SECONDS_EACH")
  fi
  seed_corpus "$h" "$corpus"
  "$FUZZ_BUILD/fuzz_$h" "$corpus" "${limits[@]}" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$FINDINGS/$h/" -print_final_stats=1 >"$FINDINGS/$h.log" 2>&1 &
  pids+=($!) names+=("$h")
done
if [ "$QUICK" = 0 ]; then
  if [ -x "$TESTS" ]; then
    ISOMER_FUZZ_SECONDS="$SECONDS_EACH" ISOMER_FUZZ_OUT="$FINDINGS/optimizer" \
      "$TESTS" --gtest_also_run_disabled_tests --gtest_filter='FuzzOptimizer.DISABLED_TimedRun' \
      >"$FINDINGS/optimizer.log" 2>&1 &
    pids+=($!) names+=(optimizer)
    # --search eqsat: saturation, both extractors, regions stitched (eqsat_fuzz_test.cpp).
    ISOMER_FUZZ_SECONDS="$SECONDS_EACH" \
      "$TESTS" --gtest_also_run_disabled_tests --gtest_filter='EqsatFuzz.DISABLED_TimedRun' \
      >"$FINDINGS/eqsat.log" 2>&1 &
    pids+=($!) names+=(eqsat)
  else
    echo "fuzz.sh: no test binary at $TESTS; optimizer fuzzer skipped (make build first)" >&2
  fi
fi

failed=0
for i in "${!pids[@]}"; do
  name="${names[$i]}"
  if wait "${pids[$i]}"; then
    echo "fuzz: $name: no findings ($(grep -Eo 'fuzz: [0-9]+ models tried|stat::number_of_executed_units: *[0-9]+' "$FINDINGS/$name.log" | tail -1))"
    continue
  fi
  failed=1
  echo "fuzz: $name: FINDING (log: $FINDINGS/$name.log)"
  if [ "$name" = optimizer ]; then
    grep -E 'reproducer ' "$FINDINGS/$name.log" | sed 's/^ */  /'
    continue
  fi
  if [ "$name" = eqsat ]; then
    grep -E '^seed [0-9]+: ' "$FINDINGS/$name.log" | sed 's/^/  /'  # the model follows each in the log
    continue
  fi
  for crash in "$FINDINGS/$name"/crash-* "$FINDINGS/$name"/leak-* "$FINDINGS/$name"/oom-* "$FINDINGS/$name"/timeout-*; do
    [ -f "$crash" ] || continue
    case "$crash" in *.min) continue ;; esac
    "$FUZZ_BUILD/fuzz_$name" "$crash" -minimize_crash=1 -max_total_time=30 -exact_artifact_path="$crash.min" \
      >"$crash.minimize.log" 2>&1
    [ -f "$crash.min" ] && echo "  reproducer $crash.min (minimized from $crash)" || echo "  reproducer $crash"
  done
done
exit $failed
