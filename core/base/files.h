// Small file helpers shared by every writer: results are written to PATH.tmp and renamed over PATH, so a
// reader (or a resumed run) never sees half a file, and only ever over a regular file.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace hp::core {

// Makes `path` ready to receive a new regular file: refuses anything that a write-then-rename would
// destroy or cannot replace (a device such as /dev/null, a folder, a FIFO, a socket), and creates missing
// parent folders. Throws InputError naming the path and the fix.
void prepare_output_file(const std::string& path);

// Renames the finished `tmp` over `path`; on failure removes `tmp` and throws InputError.
void commit_output_file(const std::string& tmp, const std::string& path);

// Writes `content` (or `size` bytes) to `path` atomically: prepare_output_file, PATH.tmp, rename.
// Nothing is left behind on failure. Throws InputError.
void write_file_atomic(const std::string& path, const std::string& content);
void write_file_atomic(const std::string& path, const void* bytes, std::size_t size);

// Runs `write` (code that changes the run folder) where it must run: directly in one process; in a
// data-parallel run (core/dist/distributed.h) on rank 0 only, between two barriers, so that no rank reads a file
// while rank 0 replaces it. Nested calls run directly. Every writer below goes through it.
void shared_write(const std::function<void()>& write);
// Runs `write` on this rank alone, whatever the run: for a rank's own file (its share of a data-parallel
// pass), which the other ranks neither write nor read.
void write_own_file(const std::function<void()>& write);
// A decision about the run folder (resume or start, which stage is done) taken by rank 0 alone in a
// data-parallel run, its value given to every rank; directly in one process.
long shared_decide(const std::function<long()>& decide);
// Installed by core/dist/distributed.cpp: how both run when the run is data-parallel.
using SharedWriteFn = void (*)(const std::function<void()>& write);
using SharedDecideFn = long (*)(const std::function<long()>& decide);
void set_shared_write(SharedWriteFn write, SharedDecideFn decide);

// A folder written whole or not at all (a model folder: every file of one export, or the previous content
// untouched). The content goes into a fresh empty folder beside `target` (same parent, so that the final
// rename stays on one file system; hidden: .NAME.tmp-PID-N), and commit() puts it in place in one step: a
// rename where `target` does not exist, else an atomic exchange with it (renameat2 RENAME_EXCHANGE; two renames
// where the file system lacks it) after which the old content is removed. An uncommitted StagedFolder (a failed
// check, an exception) removes its folder, and the parent folders it made, when destroyed. `target` itself is
// never written before commit(); the staging folders a killed writer of `target` left are removed on construction.
// Throws InputError naming `target` and the fix (read-only, not a folder).
class StagedFolder {
 public:
  explicit StagedFolder(const std::string& target);
  ~StagedFolder();
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;
  const std::string& path() const { return path_; }  // where the content is written until commit()
  const std::string& target() const { return target_; }
  void commit();
  // fill(path()), then commit(). An exception from fill removes the folder and is rethrown with the staging path
  // written as the target's (a raw filesystem_error as an InputError naming the target and the fix).
  void write(const std::function<void(const std::string& dir)>& fill);

 private:
  void discard() noexcept;
  std::string target_, path_;
  std::vector<std::string> created_;  // parents of target made for it, deepest first
  bool committed_ = false;
};

// The one rule before a folder is replaced whole (StagedFolder, `prune export --to`, with or without --force): a
// `target` that is the current folder or holds it, or that holds one of `inputs` (what the command reads: its
// label, e.g. "--model", and its path; the target itself may be an input: an export in place), is refused with a
// ConfigError naming the input and the fix, since replacing it would delete what the command stands in or reads.
struct ReadPath {
  std::string label, path;
};
void refuse_replacing_inputs(const std::string& target, const std::vector<ReadPath>& inputs = {});

// Removes every staging folder of a StagedFolder (.NAME.tmp-PID-N) under `dir` whose writer is no longer running,
// and every write_file_atomic NAME.tmp file: what a killed run left, cleared when a run takes its folder's lock over
// (so a run killed between writing its first record and renaming it into place leaves a folder that resumes).
void remove_stale_staging_under(const std::string& dir);

// Whole file as a string. Throws InputError naming the path.
std::string read_file(const std::string& path);

}  // namespace hp::core
