// Data parallelism over LibTorch's c10d: Gloo on CPU, launched the way torchrun launches PyTorch programs.
//
// Launch: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun; a hand
// launch sets them the same way), else SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID with MASTER_ADDR and
// MASTER_PORT. Without them: one process, and every function here is a no-op.
//
// Model of a run: every rank runs the same program on the same data and takes the same decisions; the
// expensive loops (evaluation batches, ranking batches, heads of leave-one-out, training examples of a
// batch) are split by `mine(i)` and their sums all-reduced, so every rank holds the same numbers. Files
// are written by rank 0 only (core/base/files.h `shared_write`, with a barrier before and after, so that a
// rank never reads a file while rank 0 replaces it); the run folder must be one that every rank sees (one
// machine, or a shared file system). Logs and progress come from rank 0; errors from every rank, with
// its rank in the line.
//
// Faults: every collective waits at most run.dist_timeout_s. A rank that fails records its error in the
// rendezvous store; a rank that dies or hangs stops its heartbeat. The ranks still waiting stop with one
// line naming the rank (and its error), and the run folder stays resumable.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace hp::core::dist {

struct Env {
  int rank = 0, world = 1, local_rank = 0, local_world = 1;
  std::string master_addr, source;  // source: "torchrun", "slurm" or "" (one process)
  int master_port = 0;
  bool agent_store = false;  // torchrun's agent hosts the store at MASTER_ADDR:MASTER_PORT (every rank a client)
};

// The launch variables (see above). `get` is getenv (tests pass their own). ConfigError naming the
// variable and the fix when one is malformed, out of range or missing beside the others.
Env read_env(const std::function<const char*(const char*)>& get);

// Joins the process group of `env` (the TCPStore rendezvous at MASTER_ADDR:MASTER_PORT is torchrun's, or
// hosted by rank 0 in a hand or SLURM launch),
// then refuses to go on unless every rank has the same `identity` (the resolved config and a hash of the
// weights): a rank started with another config or model fails at start-up with the first differing line.
// A no-op for one process. Throws RuntimeError naming the rank on a failed rendezvous.
void init(const Env& env, double timeout_s, const std::string& identity);
// Leaves the group (joins the heartbeat thread). Safe to call more than once.
void shutdown();

bool active();  // world > 1
int rank();
int world();
inline bool is_main() { return rank() == 0; }
// Item i of a loop split over ranks: round-robin, so that loops over length-sorted batches stay balanced.
inline bool mine(long i) { return i % world() == rank(); }

// In-place sum over ranks of a contiguous tensor (float32/float64/int64; a device tensor through a host copy);
// `what` names the step in errors. Exact when each element is non-zero on one rank only (a split loop writing its own rows).
void all_reduce_sum(torch::Tensor& t, const std::string& what);
// Sums gradients over ranks while the backward pass runs, as PyTorch's DDP does: the parameters go into
// ~25 MB buckets in reverse order (the backward reaches the last ones first); a hook on each parameter
// copies its gradient into its bucket, and a full bucket's all-reduce starts at once, buckets always in the
// same order on every rank. finish() starts the rest (a gradient that never came counts as zero: a rank
// without rows this step), waits, and writes every .grad. One process: nothing is hooked, finish() does
// nothing. Live for one phase of training; its hooks go with it.
class GradientReducer {
 public:
  explicit GradientReducer(std::vector<torch::Tensor> params);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;
  void start_step();  // before the backward pass
  void finish();  // after it

 private:
  struct Bucket {
    std::vector<size_t> members;
    std::vector<int64_t> offsets;
    torch::Tensor flat;
    size_t ready = 0;
    bool started = false;
  };
  void arrived(size_t param, const torch::Tensor& grad);
  void start_ready(bool all);
  std::vector<torch::Tensor> params_;
  std::vector<unsigned> hooks_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;  // this step's bucket all-reduces
  size_t next_ = 0;
};

// True when `flag` is true on any rank (a stop request seen by one rank stops all at the same step).
bool any(bool flag, const std::string& what);
void barrier(const std::string& what);
// A stop request (Ctrl-C, SIGTERM) seen by any rank, answered at the same point on every rank.
bool stop_requested(const std::atomic<bool>* stop);
// Rank 0 runs `decide` (with a barrier first, so it sees every rank's earlier reads done) and every rank
// returns its value; an error on rank 0 is rank 0's to report (the others stop naming it).
long main_decides(const std::function<long()>& decide, const std::string& what);

// Records this rank's fatal error in the store for the others (main's handler calls it).
void report_failure(const std::string& message);
// "rank 1/2: " when active, "" otherwise: the prefix of this rank's error lines.
std::string error_prefix();

}  // namespace hp::core::dist
