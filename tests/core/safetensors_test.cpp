// Tensor file IO: safetensors (HF-written fixture, round trips, the bad-input catalogue),
// torch.save .bin (fixtures written by tools/make_tensor_fixtures.py, values in *.expected.json
// sidecars) and the HDF5 export round trip.
#include "core/io/safetensors.h"
#include "fixtures.h"
#include "skip.h"

#include <torch/serialize.h>  // pickle_save
#include <torch/types.h>
#include <torch/utils.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/io/tensor_io.h"
#include "core/io/torch_pickle.h"

namespace fs = std::filesystem;
using hp::CheckpointError;
using hp::core::TensorMap;

namespace {

using hp::test::kTensorDataDir;

std::string temp_dir() {
  const auto dir = hp::test::scratch_dir("hp_tensor_io_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir.string() + "/";
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_text(const std::string& path) {
  std::ifstream is(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(is)), std::istreambuf_iterator<char>());
}

// A safetensors image from a header text and a data buffer: u64 LE length, header, data.
std::string image(const std::string& header, const std::string& data, std::uint64_t n_override = 0) {
  const std::uint64_t n = n_override ? n_override : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// The sidecar written by tools/make_tensor_fixtures.py, as float64/int64 tensors.
TensorMap expected_from_sidecar(const std::string& path, std::map<std::string, std::string>* dtypes) {
  const auto j = nlohmann::json::parse(read_text(path));
  TensorMap out;
  for (const auto& [key, e] : j.items()) {
    const auto shape = e.at("shape").get<std::vector<std::int64_t>>();
    const std::string dtype = e.at("dtype").get<std::string>();
    if (dtype[0] == 'I') {
      out[key] = torch::tensor(e.at("values").get<std::vector<std::int64_t>>(), torch::kInt64).reshape(shape);
    } else {
      out[key] = torch::tensor(e.at("values").get<std::vector<double>>(), torch::kFloat64).reshape(shape);
    }
    if (dtypes) (*dtypes)[key] = dtype;
  }
  return out;
}

std::string st_name(const torch::Tensor& t) {
  const auto s = t.scalar_type();
  return s == torch::kFloat64    ? "F64"
         : s == torch::kFloat32  ? "F32"
         : s == torch::kFloat16  ? "F16"
         : s == torch::kBFloat16 ? "BF16"
         : s == torch::kInt64    ? "I64"
         : s == torch::kInt32    ? "I32"
                                 : "?";
}

// Exact comparison of `got` with a sidecar's expected values, key set included.
void require_matches_sidecar(const TensorMap& got, const std::string& sidecar) {
  std::map<std::string, std::string> dtypes;
  const auto want = expected_from_sidecar(sidecar, &dtypes);
  std::vector<std::string> got_keys, want_keys;
  for (const auto& kv : got) got_keys.push_back(kv.first);
  for (const auto& kv : want) want_keys.push_back(kv.first);
  REQUIRE(got_keys == want_keys);
  for (const auto& [key, w] : want) {
    INFO("tensor " << key);
    const auto& g = got.at(key);
    REQUIRE(st_name(g) == dtypes.at(key));
    REQUIRE(g.sizes() == w.sizes());
    REQUIRE(torch::equal(g.to(w.scalar_type()), w));
  }
}

bool maps_equal(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, t] : a) {
    auto it = b.find(k);
    if (it == b.end() || it->second.scalar_type() != t.scalar_type() || !torch::equal(it->second, t)) {
      return false;
    }
  }
  return true;
}

TensorMap all_dtypes_map() {
  torch::manual_seed(1);
  TensorMap m;
  m["encoder.layer.0.attention.self.query.weight"] = torch::randn({4, 6});
  m["f64"] = torch::randn({3}, torch::kFloat64);
  m["f16"] = torch::randn({2, 5}).to(torch::kFloat16);
  m["bf16"] = torch::randn({7}).to(torch::kBFloat16);
  m["position_ids"] = torch::arange(9, torch::kInt64).reshape({1, 9});
  m["i32"] = torch::randint(-1000, 1000, {3, 2}, torch::kInt32);
  m["scalar"] = torch::tensor(3.5f);
  m["empty"] = torch::zeros({0, 4});
  m["transposed"] = torch::randn({3, 5}).t();  // non-contiguous input
  return m;
}

}  // namespace

TEST_CASE("safetensors: a file written by Python safetensors reads with its documented values", "[core]") {
  const auto got = hp::core::read_safetensors(kTensorDataDir + "hf_small.safetensors");
  require_matches_sidecar(got, kTensorDataDir + "hf_small.expected.json");
  REQUIRE(hp::core::read_safetensors_metadata(kTensorDataDir + "hf_small.safetensors") ==
          std::map<std::string, std::string>{{"format", "pt"}});
}

TEST_CASE("safetensors: write then read gives equal tensors in every dtype", "[core]") {
  const auto dir = temp_dir();
  const auto m = all_dtypes_map();
  hp::core::write_safetensors(dir + "rt.safetensors", m);
  const auto back = hp::core::read_safetensors(dir + "rt.safetensors");
  REQUIRE(maps_equal(m, back));
  REQUIRE_FALSE(fs::exists(dir + "rt.safetensors.tmp"));
  REQUIRE(hp::core::read_safetensors_metadata(dir + "rt.safetensors") ==
          std::map<std::string, std::string>{{"format", "pt"}});

  // Layout: header length a multiple of 8 (HF pads with spaces); each tensor aligned to its
  // element size; writing twice gives identical bytes.
  const auto bytes = read_text(dir + "rt.safetensors");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  REQUIRE(n % 8 == 0);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  for (const auto& [key, e] : header.items()) {
    if (key == "__metadata__") continue;
    const auto dtype = hp::core::parse_dtype(e.at("dtype").get<std::string>());
    REQUIRE(dtype);
    REQUIRE(e.at("data_offsets")[0].get<std::uint64_t>() % hp::core::dtype_size(*dtype) == 0);
  }
  hp::core::write_safetensors(dir + "rt2.safetensors", m);
  REQUIRE(read_text(dir + "rt2.safetensors") == bytes);

  hp::core::write_safetensors(dir + "nometa.safetensors", m, {});
  REQUIRE(hp::core::read_safetensors_metadata(dir + "nometa.safetensors").empty());
  REQUIRE(read_text(dir + "nometa.safetensors").find("__metadata__") == std::string::npos);

  TensorMap bad{{"b", torch::ones({2}, torch::kBool)}};
  REQUIRE_THROWS_WITH(hp::core::write_safetensors(dir + "bool.safetensors", bad),
                      Catch::Contains("tensor 'b' has dtype Bool"));
}

TEST_CASE("safetensors: to_float32 widens floats and keeps integers", "[core]") {
  const auto m = hp::core::to_float32(all_dtypes_map());
  for (const auto& [key, t] : all_dtypes_map()) {
    INFO(key);
    const auto& g = m.at(key);
    REQUIRE(g.scalar_type() == (t.is_floating_point() ? torch::kFloat32 : t.scalar_type()));
    if (t.scalar_type() == torch::kFloat64) {
      REQUIRE(torch::equal(g, t.to(torch::kFloat32)));  // narrowing: same as a plain cast
    } else {
      REQUIRE(torch::equal(g.to(torch::kFloat64), t.to(torch::kFloat64)));  // widening is exact
    }
  }
}

TEST_CASE("safetensors: every malformed file is a CheckpointError naming file and cause", "[core]") {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\x01');
  struct Case {
    const char* label;
    std::string bytes;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {"short", std::string(5, '\0'), "5 bytes, shorter than the 8-byte"},
      {"empty", "", "0 bytes, shorter than the 8-byte"},
      {"huge_header", image("{}", "", 200'000'000), "above the 100 MB limit"},
      {"header_past_end", image("{}", "", 50), "header length 50 bytes runs past the end of the file"},
      {"bad_json", image("{\"a\": [", ""), "header is not valid JSON"},
      {"not_object", image("[1,2]", ""), "header JSON is not an object"},
      {"no_dtype", image(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", eight), "tensor 'a' is missing 'dtype'"},
      {"no_shape", image(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", eight), "tensor 'a' is missing 'shape'"},
      {"no_offsets", image(R"({"a":{"dtype":"F32","shape":[2]}})", eight), "is missing 'data_offsets'"},
      {"unknown_dtype", image(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", eight),
       "unsupported dtype 'U8'"},
      {"size_mismatch", image(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", std::string(20, 'x')),
       "needs 24 bytes but data_offsets span 20"},
      {"negative_dim", image(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
       "negative dimension"},
      {"reversed_offsets", image(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight), "end before they begin"},
      {"past_buffer", image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight),
       "run past the data buffer (8 bytes)"},
      {"overlap",
       image("{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, 'x')),
       "tensors 'a' [0, 8] and 'b' [4, 12] overlap"},
      {"gap", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, 'x')),
       "gap of 4 bytes before tensor 'a'"},
      {"trailing", image("{" + ok_entry + "}", std::string(12, 'x')), "4 trailing bytes"},
      {"bad_metadata", image(R"({"__metadata__":{"format":1},)" + ok_entry + "}", eight),
       "__metadata__ value for 'format' is not a string"},
  };
  const auto dir = temp_dir();
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.label) {
      const std::string path = dir + c.label + ".safetensors";
      write_bytes(path, c.bytes);
      REQUIRE_THROWS_AS(hp::core::read_safetensors(path), CheckpointError);
      REQUIRE_THROWS_WITH(hp::core::read_safetensors(path),
                          Catch::Contains(path + ": ") && Catch::Contains(c.fragment));
      // The same bytes from memory fail the same way (the torch-free parser is the validator).
      std::vector<std::uint8_t> raw(c.bytes.begin(), c.bytes.end());
      REQUIRE_THROWS_WITH(hp::core::SafetensorsFile::parse(raw, "mem"), Catch::Contains(c.fragment));
    }
  }
  SECTION("well-formed control case parses") {
    const std::string f("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);  // 1.0f, 2.0f little-endian
    write_bytes(dir + "ok.safetensors", image("{" + ok_entry + "}", f));
    const auto m = hp::core::read_safetensors(dir + "ok.safetensors");
    REQUIRE(torch::equal(m.at("a"), torch::tensor({1.0f, 2.0f})));
  }
  SECTION("missing file") {
    REQUIRE_THROWS_WITH(hp::core::read_safetensors(dir + "nope.safetensors"), Catch::Contains("cannot open"));
  }
}

TEST_CASE("torch bin: state dicts saved by torch.save read with their documented values", "[core]") {
  require_matches_sidecar(hp::core::read_torch_bin(kTensorDataDir + "tiny_state_dict.bin"),
                          kTensorDataDir + "tiny_state_dict.expected.json");
  // A transformers BertModel state dict (23 tensors), as HF writes pytorch_model.bin.
  require_matches_sidecar(hp::core::read_torch_bin(kTensorDataDir + "tiny_bert.bin"),
                          kTensorDataDir + "tiny_bert.expected.json");
}

TEST_CASE("torch bin: bad files are CheckpointErrors naming the file", "[core]") {
  const auto dir = temp_dir();
  SECTION("legacy pre-1.6 format") {
    // Start of a legacy torch.save stream: PROTO 2, LONG1 of the magic number
    // 0x1950a86a20f9469cfc6c.
    write_bytes(dir + "legacy.bin", std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14));
    REQUIRE_THROWS_WITH(hp::core::read_torch_bin(dir + "legacy.bin"),
                        Catch::Contains(dir + "legacy.bin: legacy (pre-1.6)") &&
                            Catch::Contains("weights_only=True") && !Catch::Contains("torch.load(p), p"));
  }
  SECTION("not a zip") {
    write_bytes(dir + "text.bin", "hello");
    REQUIRE_THROWS_WITH(hp::core::read_torch_bin(dir + "text.bin"), Catch::Contains("not a torch.save zip"));
  }
  SECTION("truncated zip") {
    write_bytes(dir + "trunc.bin", read_text(kTensorDataDir + "tiny_state_dict.bin").substr(0, 300));
    REQUIRE_THROWS_WITH(hp::core::read_torch_bin(dir + "trunc.bin"),
                        Catch::Contains(dir + "trunc.bin: cannot read the torch.save archive"));
  }
  SECTION("a tensor instead of a dict") {
    const auto bytes = torch::pickle_save(torch::ones({2}));
    write_bytes(dir + "tensor.bin", std::string(bytes.begin(), bytes.end()));
    REQUIRE_THROWS_WITH(hp::core::read_torch_bin(dir + "tensor.bin"), Catch::Contains("expected a dict"));
  }
  SECTION("a dict with a non-tensor value") {
    c10::Dict<std::string, int64_t> d;
    d.insert("step", 3);
    const auto bytes = torch::pickle_save(d);
    write_bytes(dir + "dict.bin", std::string(bytes.begin(), bytes.end()));
    REQUIRE_THROWS_WITH(hp::core::read_torch_bin(dir + "dict.bin"),
                        Catch::Contains("entry 'step' is a int, not a Tensor"));
  }
  SECTION("missing file") {
    REQUIRE_THROWS_WITH(hp::core::read_torch_bin(dir + "nope.bin"), Catch::Contains("cannot open"));
  }
}

TEST_CASE("torch bin: the state-dict unpickler rejects what is not a flat dict of tensors", "[core]") {
  const auto parse = [](const std::string& bytes) {
    return hp::core::parse_state_dict_pickle(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(),
                                             "x.pkl");
  };
  REQUIRE(parse(std::string("\x80\x02}.", 4)).empty());  // PROTO 2, EMPTY_DICT, STOP
  REQUIRE_THROWS_WITH(parse(std::string("\x80\x02K\x05.", 5)), Catch::Contains("x.pkl: holds a int, expected a dict"));
  REQUIRE_THROWS_WITH(parse(std::string("\x80\x02}(X\x05\x00\x00\x00"
                                        "ab",
                                        12)),
                      Catch::Contains("x.pkl: data.pkl is truncated"));
  REQUIRE_THROWS_WITH(parse(std::string("\x80\x02\xff", 3)), Catch::Contains("pickle opcode 0xff"));
  // {'a': -256} with LONG1 (2 bytes, 0x00 0xff = -256): a non-tensor entry.
  REQUIRE_THROWS_WITH(parse(std::string("\x80\x02}(X\x01\x00\x00\x00"
                                        "a\x8a\x02\x00\xff"
                                        "u.",
                                        16)),
                      Catch::Contains("entry 'a' is a int, not a Tensor"));
  REQUIRE_THROWS_WITH(parse(std::string("\x80\x02"
                                        "cos\nsystem\n)R.")),
                      Catch::Contains("unsupported global 'os.system'"));
}

TEST_CASE("hdf5: write then read gives equal values, float32 and int64", "[core]") {
  const auto dir = temp_dir();
  auto m = all_dtypes_map();
  m["importance/taylor"] = torch::rand({2, 4});  // a '/' makes a group
  const std::map<std::string, std::string> attrs{{"config_hash", "abc123"}, {"seed", "7"}};
  hp::core::write_hdf5(dir + "out.h5", m, attrs);
  REQUIRE_FALSE(fs::exists(dir + "out.h5.tmp"));
  const auto back = hp::core::read_hdf5(dir + "out.h5");
  REQUIRE(back.size() == m.size());
  for (const auto& [key, t] : m) {
    INFO(key);
    REQUIRE(back.count(key) == 1);  // dotted keys stay one flat dataset name
    const auto& g = back.at(key);
    REQUIRE(g.scalar_type() == (t.is_floating_point() ? torch::kFloat32 : torch::kInt64));
    REQUIRE(torch::equal(g, t.to(g.scalar_type()).contiguous()));
  }
  REQUIRE(hp::core::read_hdf5_attrs(dir + "out.h5") == attrs);
  write_bytes(dir + "not.h5", "not hdf5");
  REQUIRE_THROWS_WITH(hp::core::read_hdf5(dir + "not.h5"), Catch::Contains(dir + "not.h5: HDF5 read failed"));
}

// Needs the venv with pip safetensors: checks that HF's reader loads what our writer writes.
TEST_CASE("safetensors: Python safetensors reads our file", "[.hf]") {
  const auto dir = temp_dir();
  std::map<std::string, std::string> dtypes;
  const auto want = expected_from_sidecar(kTensorDataDir + "hf_small.expected.json", &dtypes);
  TensorMap m;
  const std::map<std::string, torch::ScalarType> kind{{"F64", torch::kFloat64}, {"F32", torch::kFloat32},
                                                      {"F16", torch::kFloat16}, {"BF16", torch::kBFloat16},
                                                      {"I64", torch::kInt64},   {"I32", torch::kInt32}};
  for (const auto& [key, t] : want) m[key] = t.to(kind.at(dtypes.at(key)));
  hp::core::write_safetensors(dir + "ours.safetensors", m);
  const std::string python = HP_REF_PYTHON;
  if (!std::filesystem::exists(python))
    return hp::test::skip("no Python reference at " + python + " (scripts/setup.sh)");
  const std::string cmd = python + " " + hp::test::kSourceDir + "/tools/make_tensor_fixtures.py check " + dir +
                          "ours.safetensors " + kTensorDataDir + "hf_small.expected.json";
  REQUIRE(std::system(cmd.c_str()) == 0);
}
