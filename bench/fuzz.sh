#!/usr/bin/env bash
# Runs one libFuzzer target of the file parsers (#15 §1) for SECONDS or 10 million executions, whichever
# comes first (the issue's bar), ASan + UBSan, 1 s per input at most,
# a 2 GB allocation limit, from a seed corpus built from the tests' fixtures (plus what earlier runs found,
# kept in build-fuzz/corpus/TARGET) and the earlier findings in tests/data/bad/fuzz/TARGET-*. Crashes are
# written to build-fuzz/findings/; each becomes a test: its input under tests/data/bad/fuzz/ and an entry of
# tests/errors/catalogue.py.
#   bench/fuzz.sh TARGET SECONDS      TARGET: safetensors safetensors_index pickle config_json yaml vocab bpe tsv conllu head_mask sentence_model file_dataset token_dataset, or all
# Prints the executions, their rate and the outcome.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: bench/fuzz.sh TARGET SECONDS}
seconds=${2:?usage: bench/fuzz.sh TARGET SECONDS}
if [[ $target == all ]]; then
  for t in safetensors safetensors_index pickle config_json yaml vocab bpe tsv conllu head_mask sentence_model \
    file_dataset token_dataset; do "$0" "$t" "$seconds"; done
  exit 0
fi
if [[ ! -x build-fuzz/tests/fuzz/fuzz_$target ]]; then
  command -v clang++ >/dev/null || { echo "fuzz_$target: skipped, no clang++ (scripts/setup.sh --tests installs it)"; exit 77; }
  # Under ctest -j two fuzz tests may both find the folder unbuilt: one cmake and ninja at a time in it (two at once
  # broke ninja's log: "premature end of file", a failed test).
  mkdir -p build-fuzz
  (
    flock 9
    if [[ ! -x build-fuzz/tests/fuzz/fuzz_$target ]]; then
      CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DHP_FUZZ=ON >/dev/null
      ninja -C build-fuzz "fuzz_$target" >/dev/null
    fi
  ) 9>build-fuzz/.build.lock
fi
corpus=build-fuzz/corpus/$target
seeds=build-fuzz/seeds/$target
mkdir -p "$corpus" "$seeds" build-fuzz/findings
rm -f "$seeds"/*
python3 - "$target" "$seeds" <<'PY'
import glob, os, shutil, sys, zipfile
sys.path.insert(0, "tests/errors")
import fixtures as fx
target, out = sys.argv[1], sys.argv[2]
def put(name, data):
    open(os.path.join(out, name), "wb").write(data if isinstance(data, bytes) else data.encode())
if target == "safetensors":
    h, d = fx.read_safetensors(fx.TINY + "/model.safetensors")
    small = {k: v for k, v in list(h.items())[:4]}
    put("tiny_head.safetensors", fx.rebuild(small, d))
    put("empty.safetensors", fx.safetensors_bytes({}, b""))
elif target == "safetensors_index":  # transformers' index of a 2-shard tiny model, and one with a path outside
    import json
    h, _ = fx.read_safetensors(fx.TINY + "/model.safetensors")
    names = [k for k in h if k != "__metadata__"]
    wm = {k: f"model-0000{1 + 2 * i // len(names)}-of-00002.safetensors" for i, k in enumerate(names)}
    put("tiny_index.json", json.dumps({"metadata": {"total_size": 84000}, "weight_map": wm}, indent=2, sort_keys=True))
    put("outside.json", json.dumps({"weight_map": {names[0]: "../x.safetensors"}}))
elif target == "pickle":
    with zipfile.ZipFile("tests/data/golden/tiny_bert_bin/pytorch_model.bin") as z:
        put("tiny.pkl", z.read([n for n in z.namelist() if n.endswith("data.pkl")][0]))
    put("os_system.pkl", fx.global_call_pickle("os", "system", "true"))
elif target == "config_json":
    for f in glob.glob("tests/data/golden/*/config.json"):
        put(os.path.basename(os.path.dirname(f)) + ".json", open(f, "rb").read())
elif target == "sentence_model":  # all-MiniLM-L6-v2's three files, and a path leaving the folder
    put("modules.json", '[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}, '
        '{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}, '
        '{"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]')
    put("pooling.json", '{"word_embedding_dimension": 384, "pooling_mode_cls_token": false, '
        '"pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false, "include_prompt": true}')
    put("sentence_bert_config.json", '{"max_seq_length": 256, "do_lower_case": false}')
    put("outside.json", '[{"path": "../x", "type": "sentence_transformers.models.Pooling"}]')
elif target == "file_dataset":  # a pandas-style CSV (quoted comma, quote, newline), a TSV, JSON lines
    put("quoted.csv", '\ufeffsentence,label\r\n"a, b",positive\r\n"say ""hi""\nthere",negative\r\n')
    put("pair.tsv", "sentence1\tsentence2\tlabel\nA man\tA person\t4.5\n")
    put("rows.jsonl", '{"text": "good", "label": 1}\n{"text": "bad", "label": 0, "extra": null}\n')
elif target == "token_dataset":  # CoNLL-2003 columns, JSON lines (string and int tags), a CoNLL-U treebank
    put("ner.conll", "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter\tB-PER\nBlackburn\tI-PER\n")
    put("ner.jsonl", '{"tokens": ["EU", "rejects"], "ner_tags": [3, 0]}\n{"tokens": ["Peter"], "tags": ["B-PER"]}\n')
    put("tree.conllu", open("tests/data/analysis/conllu_good.conllu", "rb").read())
elif target == "yaml":
    for f in glob.glob("configs/*.yaml"):
        put(os.path.basename(f), "prune.target_heads=36\n" + open(f).read())
elif target == "vocab":
    put("tiny_vocab.txt", open(fx.TINY + "/vocab.txt", "rb").read())
elif target == "bpe":  # vocab.json NUL merges.txt: GPT-2's 256 byte pieces, RoBERTa's specials, a few merges
    import json
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars = {b: chr(b) for b in bs}
    chars.update({b: chr(256 + i) for i, b in enumerate(b for b in range(256) if b not in bs)})
    vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])}
    for b in range(256):
        vocab[chars[b]] = 5 + b
    merges = ["\u0120 t", "h e", "\u0120t he", "i n", "a t"]
    for m in merges:
        vocab.setdefault(m.replace(" ", ""), len(vocab))
    put("tiny_bpe", json.dumps(vocab, ensure_ascii=False) + "\0#version: 0.2\n" + "\n".join(merges) + "\n")
elif target == "tsv":
    for i, f in enumerate(sorted(glob.glob("tests/data/bad/*.tsv"))):
        put(f"bad{i}.tsv", bytes([i % 4]) + open(f, "rb").read())
    put("sst2.tsv", b"\x00sentence\tlabel\n" + fx.sst2_rows().encode())
    put("stsb.tsv", b"\x01" + fx.stsb_rows(["1.0", "4.5"]).encode())
elif target == "conllu":
    for f in glob.glob("tests/data/analysis/*.conllu"):
        put(os.path.basename(f), open(f, "rb").read())
elif target == "head_mask":
    for i, s in enumerate(["2:0,3;5:11", "0:0", "", "11:11;0:0,1,2", "3:*"]):
        put(f"spec{i}", s)
PY
cp tests/data/bad/fuzz/"$target"-* "$seeds"/ 2>/dev/null || true  # earlier findings, now regression seeds
dict=()
[[ -f tests/fuzz/dict/$target.dict ]] && dict=(-dict="tests/fuzz/dict/$target.dict")
log=build-fuzz/fuzz_$target.log
set +e
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "build-fuzz/tests/fuzz/fuzz_$target" "$corpus" "$seeds" "${dict[@]}" -max_total_time="$seconds" -runs=10000000 -timeout=1 -error_exitcode=1 -timeout_exitcode=1 \
  -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=65536 -artifact_prefix=build-fuzz/findings/"$target"- \
  -print_final_stats=1 >"$log" 2>&1
rc=$?
set -e
runs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
rate=$(grep -ao 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
cov=$(grep -ao 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
if [[ $rc -eq 0 ]]; then outcome="0 crashes, 0 leaks, 0 timeouts, 0 allocations over 2 GB"; else outcome="FINDING (exit $rc): see $log and build-fuzz/findings/"; fi
printf 'fuzz_%-12s %6ss  %10s executions  %7s/s  coverage %5s  %s\n' "$target" "$seconds" "$runs" "$rate" "$cov" "$outcome"
exit $rc
