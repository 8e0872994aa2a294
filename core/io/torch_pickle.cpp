// Minimal unpickler for torch.save state dicts; see core/io/torch_pickle.h. Opcode values and meanings
// follow CPython's Lib/pickletools.py; only those that torch.save emits for tensors, dicts, tuples
// and scalars are implemented, anything else is a clear error rather than a guess.
#include "core/io/torch_pickle.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>

#include "core/base/errors.h"  // CheckpointError

namespace hp::core {
namespace {

enum class Kind { kNone, kBool, kInt, kFloat, kStr, kBytes, kTuple, kList, kDict, kGlobal, kStorage, kTensor };

struct Obj;
using Ptr = std::shared_ptr<Obj>;
struct Obj {
  Kind kind = Kind::kNone;
  std::int64_t i = 0;
  double f = 0;
  std::string s;  // str, bytes, or global "module.name"
  std::vector<Ptr> items;  // tuple, list
  std::vector<std::pair<Ptr, Ptr>> dict;  // dict (insertion order)
  PickledTensor tensor;  // storage (storage_* fields) or tensor
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kStr: return "str";
    case Kind::kBytes: return "bytes";
    case Kind::kTuple: return "tuple";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kGlobal: return "global";
    case Kind::kStorage: return "storage";
    case Kind::kTensor: return "Tensor";
  }
  return "?";
}

constexpr const char* kCorruptFix = "re-download or re-export the checkpoint";
constexpr const char* kFlatFix = "save a flat state dict: torch.save(model.state_dict(), path)";

class Machine {
 public:
  Machine(const std::uint8_t* data, std::size_t size, const std::string& where)
      : p_(data), size_(size), where_(where) {}
  // A pickle can build cycles (a dict put into itself through the memo), which shared_ptr alone never
  // frees: every object made is emptied here, so nothing outlives the machine (found by fuzz_pickle).
  ~Machine() {
    for (const auto& w : made_)
      if (const Ptr o = w.lock()) o->items.clear(), o->dict.clear();
  }
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  Ptr run();

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& fix = kCorruptFix) const {
    throw CheckpointError(where_ + ": " + what + "; " + fix);
  }
  const std::uint8_t* take(std::size_t n) {
    if (n > size_ - pos_) fail("data.pkl is truncated at byte " + std::to_string(pos_));
    const auto* out = p_ + pos_;
    pos_ += n;
    return out;
  }
  std::uint64_t le(std::size_t n) {
    const auto* b = take(n);
    std::uint64_t v = 0;
    for (std::size_t k = n; k-- > 0;) v = (v << 8) | b[k];
    return v;
  }
  std::string line() {
    const auto* start = p_ + pos_;
    const void* nl = std::memchr(start, '\n', size_ - pos_);
    if (nl == nullptr) fail("data.pkl is truncated inside a GLOBAL");
    const auto n = static_cast<std::size_t>(static_cast<const std::uint8_t*>(nl) - start);
    take(n + 1);
    return std::string(reinterpret_cast<const char*>(start), n);
  }
  Ptr make(Kind k) {
    auto o = std::make_shared<Obj>();
    made_.push_back(o);
    o->kind = k;
    return o;
  }
  Ptr pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) {
      fail("data.pkl pops an empty stack");
    }
    Ptr o = std::move(stack_.back());
    stack_.pop_back();
    return o;
  }
  std::vector<Ptr> pop_mark() {
    if (marks_.empty()) fail("data.pkl has no MARK where one is needed");
    std::vector<Ptr> out(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return out;
  }
  Ptr& top() {
    if (stack_.empty()) fail("data.pkl reads an empty stack");
    return stack_.back();
  }
  Ptr tuple(std::vector<Ptr> items) {
    auto t = make(Kind::kTuple);
    t->items = std::move(items);
    return t;
  }
  std::int64_t as_int(const Ptr& o, const char* what) {
    if (o->kind != Kind::kInt && o->kind != Kind::kBool)
      fail(std::string(what) + " is a " + kind_name(o->kind) + ", expected int");
    return o->i;
  }
  std::vector<std::int64_t> as_ints(const Ptr& o, const char* what) {
    if (o->kind != Kind::kTuple && o->kind != Kind::kList) fail(std::string(what) + " is not a tuple");
    std::vector<std::int64_t> out;
    for (const auto& x : o->items) out.push_back(as_int(x, what));
    return out;
  }
  void set_items(const Ptr& dict, const std::vector<Ptr>& kv) {
    if (dict->kind != Kind::kDict) fail(std::string("SETITEMS on a ") + kind_name(dict->kind), kFlatFix);
    if (kv.size() % 2 != 0) fail("SETITEMS with an odd number of items");
    for (std::size_t k = 0; k < kv.size(); k += 2) dict->dict.emplace_back(kv[k], kv[k + 1]);
  }
  Ptr reduce(const Ptr& callable, const Ptr& args);
  Ptr persistent(const Ptr& pid);

  const std::uint8_t* p_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::string where_;
  std::vector<Ptr> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Ptr> memo_;
  std::vector<std::weak_ptr<Obj>> made_;  // every object, for the destructor
};

// The callables torch.save state dicts use; anything else is not a plain state dict.
Ptr Machine::reduce(const Ptr& callable, const Ptr& args) {
  if (callable->kind != Kind::kGlobal || args->kind != Kind::kTuple) fail("REDUCE without a global and a tuple");
  const std::string& g = callable->s;
  const auto& a = args->items;
  if (g == "collections.OrderedDict" || g == "builtins.dict") {
    if (!a.empty()) fail("OrderedDict called with arguments", kFlatFix);
    return make(Kind::kDict);
  }
  if (g == "torch._utils._rebuild_tensor_v2" || g == "torch._utils._rebuild_tensor") {
    if (a.size() < 4 || a[0]->kind != Kind::kStorage) fail(g + " with unexpected arguments");
    auto t = make(Kind::kTensor);
    t->tensor = a[0]->tensor;
    t->tensor.offset = as_int(a[1], "storage offset");
    t->tensor.size = as_ints(a[2], "tensor size");
    t->tensor.stride = as_ints(a[3], "tensor stride");
    if (t->tensor.size.size() != t->tensor.stride.size()) fail("tensor size and stride differ in rank");
    return t;
  }
  if (g == "torch.jit._pickle.restore_type_tag") {  // LibTorch's pickle_save tags typed dicts
    if (a.empty()) fail(g + " without a value");
    return a[0];
  }
  if (g == "torch._utils._rebuild_parameter" || g == "torch._utils._rebuild_parameter_with_state") {
    if (a.empty() || a[0]->kind != Kind::kTensor) fail(g + " without a tensor");
    return a[0];
  }
  fail("data.pkl calls unsupported global '" + g + "'", kFlatFix);
}

// ('storage', torch.<Type>Storage, key, location, numel) -> a storage reference.
Ptr Machine::persistent(const Ptr& pid) {
  if (pid->kind != Kind::kTuple || pid->items.size() < 5 || pid->items[0]->kind != Kind::kStr ||
      pid->items[0]->s != "storage" || pid->items[1]->kind != Kind::kGlobal || pid->items[2]->kind != Kind::kStr) {
    fail("data.pkl has a persistent id that is not a torch storage");
  }
  auto s = make(Kind::kStorage);
  const std::string& type = pid->items[1]->s;
  s->tensor.storage_type = type.rfind("torch.", 0) == 0 ? type.substr(6) : type;
  s->tensor.storage_key = pid->items[2]->s;
  s->tensor.storage_numel = as_int(pid->items[4], "storage numel");
  return s;
}

Ptr Machine::run() {
  for (;;) {
    const std::uint8_t op = *take(1);
    switch (op) {
      case 0x80: take(1); break;  // PROTO
      case 0x95: take(8); break;  // FRAME
      case '.': return pop();  // STOP
      case '(': marks_.push_back(stack_.size()); break;  // MARK
      case 'N': stack_.push_back(make(Kind::kNone)); break;
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        auto b = make(Kind::kBool);
        b->i = op == 0x88;
        stack_.push_back(b);
        break;
      }
      case 'J':
      case 'K':
      case 'M': {  // BININT, BININT1, BININT2
        auto v = make(Kind::kInt);
        v->i = op == 'J' ? static_cast<std::int32_t>(le(4)) : static_cast<std::int64_t>(le(op == 'K' ? 1 : 2));
        stack_.push_back(v);
        break;
      }
      case 0x8a: {  // LONG1: n-byte two's complement
        const std::size_t n = *take(1);
        if (n > 8) fail("integer wider than 64 bits");
        std::uint64_t u = n ? le(n) : 0;
        if (n > 0 && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~std::uint64_t{0} << (8 * n);  // sign-extend
        auto v = make(Kind::kInt);
        v->i = static_cast<std::int64_t>(u);
        stack_.push_back(v);
        break;
      }
      case 'G': {  // BINFLOAT: big-endian double
        const auto* b = take(8);
        std::uint64_t u = 0;
        for (int k = 0; k < 8; ++k) u = (u << 8) | b[k];
        auto v = make(Kind::kFloat);
        std::memcpy(&v->f, &u, 8);
        stack_.push_back(v);
        break;
      }
      case 'X':
      case 0x8c:
      case 0x8d:
      case 'C':
      case 'B': {  // (SHORT_)BINUNICODE(8), (SHORT_)BINBYTES
        const std::size_t n = op == 0x8c || op == 'C' ? le(1) : op == 0x8d ? le(8) : le(4);
        const auto* b = take(n);
        auto v = make(op == 'C' || op == 'B' ? Kind::kBytes : Kind::kStr);
        v->s.assign(reinterpret_cast<const char*>(b), n);
        stack_.push_back(v);
        break;
      }
      case ']': stack_.push_back(make(Kind::kList)); break;  // EMPTY_LIST
      case '}': stack_.push_back(make(Kind::kDict)); break;  // EMPTY_DICT
      case ')': stack_.push_back(tuple({})); break;  // EMPTY_TUPLE
      case 't': stack_.push_back(tuple(pop_mark())); break;  // TUPLE
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        std::vector<Ptr> items(op - 0x84);
        for (auto k = items.size(); k-- > 0;) items[k] = pop();
        stack_.push_back(tuple(std::move(items)));
        break;
      }
      case 'a': {
        auto v = pop();
        auto& l = top();
        if (l->kind != Kind::kList) fail("APPEND on a non-list");
        l->items.push_back(v);
        break;
      }
      case 'e': {
        auto v = pop_mark();
        auto& l = top();
        if (l->kind != Kind::kList) fail("APPENDS on a non-list");
        l->items.insert(l->items.end(), v.begin(), v.end());
        break;
      }
      case 'd': {
        auto d = make(Kind::kDict);
        set_items(d, pop_mark());
        stack_.push_back(d);
        break;
      }  // DICT
      case 's': {
        auto v = pop();
        auto k = pop();
        set_items(top(), {k, v});
        break;
      }  // SETITEM
      case 'u': {
        auto kv = pop_mark();
        set_items(top(), kv);
        break;
      }  // SETITEMS
      case 'q': memo_[le(1)] = top(); break;  // BINPUT
      case 'r': memo_[le(4)] = top(); break;  // LONG_BINPUT
      case 0x94: memo_[memo_.size()] = top(); break;  // MEMOIZE
      case 'h':
      case 'j': {  // BINGET, LONG_BINGET
        const auto it = memo_.find(le(op == 'h' ? 1 : 4));
        if (it == memo_.end()) fail("data.pkl reads a memo slot it never wrote");
        stack_.push_back(it->second);
        break;
      }
      case 'c': {  // GLOBAL module\nname\n
        auto g = make(Kind::kGlobal);
        const std::string module = line();
        g->s = module + "." + line();
        stack_.push_back(g);
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        auto name = pop();
        auto module = pop();
        if (name->kind != Kind::kStr || module->kind != Kind::kStr) fail("STACK_GLOBAL without strings");
        auto g = make(Kind::kGlobal);
        g->s = module->s + "." + name->s;
        stack_.push_back(g);
        break;
      }
      case 'R': {
        auto args = pop();
        auto fn = pop();
        stack_.push_back(reduce(fn, args));
        break;
      }
      case 'Q': {
        auto pid = pop();
        stack_.push_back(persistent(pid));
        break;
      }  // BINPERSID
      case 'b': pop(); break;  // BUILD: state (OrderedDict._metadata, tensor hooks) is not needed
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail("data.pkl uses pickle opcode " + std::string(hex) + " at byte " + std::to_string(pos_ - 1) +
                 ", which a torch.save state dict never contains",
             kFlatFix);
      }
    }
  }
}

}  // namespace

std::vector<PickledTensor> parse_state_dict_pickle(const std::uint8_t* data, std::size_t size,
                                                   const std::string& where) {
  Machine machine(data, size, where);  // alive until the tensors are copied out (it frees the objects)
  const Ptr root = machine.run();
  if (root->kind != Kind::kDict) {
    throw CheckpointError(where + ": holds a " + kind_name(root->kind) + ", expected a dict of str -> Tensor; " +
                          kFlatFix);
  }
  std::vector<PickledTensor> out;
  for (const auto& [k, v] : root->dict) {
    if (k->kind != Kind::kStr)
      throw CheckpointError(where + ": has a non-string key (" + kind_name(k->kind) + "); " + kFlatFix);
    if (v->kind != Kind::kTensor) {
      throw CheckpointError(where + ": entry '" + k->s + "' is a " + kind_name(v->kind) + ", not a Tensor; " +
                            kFlatFix);
    }
    out.push_back(v->tensor);
    out.back().name = k->s;
  }
  return out;
}

}  // namespace hp::core
