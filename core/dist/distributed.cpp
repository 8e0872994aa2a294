// Data parallelism over c10d (see core/dist/distributed.h).
#include "core/dist/distributed.h"

#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>
#ifdef HP_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"

namespace hp::core::dist {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

#ifdef HP_WITH_GLOO
using Group = c10d::ProcessGroupGloo;
#else
// A build without Gloo's headers (LibTorch 2.x from pip: CMakeLists.txt) has no process group: init refuses a
// run of several processes, so nothing below is ever called on one.
struct Group : c10::intrusive_ptr_target {
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<torch::Tensor>&) { return {}; }
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<torch::Tensor>&) { return {}; }
};
#endif

struct State {
  Env env;
  milliseconds timeout{300000};
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<Group> pg;
  std::thread heartbeat;
  std::atomic<bool> stop_heartbeat{false};
  // What the collectives cost this rank: how many, the bytes it sent into them, and the seconds it spent in
  // them (moving data and waiting for the slowest rank), against the time since start-up.
  long collectives = 0;
  double bytes = 0, seconds = 0;
  double overlapped_bytes = 0;  // gradient buckets started while the backward pass still ran
  Clock::time_point started;
};

State& S() {
  static State s;
  return s;
}

std::string key(const std::string& what, int r) { return "hp/" + what + "/" + std::to_string(r); }

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

long parse_int(const char* name, const char* value, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value, &end, 10);
  if (errno || end == value || *end || v < lo || v > hi)
    throw ConfigError(std::string("the launch variable ") + name + "=" + value + " is not an integer in " +
                      std::to_string(lo) + ".." + std::to_string(hi) +
                      "; launch with torchrun or set it as torchrun does");
  return v;
}

const char* resumable =
    "; the run folder keeps its finished work: relaunch to resume (prune train: add --resume RUN_DIR)";

// A rank has failed or died: names it (its recorded error, or its stopped heartbeat) and throws.
[[noreturn]] void stop_naming_the_rank(const std::string& what, const std::string& cause) {
  State& s = S();
  const std::string where = "during " + what;
  try {
    s.store->setTimeout(milliseconds(5000));
    for (int r = 0; r < s.env.world; ++r) {
      if (r == s.env.rank || !s.store->check({key("failed", r)})) continue;
      s.store->add("hp/failure_seen", 1);
      throw DistributedError("stopping " + where + ": rank " + std::to_string(r) +
                             " failed: " + text(s.store->get(key("failed", r))) + resumable);
    }
    // No recorded error: a rank that died or hangs stops its heartbeat.
    std::vector<int64_t> before(s.env.world);
    for (int r = 0; r < s.env.world; ++r) before[r] = s.store->add(key("beat", r), 0);
    std::this_thread::sleep_for(milliseconds(2500));
    std::string silent;
    for (int r = 0; r < s.env.world; ++r)
      if (r != s.env.rank && s.store->add(key("beat", r), 0) == before[r])
        silent += (silent.empty() ? "" : ", ") + std::to_string(r);
    if (!silent.empty())
      throw DistributedError("stopping " + where + ": rank " + silent +
                             " stopped responding (died or hangs: no heartbeat for 2.5 s)" + resumable);
  } catch (const hp::Error&) {
    throw;
  } catch (const std::exception&) {
    // The store itself is unreachable: rank 0, which hosts it, is gone (or the torchrun agent that does).
    const std::string at = s.env.master_addr + ":" + std::to_string(s.env.master_port);
    throw DistributedError("stopping " + where + ": " +
                           (s.env.agent_store
                                ? "the torchrun agent's store at " + at + " is gone"
                                : "rank 0 stopped responding (the store it hosts at " + at + " is gone)") +
                           resumable);
  }
  throw DistributedError("stopping " + where + ": " + cause + resumable);
}

// Waits for a collective, watching for failed ranks and the timeout.
void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
  State& s = S();
  const auto start = Clock::now();
  struct Account {
    State& s;
    Clock::time_point start;
    ~Account() {
      ++s.collectives;
      s.seconds += std::chrono::duration<double>(Clock::now() - start).count();
    }
  } account{s, start};
  auto next_check = start + milliseconds(500);
  int spins = 0;
  while (!work->isCompleted()) {
    if (++spins < 2000) std::this_thread::yield();
    else std::this_thread::sleep_for(milliseconds(1));
    const auto now = Clock::now();
    if (now < next_check) continue;
    next_check = now + milliseconds(500);
    for (int r = 0; r < s.env.world; ++r) {
      bool failed = false;
      try {
        failed = r != s.env.rank && s.store->check({key("failed", r)});
      } catch (const std::exception& e) {
        stop_naming_the_rank(what, e.what());
      }
      if (failed) stop_naming_the_rank(what, "");
    }
    if (now - start > s.timeout)
      stop_naming_the_rank(
          what, "the ranks did not meet within run.dist_timeout_s = " + std::to_string(s.timeout.count() / 1000) +
                    " s though every rank is alive (one is stuck or took another path)");
  }
  try {
    work->wait();
  } catch (const std::exception& e) {
    stop_naming_the_rank(what, e.what());
  }
}

// A client of the rendezvous store that waits for nobody: the heartbeat's, and the probe of torchrun's store.
c10d::TCPStoreOptions client_options(const Env& env, milliseconds timeout) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(env.master_port);
  o.isServer = false;
  o.waitWorkers = false;
  o.timeout = timeout;
  return o;
}

void heartbeat_loop(Env env) {
  try {
    c10d::TCPStore store(env.master_addr, client_options(env, milliseconds(10000)));
    while (!S().stop_heartbeat.load()) {
      store.add(key("beat", env.rank), 1);
      for (int i = 0; i < 10 && !S().stop_heartbeat.load(); ++i) std::this_thread::sleep_for(milliseconds(100));
    }
  } catch (const std::exception&) {
    // The store is gone (rank 0 ended): nothing left to tell.
  }
}

void shared_write_on_main(const std::function<void()>& write) {
  barrier("a write to the run folder");
  if (is_main()) write();
  barrier("a write to the run folder");
}

long decide_on_main(const std::function<long()>& decide) {
  return main_decides(decide, "a decision about the run folder");
}

// The first line where two resolved configs differ, without YAML comments and indentation.
std::string first_difference(const std::string& a, const std::string& b) {
  auto bare = [](std::string l) {
    if (auto c = l.find(" #"); c != std::string::npos) l.resize(c);
    const auto first = l.find_first_not_of(' ');
    return first == std::string::npos ? std::string() : l.substr(first);
  };
  std::istringstream x(a), y(b);
  std::string la, lb;
  while (true) {
    const bool ga = static_cast<bool>(std::getline(x, la)), gb = static_cast<bool>(std::getline(y, lb));
    if (!ga && !gb) return "";
    if (!ga || !gb || la != lb)
      return "'" + (ga ? bare(la) : "<end>") + "' here, '" + (gb ? bare(lb) : "<end>") + "' on rank 0";
  }
}

}  // namespace

Env read_env(const std::function<const char*(const char*)>& get) {
  Env e;
  const char* rank = get("RANK");
  const char* world = get("WORLD_SIZE");
  if (rank || world) {
    e.source = "torchrun";
  } else if (get("SLURM_PROCID") && get("SLURM_NTASKS")) {
    e.source = "slurm";
    rank = get("SLURM_PROCID"), world = get("SLURM_NTASKS");
  } else {
    return e;
  }
  const bool slurm = e.source == "slurm";
  if (!rank || !world)
    throw ConfigError(std::string(rank ? "RANK" : "WORLD_SIZE") + " is set but " + (rank ? "WORLD_SIZE" : "RANK") +
                      " is not; set both (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)");
  e.world = static_cast<int>(parse_int(slurm ? "SLURM_NTASKS" : "WORLD_SIZE", world, 1, 65536));
  e.rank = static_cast<int>(parse_int(slurm ? "SLURM_PROCID" : "RANK", rank, 0, e.world - 1));
  const char* local = get(slurm ? "SLURM_LOCALID" : "LOCAL_RANK");
  e.local_rank = local ? static_cast<int>(parse_int(slurm ? "SLURM_LOCALID" : "LOCAL_RANK", local, 0, e.world - 1)) : 0;
  const char* local_world = get(slurm ? "SLURM_NTASKS_PER_NODE" : "LOCAL_WORLD_SIZE");
  e.local_world =
      local_world && std::string(local_world).find_first_not_of("0123456789") == std::string::npos
          ? static_cast<int>(parse_int(slurm ? "SLURM_NTASKS_PER_NODE" : "LOCAL_WORLD_SIZE", local_world, 1, e.world))
          : (local ? e.world : 1);
  if (e.world == 1) return e;
  const char* addr = get("MASTER_ADDR");
  const char* port = get("MASTER_PORT");
  if (!addr || !*addr || !port)
    throw ConfigError(std::string(addr && *addr ? "MASTER_PORT" : "MASTER_ADDR") + " is not set for a run of " +
                      std::to_string(e.world) +
                      " processes; set MASTER_ADDR to rank 0's host and MASTER_PORT to a free port " +
                      "(torchrun sets both)");
  e.master_addr = addr;
  e.master_port = static_cast<int>(parse_int("MASTER_PORT", port, 1, 65535));
  const char* agent = get("TORCHELASTIC_USE_AGENT_STORE");
  e.agent_store = agent && std::string(agent) == "True";
  return e;
}

#ifdef HP_WITH_GLOO
// torchrun's agent hosts the store before it starts any worker, so it answers a client at once; one that resets the
// connection, or never answers, speaks another protocol: LibTorch 2.x's client opens with a handshake that torch
// 1.x's store resets (and would retry for all of run.dist_timeout_s), and a 2.x store never answers a 1.x client's
// first query (which would wait forever). One short exchange first, in a thread of its own, named for what it is.
static void probe_agent_store(const Env& env, const std::string& where) {
  struct Probe {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::string error;
  };
  auto p = std::make_shared<Probe>();
  std::thread([p, env] {
    std::string error;
    try {
      c10d::TCPStore probe(env.master_addr, client_options(env, milliseconds(5000)));
      probe.add("hp/probe/" + std::to_string(env.rank), 0);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lock(p->m);
    p->done = true, p->error = error;
    p->cv.notify_all();
  }).detach();  // left blocked in a read when the store never answers: the run ends with the error below
  std::unique_lock<std::mutex> lock(p->m);
  const bool answered = p->cv.wait_for(lock, milliseconds(15000), [&] { return p->done; });
  // Spoke, or failed another way (which the real try then reports).
  if (answered && p->error.find("reset by peer") == std::string::npos) return;
  throw DistributedError(where + ": torchrun's store " + (answered ? "reset the connection at" : "did not answer") +
                         " the first exchange: the launcher's torch is not the LibTorch " + TORCH_VERSION +
                         " this prune is built on, and their stores speak different protocols; launch with that " +
                         "torch's own torchrun (python -m torch.distributed.run from torch " + TORCH_VERSION + ")");
}
#endif

void init(const Env& env, double timeout_s, const std::string& identity) {
  if (env.world <= 1) return;
  State& s = S();
  s.env = env;
  s.timeout = milliseconds(static_cast<long>(timeout_s * 1000));
  const std::string where =
      "rank " + std::to_string(env.rank) + ": rendezvous at " + env.master_addr + ":" + std::to_string(env.master_port);
#ifndef HP_WITH_GLOO
  throw DistributedError(where + ": this build of headprune has no Gloo (it was built without Gloo's headers, as " +
                         "against the pip wheel of LibTorch 2.x); run one process, or build with Debian's " +
                         "libgloo-dev (scripts/setup.sh)");
#else
  if (env.agent_store) probe_agent_store(env, where);
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(env.master_port);
    o.isServer = env.rank == 0 && !env.agent_store;
    o.numWorkers = env.world;
    o.waitWorkers = true;
    o.timeout = s.timeout;
    s.store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
    auto opts = c10d::ProcessGroupGloo::Options::create(s.timeout);
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    const bool loopback = env.master_addr == "localhost" || env.master_addr.rfind("127.", 0) == 0;
    opts->devices.push_back(ifname     ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                            : loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                       : c10d::ProcessGroupGloo::createDefaultDevice());
    opts->threads = 2;
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("hp/gloo", s.store);
    s.pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, env.rank, env.world, opts);
  } catch (const std::exception& e) {
    std::string m = e.what();
    if (auto nl = m.find('\n'); nl != std::string::npos) m.resize(nl);
    throw DistributedError(where + " failed (" + m + "); check MASTER_ADDR/MASTER_PORT and that all " +
                           std::to_string(env.world) + " ranks start within run.dist_timeout_s");
  }
#endif
  s.stop_heartbeat = false;
  s.started = Clock::now();
  s.heartbeat = std::thread(heartbeat_loop, env);
  set_shared_write(&shared_write_on_main, &decide_on_main);
  set_log_quiet(env.rank != 0);
  if (env.rank != 0) std::cout.setstate(std::ios::failbit);  // results are printed once, by rank 0
  // Every rank must run the same config on the same weights.
  s.store->set(key("identity", env.rank), bytes(identity));
  const std::string main_identity = text(s.store->get(key("identity", 0)));
  if (env.rank != 0 && identity != main_identity) {
    const std::string d = first_difference(identity, main_identity);
    throw ConfigError("this rank's config or model differs from rank 0's (" + (d.empty() ? "weights" : d) +
                      "); start every rank with the same command and files");
  }
  for (int r = 1; r < env.world && env.rank == 0; ++r)
    if (text(s.store->get(key("identity", r))) != identity)
      throw ConfigError("rank " + std::to_string(r) +
                        " was started with another config or model; start every rank "
                        "with the same command and files");
  barrier("start-up");
}

void shutdown() {
  State& s = S();
  if (!s.pg) return;
  try {
    barrier("the end of the run");
  } catch (const std::exception&) {}
  const double run_s = std::chrono::duration<double>(Clock::now() - s.started).count();
  char line[300];
  std::snprintf(line, sizeof line,
                "%ld collectives, %.1f MB all-reduced (%.1f MB started during backward passes), "
                "%.2f s waiting for them (%.1f%% of %.1f s; moving data and waiting for the slowest rank)",
                s.collectives, s.bytes / 1e6, s.overlapped_bytes / 1e6, s.seconds,
                run_s > 0 ? 100 * s.seconds / run_s : 0.0, run_s);
  log_info("dist", line);
  s.stop_heartbeat = true;
  if (s.heartbeat.joinable()) s.heartbeat.join();
  set_shared_write(nullptr, nullptr);
  s.pg.reset();
  s.store.reset();
}

bool active() { return static_cast<bool>(S().pg); }
int rank() { return S().pg ? S().env.rank : 0; }
int world() { return S().pg ? S().env.world : 1; }

void all_reduce_sum(torch::Tensor& t, const std::string& what) {
  if (!active()) return;
  HP_CHECK(t.is_contiguous(), "all_reduce_sum needs a contiguous tensor");
  // Gloo sums host memory: a device tensor goes through a host copy (a synchronisation, data-parallel runs only).
  std::vector<torch::Tensor> v{t.device().is_cpu() ? t : t.cpu()};
  S().bytes += static_cast<double>(t.numel() * static_cast<int64_t>(t.element_size()));
  wait(S().pg->allreduce(v), what);
  if (!t.device().is_cpu()) t.copy_(v[0]);
}

GradientReducer::GradientReducer(std::vector<torch::Tensor> params) {
  if (!active()) return;
  for (auto& p : params)
    if (p.requires_grad()) params_.push_back(p);
  constexpr int64_t kBucketBytes = 25 << 20;
  bucket_of_.assign(params_.size(), 0);
  int64_t filled = 0;
  for (size_t k = params_.size(); k-- > 0;) {  // reverse: the backward pass reaches the last parameters first
    const auto& p = params_[k];
    HP_CHECK(p.scalar_type() == torch::kFloat, "GradientReducer: float32 parameters only");
    const int64_t bytes = p.numel() * 4;
    if (buckets_.empty() || (filled + bytes > kBucketBytes && filled > 0)) buckets_.emplace_back(), filled = 0;
    auto& b = buckets_.back();
    b.offsets.push_back(b.members.empty() ? 0 : b.offsets.back() + params_[b.members.back()].numel());
    b.members.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    filled += bytes;
  }
  for (auto& b : buckets_) b.flat = torch::zeros({b.offsets.back() + params_[b.members.back()].numel()});
  for (size_t k = 0; k < params_.size(); ++k)
    hooks_.push_back(params_[k].register_hook([this, k](torch::Tensor g) { arrived(k, g); }));
}

GradientReducer::~GradientReducer() {
  for (size_t k = 0; k < hooks_.size(); ++k) params_[k].remove_hook(hooks_[k]);
}

void GradientReducer::start_step() {
  for (auto& b : buckets_) b.flat.zero_(), b.ready = 0, b.started = false;
  works_.clear();
  next_ = 0;
}

void GradientReducer::arrived(size_t k, const torch::Tensor& g) {
  auto& b = buckets_[bucket_of_[k]];
  size_t slot = 0;
  while (b.members[slot] != k) ++slot;
  b.flat.narrow(0, b.offsets[slot], g.numel()).add_(g.reshape(-1));
  ++b.ready;
  start_ready(false);
}

void GradientReducer::start_ready(bool all) {
  while (next_ < buckets_.size() && (all || buckets_[next_].ready >= buckets_[next_].members.size())) {
    auto& b = buckets_[next_++];
    if (!all) S().overlapped_bytes += static_cast<double>(b.flat.numel()) * 4;
    S().bytes += static_cast<double>(b.flat.numel()) * 4;
    std::vector<torch::Tensor> v{b.flat};
    works_.push_back(S().pg->allreduce(v));
    b.started = true;
  }
}

void GradientReducer::finish() {
  if (buckets_.empty()) return;
  start_ready(true);
  for (auto& w : works_) wait(w, "the gradient all-reduce");
  for (const auto& b : buckets_)
    for (size_t slot = 0; slot < b.members.size(); ++slot) {
      auto& p = params_[b.members[slot]];
      auto sum = b.flat.narrow(0, b.offsets[slot], p.numel()).view_as(p);
      if (p.grad().defined()) p.mutable_grad().copy_(sum);
      else p.mutable_grad() = sum.clone();
    }
}

bool any(bool flag, const std::string& what) {
  if (!active()) return flag;
  auto t = torch::full({1}, flag ? 1L : 0L, torch::kLong);
  all_reduce_sum(t, what);
  return t.item<long>() > 0;
}

bool stop_requested(const std::atomic<bool>* stop) { return any(stop && stop->load(), "a stop check"); }

void barrier(const std::string& what) {
  if (!active()) return;
  // A Gloo barrier is an all-reduce of nothing; an all-reduce of one number lets `wait` watch it.
  auto t = torch::zeros({1});
  all_reduce_sum(t, what);
}

long main_decides(const std::function<long()>& decide, const std::string& what) {
  if (!active()) return decide();
  barrier(what);
  auto t = torch::zeros({1}, torch::kLong);
  if (is_main()) t.fill_(decide());
  std::vector<torch::Tensor> v{t};
  wait(S().pg->broadcast(v), what);
  return t.item<long>();
}

void report_failure(const std::string& message) {
  State& s = S();
  if (!s.store) return;
  try {
    s.store->setTimeout(milliseconds(2000));
    s.store->set(key("failed", s.env.rank), bytes(message));
    // Rank 0 hosts the store: it stays a moment so that the others can read why it stopped.
    if (s.env.rank == 0)
      for (int i = 0; i < 50 && s.store->add("hp/failure_seen", 0) < s.env.world - 1; ++i)
        std::this_thread::sleep_for(milliseconds(100));
  } catch (const std::exception&) {}
  s.stop_heartbeat = true;
  if (s.heartbeat.joinable()) s.heartbeat.join();
}

std::string error_prefix() {
  if (!active()) return "";
  return "rank " + std::to_string(rank()) + "/" + std::to_string(world()) + ": ";
}

}  // namespace hp::core::dist
