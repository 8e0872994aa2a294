// Examples for `prune analyze` (see analysis/examples.h).
#include "analysis/examples.h"

#include <limits>

#include "core/base/errors.h"
#include "core/base/log.h"
#include "core/data/conllu.h"

namespace hp::analysis {

namespace {

// Fills the per-token facts of `info` from its ids (the rarest tokens by `counts`).
void describe(const core::Tokenizer& tok, const std::vector<int32_t>& ids, const std::vector<int32_t>& types,
              const std::vector<int64_t>& counts, ExampleInfo& info) {
  const int n = static_cast<int>(ids.size());
  info.n = n;
  info.type_ids = types;
  info.special.assign(n, 0), info.sep.assign(n, 0), info.punct.assign(n, 0), info.rare.assign(n, 0);
  int64_t rarest = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < n; ++i) {
    info.sep[i] = ids[i] == tok.sep_id();
    info.special[i] = info.sep[i] || ids[i] == tok.cls_id();
    std::string t = tok.token(ids[i]);
    // A byte-level BPE (Ġ, U+0120) or SentencePiece (▁, U+2581) word start is not part of the punctuation mark.
    for (const char* mark : {"\xC4\xA0", "\xE2\x96\x81"})
      if (t.rfind(mark, 0) == 0) t.erase(0, std::char_traits<char>::length(mark));
    info.punct[i] = t == "." || t == ",";
    if (!info.special[i]) rarest = std::min(rarest, counts.at(ids[i]));
  }
  for (int i = 0; i < n; ++i) info.rare[i] = !info.special[i] && counts.at(ids[i]) == rarest;
}

}  // namespace

std::vector<int64_t> token_counts(const core::Tokenizer& tok, const std::vector<core::Example>& texts, int max_len) {
  std::vector<int64_t> counts(tok.vocab_size(), 0);
  for (const auto& ex : texts) {
    auto enc = tok.encode(ex.text_a, ex.text_b.empty() ? nullptr : &ex.text_b, max_len);
    for (int32_t id : enc.ids)
      if (id != tok.cls_id() && id != tok.sep_id() && id != tok.pad_id()) ++counts[id];
  }
  return counts;
}

AnalysisInputs task_inputs(const core::Tokenizer& tok, const std::vector<core::Example>& rows, long n, int max_len,
                           const std::vector<int64_t>& counts, const std::string& source) {
  std::vector<core::Example> kept(rows.begin(), rows.begin() + (n > 0 ? std::min<long>(n, rows.size()) : rows.size()));
  AnalysisInputs in;
  in.data = core::encode_examples(tok, kept, max_len);
  in.source = source;
  for (size_t i = 0; i < kept.size(); ++i) {
    ExampleInfo info;
    info.pair = !kept[i].text_b.empty();
    describe(tok, in.data.ids[i], in.data.type_ids[i], counts, info);
    in.text.push_back(info.pair ? kept[i].text_a + " [SEP] " + kept[i].text_b : kept[i].text_a);
    in.info.push_back(std::move(info));
  }
  return in;
}

AnalysisInputs treebank_inputs(const core::Tokenizer& tok, const std::string& path, int max_len,
                               const std::vector<int64_t>& counts) {
  AnalysisInputs in;
  in.source = path;
  for (const auto& s : core::read_conllu(path)) {
    std::vector<int32_t> ids = {tok.cls_id()};
    ExampleInfo info;
    info.word_begin = {0, 1};
    std::string text;
    for (size_t w = 0; w < s.words.size(); ++w) {
      const auto pieces = tok.tokenize_ids(s.words[w]);
      if (pieces.empty())
        throw InputError(path + ":" + std::to_string(s.line + static_cast<int>(w)) + ": word " + std::to_string(w + 1) +
                         " '" + s.words[w] + "' of sentence '" + s.sent_id +
                         "' has no word pieces in this tokenizer's vocabulary, so attention cannot be aligned to it;"
                         " fix the FORM or drop the sentence");
      ids.insert(ids.end(), pieces.begin(), pieces.end());
      info.word_begin.push_back(static_cast<int>(ids.size()));
      text += (w ? " " : "") + s.words[w];
    }
    ids.push_back(tok.sep_id());
    info.word_begin.push_back(static_cast<int>(ids.size()));
    if (static_cast<int>(ids.size()) > max_len) {
      ++in.skipped;
      continue;
    }
    info.heads = s.heads;
    for (const auto& r : s.deprels) info.rel.push_back(relation_index(r));
    describe(tok, ids, std::vector<int32_t>(ids.size(), 0), counts, info);
    in.data.ids.push_back(ids);
    in.data.type_ids.push_back(std::vector<int32_t>(ids.size(), 0));
    in.data.labels.push_back(0);
    in.info.push_back(std::move(info));
    in.text.push_back(text);
  }
  if (in.skipped > 0)
    core::log_warn("analyze", path + ": " + std::to_string(in.skipped) + " sentences longer than max_seq_len " +
                                  std::to_string(max_len) +
                                  " word pieces were skipped; raise --max-seq-len to keep them");
  if (in.info.empty())
    throw InputError(path + ": no sentence fits in max_seq_len " + std::to_string(max_len) + "; raise --max-seq-len");
  return in;
}

}  // namespace hp::analysis
